// @vitest-environment happy-dom
import { afterEach, describe, expect, it } from "vitest";
import { MemoryDataSource } from "../src/memory-data-source";
import { parseState, type WidgetState } from "../src/protocol";
import { App } from "../src/render-app";
import { detailFields } from "../src/render-details";
import { loadGolden } from "./golden";
import { replayTree, sampleTree, tick, wideKey } from "./trees";

function state(overrides: Partial<WidgetState> = {}): WidgetState {
  const parsed = parseState(loadGolden("state").message);
  if (!parsed) throw new Error("golden state does not parse");
  return { ...parsed, selected: [], ...overrides };
}

function setup(tree = sampleTree(), overrides: Partial<WidgetState> = {}) {
  const source = new MemoryDataSource(tree);
  const selections: string[][] = [];
  const app = new App({
    source,
    state: state({ root: source.root, ...overrides }),
    detailsDelayMs: 0,
    onSelect: (path) => selections.push(path),
  });
  document.body.append(app.element);
  return { app, source, selections, el: app.element };
}

const details = (el: HTMLElement) => el.querySelector(".tdview-details")?.textContent ?? "";

afterEach(() => {
  document.body.replaceChildren();
});

describe("App", () => {
  it("lays out header, search, tree and details", async () => {
    const { el } = setup();
    await tick();
    expect(el.querySelector(".tdview-header")).not.toBeNull();
    expect(el.querySelector('[role="search"] input')).not.toBeNull();
    expect(el.querySelector('[role="tree"]')).not.toBeNull();
    expect(details(el)).toContain("(root)");
    expect(details(el)).toContain("TensorDict");
  });

  it("searches keys and reveals the match that is picked", async () => {
    const { app, el, selections } = setup();
    const input = el.querySelector<HTMLInputElement>(".tdview-search-input");
    if (!input) throw new Error("no search box");
    input.value = "k012345";
    input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
    for (let i = 0; i < 100 && app.tree?.selectedPath?.length !== 2; i++) await tick();
    expect(el.querySelector(".tdview-search-status")?.textContent).toBe("1 match");
    expect(app.tree?.selectedPath).toEqual(["wide", wideKey(12_345)]);
    expect(selections.at(-1)).toEqual(["wide", wideKey(12_345)]);
    await tick();
    expect(details(el)).toContain(`wide / ${wideKey(12_345)}`);
    const row = el.querySelector('[aria-selected="true"] .tdview-key');
    expect(row?.textContent).toBe(wideKey(12_345));
  });

  it("lists search matches as buttons, and says how many there are in all", async () => {
    const { el } = setup();
    const input = el.querySelector<HTMLInputElement>(".tdview-search-input");
    if (!input) throw new Error("no search box");
    input.value = "z";
    input.dispatchEvent(new Event("input"));
    await tick(250);
    const buttons = [...el.querySelectorAll<HTMLButtonElement>(".tdview-search-result")];
    expect(buttons.map((b) => b.querySelector(".tdview-search-path")?.textContent)).toEqual([
      "zeta",
      "zulu",
    ]);
    input.value = "k0";
    input.dispatchEvent(new Event("input"));
    await tick(250);
    expect(el.querySelectorAll(".tdview-search-result")).toHaveLength(50);
    const status = el.querySelector(".tdview-search-status")?.textContent;
    expect(status).toBe("matches 1–50 of 100,000");
    buttons[1]?.click();
  });

  it("shows a node's details, and an error when they cannot be read", async () => {
    const tree = replayTree();
    tree.children?.push({ key: "bad", fail: "LeafDataError" });
    const { app, el } = setup(tree);
    await app.reveal(["info"]);
    await tick();
    expect(details(el)).toContain("NonTensorData");
    expect(details(el)).toContain('"seed": 7');
    await app.reveal(["bad"]);
    await tick();
    expect(el.querySelector('.tdview-details [role="alert"]')?.textContent).toBe(
      "LeafDataError: bad: LeafDataError",
    );
  });

  it("opens the preview on Enter on a leaf, and keeps it open on the next leaf", async () => {
    const { app, el, source } = setup(replayTree());
    await app.reveal(["action"]);
    await tick();
    const tree = el.querySelector<HTMLElement>('[role="tree"]');
    tree?.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
    for (let i = 0; i < 10 && !el.querySelector(".tdview-preview-result"); i++) await tick();
    expect(app.details?.preview.open).toBe(true);
    expect(source.calls("preview").map((c) => c.params.path)).toEqual([["action"]]);
    await app.reveal(["reward"]);
    for (let i = 0; i < 10 && source.calls("preview").length < 2; i++) await tick();
    expect(source.calls("preview").map((c) => c.params.path)).toEqual([["action"], ["reward"]]);
  });

  it("opens the preview on a double click on a leaf row", async () => {
    const { app, el, source } = setup(replayTree());
    await app.reveal(["done"]);
    await tick();
    const row = el.querySelector('[aria-selected="true"] .tdview-key');
    row?.dispatchEvent(new MouseEvent("dblclick", { bubbles: true }));
    for (let i = 0; i < 10 && source.calls("preview").length < 1; i++) await tick();
    expect(source.calls("preview").map((c) => c.params.path)).toEqual([["done"]]);
  });

  it("shows the root when the initially selected path does not exist", async () => {
    const { app, el, selections } = setup(sampleTree(), { selected: ["a", "gone"] });
    for (let i = 0; i < 20; i++) await tick();
    expect(app.tree?.selectedPath).toEqual([]);
    expect(details(el)).toContain("(root)");
    expect(selections).toEqual([[]]);
  });

  it("reveals the initially selected path", async () => {
    const { app } = setup(sampleTree(), { selected: ["a", "y", "deep"] });
    for (let i = 0; i < 20; i++) await tick();
    expect(app.tree?.selectedPath).toEqual(["a", "y", "deep"]);
  });
});

