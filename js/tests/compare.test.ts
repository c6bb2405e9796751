import { describe, expect, it } from "vitest";
import { CommDataSource } from "../src/comm-data-source";
import {
  differencesBelow,
  factRows,
  markOf,
  rollupText,
  rowVerdict,
  sameParts,
  scalarChange,
  statsRows,
  UNVERIFIED_TEXT,
  verdict,
} from "../src/compare-format";
import { MemoryCompareSource } from "../src/compare-memory-source";
import { CompareTreeSource, compareNode, DiffNavigator } from "../src/compare-model";
import { type DiffItem, diffParamDecoders, parseCompareState } from "../src/compare-protocol";
import { CommCompareSource } from "../src/compare-source";
import { makeRequest, parseRequest, parseResult } from "../src/protocol";
import { TreeModel } from "../src/tree-model";
import { attachCompareKernel, stats, stepRows, stepSource } from "./compare-fixtures";
import { FakeModel } from "./fake-model";
import { loadGolden } from "./golden";
import { tick } from "./trees";

async function item(source: MemoryCompareSource, path: string[]): Promise<DiffItem> {
  return source.node(path);
}

describe("the compare protocol", () => {
  it("keeps the optional params when they are sent, and checks them", () => {
    const golden = loadGolden("request_diff_children").message;
    const withOnly = { ...golden, params: { ...(golden.params as object), only_changed: true } };
    const parsed = parseRequest(withOnly);
    expect(parsed?.params).toMatchObject({ only_changed: true });
    if (parsed) expect(makeRequest(parsed.id, parsed.method, parsed.params)).toEqual(withOnly);
    expect(
      parseRequest({ ...golden, params: { ...(golden.params as object), only_changed: 1 } }),
    ).toBeNull();
    const refine = { path: [], level: "values", rtol: 1e-5, atol: 0, allow_pickle: false };
    expect(diffParamDecoders.diff_refine(refine, "params")).toEqual(refine);
    expect(() => diffParamDecoders.diff_refine({ ...refine, atol: -1 }, "params")).toThrow(/atol/);
    expect(() => diffParamDecoders.diff_refine({ ...refine, level: "mixed" }, "params")).toThrow(
      /level/,
    );
  });

  it("requires a leaf's dtype, shape and bytes, and takes a node's facts as they come", () => {
    const result = loadGolden("reply_diff_node").message.result as Record<string, unknown>;
    const a = result.a as Record<string, unknown>;
    const { dtype: _, ...noDtype } = a;
    expect(() => parseResult("diff_node", { ...result, a: noDtype })).toThrow(/a\.dtype/);
    const node = { kind: "tensordict", class: "TensorDict", batch_size: [4], names: [null] };
    expect(parseResult("diff_node", { ...result, a: node }).a).toEqual(node);
    const bad = { ...node, batch_size: [-1] };
    expect(() => parseResult("diff_node", { ...result, a: bad })).toThrow(/batch_size/);
  });

  it("reads the compare trait, and nothing else as one", () => {
    const state = loadGolden("state_compare").message;
    const compare = parseCompareState(state.compare);
    expect(compare?.summary.level).toBe("metadata");
    expect(compare?.root.has_children).toBe(true);
    expect(parseCompareState(null)).toBeNull();
    expect(parseCompareState(undefined)).toBeNull();
    expect(parseCompareState({ ...(state.compare as object), summary: null })).toBeNull();
  });
});