describe("detailFields", () => {
  it("lists storage, rollup and pickle facts, leaving out empty ones", () => {
    const node = parseState(loadGolden("state").message)?.root;
    if (!node) throw new Error("no root");
    const golden = loadGolden("reply_node_non_tensor").message.result as Parameters<
      typeof detailFields
    >[0];
    const fields = Object.fromEntries(detailFields(golden));
    expect(fields.Path).toBe("info");
    expect(fields.Key).toBe('("info",)');
    expect(fields.Subpath).toBe("info");
    expect(fields["Load cost"]).toBe("decompression; reads 2.31 KB");
    expect(fields["CRC-32"]).toBe("deadbeef");
    // The pickle is in the lock box, not in the list.
    expect(fields.Pickle).toBeUndefined();
    expect(fields.Problems).toContain("allow_pickle");
    expect(fields.Shape).toBeUndefined();
    const td = Object.fromEntries(
      detailFields(loadGolden("reply_node_tensordict").message.result as typeof golden),
    );
    expect(td.Size).toBe("21.2 MB (21,236,000 B) in 2 tensors");
    expect(td["Subtree size"]).toBeUndefined();
    expect(td.Names).toBe("time");
  });
});

describe("the header", () => {
  it("lets a long source path wrap at its slashes only", () => {
    const source = new MemoryDataSource(sampleTree(10));
    const app = new App({
      source,
      state: state({ root: source.root, source: "/data/runs/exp-42/ckpt.tdz" }),
      detailsDelayMs: 0,
    });
    const header = app.element.querySelector(".tdview-source");
    expect(header?.innerHTML).toBe("/<wbr>data/<wbr>runs/<wbr>exp-42/<wbr>ckpt.tdz");
    expect(header?.classList.contains("tdview-path-text")).toBe(true);
    app.dispose();
  });
});

describe("non-tensor values in their rows", () => {
  it("shows each value after its key, cut short, and asks for it once", async () => {
    const config = { lr: 0.001, betas: [0.9, 0.999], schedule: "cosine", warmup: 500 };
    const tree = {
      key: "",
      children: [
        { key: "run_name", kind: "non_tensor" as const, value: "tiny-transformer-demo" },
        { key: "step", kind: "non_tensor" as const, value: 1200 },
        { key: "config", kind: "non_tensor" as const, value: config },
        { key: "w", shape: [2], dtype: "float32" },
      ],
    };
    const { el, source } = setup(tree);
    for (let i = 0; i < 20 && !el.querySelector(".tdview-inline-value"); i++) await tick();
    await tick();
    const inline = (key: string) =>
      [...el.querySelectorAll(".tdview-row")]
        .find((r) => r.querySelector(".tdview-key")?.textContent === key)
        ?.querySelector(".tdview-inline-value")?.textContent;
    expect(inline("run_name")).toBe('= "tiny-transformer-demo"');
    expect(inline("step")).toBe("= 1200");
    // cut to 60 characters: the full value is in the details
    expect(inline("config")).toBe('= {lr: 0.001, betas: [0.9, 0.999], schedule: "cosine", warmup…');
    expect(inline("w")).toBeUndefined();
    const asked = source.calls("node").filter((c) => JSON.stringify(c.params.path) === '["step"]');
    expect(asked).toHaveLength(1);
  });
});

describe("the root's totals", () => {
  it("show in the header and on the root row once the root's details bring them", async () => {
    const tree = replayTree();
    tree.rollup = { bytes: 21_236_000, numel: 21_000_000, leaves: 5, by_dtype: {} };
    const { el } = setup(tree);
    const header = () => el.querySelector(".tdview-header .tdview-root-leaves")?.textContent;
    for (let i = 0; i < 40 && !header(); i++) await tick(50);
    expect(header()).toBe("21.2 MB in 5 tensors");
    expect(el.querySelectorAll(".tdview-header .tdview-bytes")).toHaveLength(0);
    const root = el.querySelector('.tdview-row[aria-level="1"] .tdview-inline-value');
    expect(root?.textContent).toBe("5 tensors");
    const size = el.querySelector('.tdview-row[aria-level="1"] .tdview-bytes');
    expect(size?.textContent).toBe("21.2 MB");
  });

  it("show on the root row when another node is selected first", async () => {
    const tree = replayTree();
    tree.rollup = { bytes: 21_236_000, numel: 21_000_000, leaves: 5, by_dtype: {} };
    const source = new MemoryDataSource(tree);
    const first = tree.children?.[0]?.key ?? "";
    const root = { ...source.root, bytes: null, numel: null };
    const app = new App({ source, state: state({ root, selected: [first] }), detailsDelayMs: 0 });
    document.body.append(app.element);
    const size = () => app.element.querySelector('.tdview-row[aria-level="1"] .tdview-bytes');
    for (let i = 0; i < 40 && !size(); i++) await tick(50);
    expect(app.tree?.selectedPath).toEqual([first]);
    expect(size()?.textContent).toBe("21.2 MB");
  });

  it("are asked once: the root's details show the app's answer", async () => {
    const tree = replayTree();
    tree.rollup = { bytes: 21_236_000, numel: 21_000_000, leaves: 5, by_dtype: {} };
    const source = new MemoryDataSource(tree);
    const root = { ...source.root, bytes: null, numel: null };
    const app = new App({ source, state: state({ root }), detailsDelayMs: 0 });
    document.body.append(app.element);
    const shown = () => app.details?.details?.rollup?.bytes;
    for (let i = 0; i < 40 && shown() === undefined; i++) await tick(50);
    expect(app.tree?.selectedPath).toEqual([]);
    expect(shown()).toBe(21_236_000);
    const asked = source.calls("node").filter((c) => JSON.stringify(c.params.path) === "[]");
    // the details' quick look without totals, and the app's one walk of the tree
    expect(asked.map((c) => c.params.totals !== false)).toEqual([true, false]);
    await tick(600); // past the details' quiet time: no second walk comes
    const again = source.calls("node").filter((c) => JSON.stringify(c.params.path) === "[]");
    expect(again).toHaveLength(2);
  });

  it("arrive when another row is picked while the root's own details wait for them", async () => {
    const tree = replayTree();
    tree.rollup = { bytes: 21_236_000, numel: 21_000_000, leaves: 5, by_dtype: {} };
    const source = new MemoryDataSource(tree);
    const root = { ...source.root, bytes: null, numel: null };
    // the details ask for the root's totals after a quiet half second: a click comes first
    const app = new App({ source, state: state({ root }), detailsDelayMs: 0 });
    document.body.append(app.element);
    const first = tree.children?.[0]?.key ?? "";
    await app.reveal([first]);
    const size = () => app.element.querySelector('.tdview-row[aria-level="1"] .tdview-bytes');
    for (let i = 0; i < 40 && !size(); i++) await tick(50);
    expect(app.tree?.selectedPath).toEqual([first]);
    expect(size()?.textContent).toBe("21.2 MB");
  });
});

describe("filtering the tree in place keeps the selection", () => {
  it("selects the node selected before where the filtered tree holds it, and back", async () => {
    const { app, el } = setup(sampleTree(300));
    await tick();
    await app.reveal(["a", "y", "deep"]);
    const filter = el.querySelector<HTMLInputElement>(".tdview-search-filter");
    const input = el.querySelector<HTMLInputElement>(".tdview-search-input");
    if (!filter || !input) throw new Error("no filter toggle");
    filter.checked = true;
    filter.dispatchEvent(new Event("change"));
    input.value = "deep";
    input.dispatchEvent(new Event("input"));
    const matches = () =>
      [...el.querySelectorAll<HTMLElement>('[role="tree"]')].find((t) =>
        t.getAttribute("aria-label")?.startsWith("Matches"),
      );
    const selectedRow = () =>
      matches()?.querySelector('.tdview-row[aria-selected="true"] .tdview-key')?.textContent;
    for (let i = 0; i < 60 && (matches()?.querySelectorAll(".tdview-key").length ?? 0) < 4; i++)
      await tick(20);
    for (let i = 0; i < 20 && selectedRow() !== "deep"; i++) await tick(20);
    expect(selectedRow()).toBe("deep");
    filter.checked = false;
    filter.dispatchEvent(new Event("change"));
    for (let i = 0; i < 40 && el.querySelectorAll('[role="tree"]').length !== 1; i++)
      await tick(20);
    await tick(50);
    expect(app.tree?.selectedPath).toEqual(["a", "y", "deep"]);
  });
});