describe("the words of the compare view", () => {
  const same: DiffItem = {
    key: "w",
    path: ["w"],
    status: "same",
    changes: [],
    renamed_from: null,
    path_a: null,
    path_b: null,
    kind: "leaf",
    a: { kind: "leaf", class: "Tensor", dtype: "float32", shape: [2], bytes: 8 },
    b: { kind: "leaf", class: "Tensor", dtype: "float32", shape: [2], bytes: 8 },
    fingerprint: null,
    values: null,
    value_equal: null,
    note: null,
    problem: null,
    has_children: false,
    rollup: null,
    unverified: false,
    scalars: null,
  };

  it("say only as much as was compared: never 'equal' for an equal CRC", () => {
    const unread = { ...same, unverified: true };
    expect(verdict(unread)).toBe("same shape and dtype — values not compared");
    expect(rowVerdict(unread)).toBe("values not compared");
    expect(verdict({ ...same, b: { ...same.b, bytes: 0 } as DiffItem["b"] })).toBe(
      "same (no elements)",
    );
    expect(verdict({ ...same, fingerprint: "crc_equal" })).toBe("CRC equal");
    expect(verdict({ ...same, fingerprint: "crc_equal" })).not.toMatch(/^equal|bytes equal/);
    expect(verdict({ ...same, fingerprint: "equal" })).toBe("bytes equal");
    expect(verdict({ ...same, values: stats(0, 2, 0) })).toBe("values equal");
    const changed = { ...same, status: "changed" as const, changes: ["content"] };
    expect(verdict({ ...changed, values: stats(2, 2, 0.5) })).toBe("2 of 2 elements differ");
    expect(verdict({ ...changed, changes: ["dtype", "batch_size"] })).toBe(
      "dtype, batch size changed",
    );
    expect(verdict({ ...same, status: "renamed", renamed_from: ["v"] })).toBe("renamed from v");
    expect(verdict({ ...same, problem: "truncated" })).toBe("not read");
    expect(markOf({ ...same, status: "added" })).toBe("+");
    expect(markOf({ ...same, problem: "x" })).toBe("!");
  });

  it("show a scalar's change inline, and leave out the verdict its numbers say", () => {
    const int64 = { kind: "leaf", class: "Tensor", dtype: "int64", shape: [], bytes: 8 };
    const step: DiffItem = {
      ...same,
      key: "step",
      status: "changed",
      changes: ["content"],
      fingerprint: "differs",
      a: int64,
      b: int64,
      scalars: [1000, 2000],
    };
    expect(scalarChange(step)).toBe("1000 → 2000");
    expect(rowVerdict(step)).toBe("");
    expect(verdict(step)).toBe("value changed");
    expect(verdict({ ...step, scalars: null })).toBe("content changed");
    expect(scalarChange({ ...step, scalars: [3, 6.000000001] })).toBe("3 → 6");
    expect(scalarChange({ ...step, status: "same", scalars: [7, 7] })).toBe("7");
    expect(scalarChange({ ...step, status: "added", a: null, scalars: [null, 1] })).toBe("1");
    expect(scalarChange({ ...step, scalars: [1, "NaN"] })).toBe("1 → NaN");
    // a value kept in meta.json: its facts hold it
    const lr = (value: unknown) => ({ kind: "non_tensor", class: "NonTensorData", value });
    const meta = { ...same, status: "changed" as const, changes: ["value"], scalars: null };
    expect(scalarChange({ ...meta, a: lr(0.01), b: lr(0.005) })).toBe("0.01 → 0.005");
    expect(scalarChange({ ...meta, a: lr({ x: 1 }), b: lr({ x: 2 }) })).toBe("");
    expect(scalarChange(same)).toBe("");
  });

  it("count the same keys by how they were found the same", () => {
    const rollup = {
      ...(loadGolden("reply_diff_node").message.result as DiffItem).rollup,
    } as NonNullable<DiffItem["rollup"]>;
    const r = { ...rollup, same: 14, same_leaves: 10, same_crc: 2, same_metadata: 5 };
    expect(sameParts(r).map(([n, words]) => `${n} ${words}`)).toEqual([
      "3 same",
      "2 CRC equal",
      `5 ${UNVERIFIED_TEXT}`,
    ]);
    expect(sameParts({ ...r, same_leaves: 5, same_crc: 0 }).map(([, w]) => w)).toEqual([
      UNVERIFIED_TEXT,
    ]);
  });

  it("lay both sides' facts side by side", () => {
    const b = { ...same.b, dtype: "bfloat16", bytes: 4 } as DiffItem["b"];
    const rows = factRows(same.a, b);
    expect(rows).toContainEqual(["Dtype", "float32", "bfloat16"]);
    expect(rows).toContainEqual(["Size", "8 B", "4 B"]);
    expect(factRows(null, b).find(([l]) => l === "Dtype")).toEqual(["Dtype", "—", "bfloat16"]);
    const s = statsRows({ ...stats(3, 4, 0.25), nan_appeared: 1 });
    expect(s).toContainEqual(["Differing", "3 of 4"]);
    expect(s).toContainEqual(["max |a−b|", "0.25"]);
    expect(s).toContainEqual(["NaN appeared", "1"]);
  });
});

describe("the union tree as pages", () => {
  it("shows only the differences by default, and every key without the filter", async () => {
    const source = stepSource();
    const only = await new CompareTreeSource(source, true).children([], 0, 50);
    expect(only.children.map((c) => c.key)).toEqual(["model", "optim"]);
    const all = await new CompareTreeSource(source, false).children([], 0, 50);
    expect(all.children.map((c) => c.key)).toEqual(["model", "optim", "config"]);
    const model = only.children[0];
    expect(model?.has_children).toBe(true);
    expect(model?.diff.rollup?.added).toBe(1);
    // config holds no difference: no way into it with the filter on
    const config = all.children[2];
    expect(config && compareNode(config.diff, true).has_children).toBe(false);
    expect(config?.has_children).toBe(true);
  });

  it("drives the normal tree model: the first page says how many children a node has", async () => {
    const source = stepSource();
    const tree = new TreeModel(new CompareTreeSource(source, true), compareNode(source.root, true));
    await tree.expand(0);
    expect(tree.rowCount).toBe(3); // root, model, optim
    await tree.revealPath(["model", "head", "scale"]);
    expect(tree.selectedPath).toEqual(["model", "head", "scale"]);
    const labels = Array.from({ length: tree.rowCount }, (_, i) => tree.row(i)?.label);
    expect(labels).toEqual(["(root)", "model", "head", "scale", "optim"]);
    tree.dispose();
  });

  it("are asked over the comm with the params the memory source logs", async () => {
    const memory = stepSource();
    const model = new FakeModel({});
    const kernel = attachCompareKernel(model, memory);
    const comm = new CommCompareSource(new CommDataSource(model));
    for (const only of [true, false]) {
      const page = await comm.children(["model"], 1, 2, only);
      expect(page).toEqual(await stepSource().children(["model"], 1, 2, only));
    }
    const sent = kernel.requests.map((r) => r.params);
    expect(sent).toEqual([
      { path: ["model"], offset: 1, limit: 2, only_changed: true },
      { path: ["model"], offset: 1, limit: 2 }, // off: the kernel's default, not sent
    ]);
    expect(memory.calls("diff_children").map((c) => c.params)).toEqual(sent);
  });

  it("counts what differs below a node, its own difference left out", async () => {
    const source = stepSource();
    const optim = await item(source, ["optim"]);
    expect(differencesBelow(optim)).toBe(2);
    expect(rollupText(optim.rollup ?? source.summary.summary)).toBe("1 removed, 1 renamed");
  });
});