describe("filtering the tree in place", () => {
  it("shows only the matches and their ancestors, then the whole tree again", async () => {
    const { app, el } = setup(sampleTree(300));
    await tick();
    const filter = el.querySelector<HTMLInputElement>(".tdview-search-filter");
    const input = el.querySelector<HTMLInputElement>(".tdview-search-input");
    if (!filter || !input) throw new Error("no filter toggle");
    filter.checked = true;
    filter.dispatchEvent(new Event("change"));
    input.value = "deep";
    input.dispatchEvent(new Event("input"));
    const trees = () => [...el.querySelectorAll<HTMLElement>('[role="tree"]')];
    const visible = () => trees().find((t) => !t.hidden);
    const keysOf = (t?: HTMLElement) =>
      [...(t?.querySelectorAll(".tdview-key") ?? [])].map((k) => k.textContent);
    const filtered = () => trees().find((t) => t.getAttribute("aria-label")?.startsWith("Matches"));
    for (let i = 0; i < 50 && keysOf(filtered()).length < 4; i++) await tick(20);
    const shown = visible();
    expect(shown?.getAttribute("aria-label")).toBe("Matches of the search");
    const keys = keysOf(shown);
    expect(keys.slice(1)).toEqual(["a", "y", "deep"]);
    // picking a row of the filtered tree shows its details
    const deep = [...(shown?.querySelectorAll(".tdview-row") ?? [])].at(-1) as HTMLElement;
    deep.click();
    for (let i = 0; i < 20 && !details(el).includes("a / y / deep"); i++) await tick(20);
    expect(details(el)).toContain("a / y / deep");
    filter.checked = false;
    filter.dispatchEvent(new Event("change"));
    for (let i = 0; i < 40 && app.tree?.selectedPath?.length !== 3; i++) await tick(20);
    expect(trees()).toHaveLength(1);
    expect(trees()[0]?.hidden).toBe(false);
    expect(app.tree?.selectedPath).toEqual(["a", "y", "deep"]);
  });
});

describe("dotted keys grouped in the app", () => {
  it("offers the toggle, keeps the selected key across it, and reports the choice", async () => {
    const keys = [
      "embed.weight",
      "decoder.layers.0.linear1.weight",
      "decoder.layers.1.linear1.weight",
    ];
    const source = new MemoryDataSource({
      key: "",
      children: keys.map((key) => ({ key, shape: [2], dtype: "float32" })),
    });
    const layouts: unknown[] = [];
    const app = new App({
      source,
      state: state({ root: source.root }),
      detailsDelayMs: 0,
      onLayout: (l) => layouts.push(l),
    });
    document.body.append(app.element);
    const toggle = () => app.element.querySelector<HTMLLabelElement>(".tdview-group-toggle");
    for (let i = 0; i < 40 && toggle()?.hidden !== false; i++) await tick(5);
    expect(toggle()?.hidden).toBe(false);
    expect(toggle()?.querySelector("input")?.checked).toBe(true);
    const labels = () =>
      [...app.element.querySelectorAll(".tdview-tree .tdview-key")].map((k) => k.textContent);
    expect(labels().slice(1)).toEqual(["embed.weight", "decoder.layers"]);
    await app.reveal(["decoder.layers.1.linear1.weight"]);
    expect(app.tree?.selectedPath).toEqual(["decoder.layers.1.linear1.weight"]);
    await tick();
    expect(details(app.element)).toContain("decoder.layers.1.linear1.weight");
    await app.setGrouped(false);
    expect(layouts).toEqual([{ grouped: false }]);
    expect(app.tree?.selectedPath).toEqual(["decoder.layers.1.linear1.weight"]);
    expect(labels().slice(1)).toEqual(keys);
    await app.setGrouped(true);
    app.tree?.selectIndex(2);
    await tick();
    expect(app.tree?.selectedPath).toBeNull();
    expect(app.element.querySelector(".tdview-group-note")?.textContent).toContain(
      "decoder.layers.… groups 2 keys",
    );
    app.dispose();
  });
});