describe("next and previous difference", () => {
  it("walk the differences in the tree's order, depth first", async () => {
    const source = stepSource();
    const nav = new DiffNavigator(source, source.root);
    const seen: string[] = [];
    for (let at = await nav.first(); at; at = await nav.next(at)) seen.push(at.join("/"));
    expect(seen).toEqual(["model/head/scale", "optim/lr", "optim/momentum"]);
    const back: string[] = [];
    for (let at = await nav.previous(["optim", "momentum"]); at; at = await nav.previous(at)) {
      back.push(at.join("/"));
    }
    expect(back).toEqual(["optim/lr", "model/head/scale"]);
    expect(await nav.next(["optim", "momentum"])).toBeNull();
  });

  it("find their place from a key that is not a difference", async () => {
    const source = stepSource();
    const nav = new DiffNavigator(source, source.root);
    expect(await nav.next(["model", "layer1", "bias"])).toEqual(["model", "head", "scale"]);
    expect(await nav.previous(["config", "epochs"])).toEqual(["optim", "momentum"]);
    expect(await nav.next(["config"])).toBeNull();
  });

  it("step into every changed leaf once the values are compared", async () => {
    const source = stepSource();
    await source.refine([], "values");
    const nav = new DiffNavigator(source, await source.node([]));
    const seen: string[] = [];
    for (let at = await nav.first(); at; at = await nav.next(at)) seen.push(at.join("/"));
    expect(seen).toEqual([
      "model/layer1/weight",
      "model/layer2/weight",
      "model/head/weight",
      "model/head/scale",
      "optim/state/exp_avg",
      "optim/state/step",
      "optim/lr",
      "optim/momentum",
    ]);
    expect(source.summary.level).toBe("values");
  });

  it("do not go into a subtree added whole", async () => {
    const source = new MemoryCompareSource([
      { path: [], kind: "tensordict" },
      { path: ["ema"], kind: "tensordict", status: "added" },
      { path: ["ema", "w"], status: "added" },
      { path: ["ema", "b"], status: "added" },
      { path: ["z"], status: "changed", changes: ["shape"] },
    ]);
    const nav = new DiffNavigator(source, source.root);
    expect(await nav.first()).toEqual(["ema"]);
    expect(await nav.next(["ema"])).toEqual(["z"]);
    expect(await nav.previous(["z"])).toEqual(["ema"]);
  });

  it("fetch each level once, in pages", async () => {
    const rows = [
      { path: [], kind: "tensordict" },
      ...Array.from({ length: 25 }, (_, i) => ({
        path: [`k${String(i).padStart(2, "0")}`],
        ...(i % 5 === 0 ? { status: "changed" as const, changes: ["dtype"] } : {}),
      })),
    ];
    const source = new MemoryCompareSource(rows);
    const nav = new DiffNavigator(source, source.root, { pageSize: 2 });
    expect(await nav.next(["k07"])).toEqual(["k10"]);
    expect(await nav.previous(["k07"])).toEqual(["k05"]);
    const pages = source.calls("diff_children").length;
    expect(await nav.next(["k08"])).toEqual(["k10"]);
    expect(source.calls("diff_children").length).toBe(pages); // nothing asked again
    await tick();
  });
});

describe("refining a subtree", () => {
  it("replaces its rows, reports progress, and mixes the levels", async () => {
    const source = stepSource();
    const seen: number[] = [];
    const summary = await source.refine(["model"], "values", {
      onProgress: (p) => seen.push(p.done),
    });
    expect(seen).toEqual([0, 1, 2, 3, 4]);
    expect(summary.level).toBe("mixed");
    expect(summary.summary.changed).toBe(3); // the three weights of model
    const w = await source.node(["model", "layer1", "weight"]);
    expect(w.values?.max_abs).toBe(0.01);
    expect(stepRows("values").length).toBe(stepRows().length);
  });

  it("stops when cancelled", async () => {
    const source = stepSource({ latencyMs: 5 });
    const abort = new AbortController();
    const running = source.refine([], "values", { signal: abort.signal });
    abort.abort();
    await expect(running).rejects.toMatchObject({ type: "Cancelled" });
    expect(source.summary.level).toBe("metadata");
  });
});
