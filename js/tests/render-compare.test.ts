// @vitest-environment happy-dom
import { afterEach, describe, expect, it } from "vitest";
import type { MemoryCompareSource } from "../src/compare-memory-source";
import { compareNode } from "../src/compare-model";
import type { DiffItem } from "../src/compare-protocol";
import { estimateMeasure } from "../src/middle-cut";
import { CompareApp } from "../src/render-compare";
import { histogramOf, sliceDifference } from "../src/render-compare-preview";
import { fillCompareRow, KEYS_HINT } from "../src/render-compare-rows";
import type { RowRoom } from "../src/render-tree";
import type { TreeRow } from "../src/tree-model";
import widget from "../src/widget";
import { attachCompareKernel, compareState, stepSource } from "./compare-fixtures";
import { FakeModel } from "./fake-model";
import { loadGolden } from "./golden";
import { tick } from "./trees";

const OPTIONS = { device: "cpu", mode: "r" as const, allow_pickle: false, robust_key: true };

function setup(source: MemoryCompareSource = stepSource(), selected: string[] = []) {
  const selections: string[][] = [];
  const app = new CompareApp({
    source,
    state: compareState(source),
    options: OPTIONS,
    selected,
    detailsDelayMs: 0,
    onSelect: (path) => selections.push(path),
  });
  document.body.append(app.element);
  return { app, source, selections, el: app.element };
}

/** Waits until `check` holds (each step lets the memory source answer). */
async function until(check: () => boolean, what = "the condition"): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (check()) return;
    await tick(2);
  }
  throw new Error(`timed out waiting for ${what}`);
}

const rows = (el: HTMLElement) =>
  [...el.querySelectorAll<HTMLElement>('[role="treeitem"]')]
    .sort((a, b) => Number(a.dataset.index) - Number(b.dataset.index))
    .map((r) => {
      const mark = r.querySelector(".tdview-mark")?.textContent ?? "";
      return `${mark}${mark ? " " : ""}${r.querySelector(".tdview-key")?.textContent ?? "…"}`;
    });

const selectedKey = (el: HTMLElement) =>
  el.querySelector('[aria-selected="true"] .tdview-key')?.textContent;

const details = (el: HTMLElement) => el.querySelector(".tdview-compare-details") as HTMLElement;

function press(el: HTMLElement, key: string, init: KeyboardEventInit = {}) {
  const tree = el.querySelector<HTMLElement>('[role="tree"]');
  tree?.dispatchEvent(
    new KeyboardEvent("keydown", { key, bubbles: true, cancelable: true, ...init }),
  );
}

function click(el: HTMLElement, selector: string) {
  const target = el.querySelector<HTMLElement>(selector);
  if (!target) throw new Error(`no ${selector}`);
  target.click();
}

afterEach(() => {
  document.body.replaceChildren();
});

describe("the compare view", () => {
  it("marks the differences in one tree, only them by default, and says which keys step", async () => {
    const { el, app } = setup();
    await until(() => rows(el).length === 3, "the first level");
    const header = el.querySelector(".tdview-compare-header")?.textContent ?? "";
    expect(header).toContain("runs/step_1000");
    expect(header).toContain("runs/step_1001.tdz");
    expect(header).toContain("metadata (shapes, dtypes)");
    expect(header).toContain("+1 added");
    expect(header).toContain("-1 removed");
    expect(header).toContain("R1 renamed");
    expect(el.querySelector(".tdview-compare-keys")?.textContent).toBe(KEYS_HINT);
    expect(KEYS_HINT).toMatch(/\] next difference · \[ previous difference/);
    expect(
      el.querySelector(".tdview-next-difference")?.getAttribute("aria-keyshortcuts"),
    ).toContain("]");
    expect(rows(el)).toEqual(["step_1000 → step_1001.tdz", "model", "optim"]);
    const optim = [...el.querySelectorAll('[role="treeitem"]')].find((r) =>
      r.textContent?.includes("optim"),
    );
    expect(optim?.querySelector(".tdview-compare-counts")?.textContent).toBe("-1R1");
    expect(app.onlyChanged).toBe(true);
    await app.setOnlyChanged(false);
    await until(() => rows(el).length === 4, "every key");
    expect(rows(el)).toContain("config");
  });

  it("steps through the differences with ] and [ and Alt+arrows", async () => {
    const { el, selections } = setup();
    await until(() => rows(el).length === 3);
    press(el, "]");
    await until(() => selectedKey(el) === "scale", "the first difference");
    expect(rows(el)).toEqual(["step_1000 → step_1001.tdz", "model", "head", "+ scale", "optim"]);
    press(el, "]");
    await until(() => selectedKey(el) === "lr");
    press(el, "ArrowDown", { altKey: true });
    await until(() => selectedKey(el) === "momentum");
    const momentum = el.querySelector('[aria-selected="true"]');
    expect(momentum?.querySelector(".tdview-mark")?.textContent).toBe("R");
    expect(momentum?.querySelector(".tdview-compare-from")?.textContent).toBe("← beta");
    press(el, "]");
    await until(() => el.querySelector(".tdview-compare-status")?.textContent !== "");
    expect(el.querySelector(".tdview-compare-status")?.textContent).toBe(
      "No difference after this one.",
    );
    press(el, "[");
    await until(() => selectedKey(el) === "lr");
    press(el, "ArrowUp", { altKey: true });
    await until(() => selectedKey(el) === "scale");
    expect(selections.at(-1)).toEqual(["model", "head", "scale"]);
    // the buttons do the same
    click(el, ".tdview-next-difference");
    await until(() => selectedKey(el) === "lr");
  });

  it("shows both sides of a key, and a CRC equal as 'CRC equal', never 'equal'", async () => {
    const { el, app } = setup(stepSource(), ["optim", "momentum"]);
    await until(() => details(el).textContent?.includes("renamed from") ?? false, "the details");
    const text = details(el).textContent ?? "";
    expect(text).toContain("optim / momentum");
    expect(text).toContain("renamed from optim/beta");
    expect(text).toContain("CRC equal");
    expect(text).not.toMatch(/Fingerprint\s*equal/);
    const head = [...details(el).querySelectorAll(".tdview-compare-facts thead th")].map(
      (th) => th.textContent,
    );
    expect(head).toEqual(["", "a · step_1000", "b · step_1001.tdz"]);
    await app.reveal(["model", "head", "scale"]);
    await until(() => details(el).textContent?.includes("model / head / scale") ?? false);
    const facts = details(el).querySelector(".tdview-compare-facts tbody")?.textContent ?? "";
    expect(facts).toContain("—"); // side a lacks it
    // an added key has nothing to compare again
    expect(details(el).querySelector(".tdview-compare-values")).toBeNull();
  });

  it("says in the header what it did not compare, one click from comparing it", async () => {
    const source = stepSource();
    const { el } = setup(source);
    await until(() => rows(el).length === 3);
    const header = () => el.querySelector(".tdview-compare-header")?.textContent ?? "";
    expect(header()).toContain("8 same shape and dtype — values not compared");
    expect(header()).not.toMatch(/\d+ same(?! shape)/); // no key called same for its shape
    click(el, ".tdview-compare-header .tdview-compare-unverified-values");
    await until(() => el.querySelector(".tdview-refine-done") !== null, "the refine");
    expect(source.calls("diff_refine").at(-1)?.params).toMatchObject({ path: [], level: "values" });
    await until(() => !header().includes("values not compared"), "the new header");
    expect(el.querySelector(".tdview-compare-unverified-values")).toBeNull();
    expect(header()).toMatch(/~\d+ changed/);
  });

  it("shows a scalar's change in its row, the key whole beside it", async () => {
    const { el, app } = setup(stepSource());
    await until(() => rows(el).length === 3);
    await app.refine([], "fingerprint");
    await app.reveal(["optim", "state", "step"]);
    await until(() => selectedKey(el) === "step");
    const row = el.querySelector<HTMLElement>('[aria-selected="true"]');
    expect(row?.querySelector(".tdview-compare-scalar")?.textContent).toBe("1000 → 1001");
    expect(row?.querySelector(".tdview-key")?.textContent).toBe("step");
    expect(row?.title).toBe("optim / state / step: 1000 → 1001, value changed");
    expect(row?.querySelector(".tdview-verdict")).toBeNull(); // the numbers say it
    await until(() => details(el).textContent?.includes("optim / state / step") ?? false);
    expect(details(el).querySelector(".tdview-compare-verdict")?.textContent).toContain(
      "1000 → 1001",
    );
  });

  it("computes a leaf's value statistics on demand, with progress, and marks what changed", async () => {
    const source = stepSource({ latencyMs: 3 });
    const { el, app } = setup(source);
    await until(() => rows(el).length === 3);
    await app.setOnlyChanged(false);
    await app.reveal(["model", "layer1", "weight"]);
    await until(() => details(el).textContent?.includes("model / layer1 / weight") ?? false);
    expect(details(el).querySelector(".tdview-compare-verdict")?.textContent).toBe(
      "same shape and dtype — values not compared",
    );
    expect(details(el).textContent).toContain("not compared (metadata only)");
    click(el, ".tdview-compare-values");
    await until(() => el.querySelector(".tdview-compare-task progress") !== null, "progress");
    expect(el.querySelector(".tdview-refine-cancel")).not.toBeNull();
    expect(details(el).querySelector<HTMLButtonElement>(".tdview-compare-values")?.disabled).toBe(
      true,
    );
    await until(() => el.querySelector(".tdview-refine-done") !== null, "the refine");
    expect(source.calls("diff_refine").at(-1)?.params).toMatchObject({
      path: ["model", "layer1", "weight"],
      level: "values",
    });
    await until(() => details(el).textContent?.includes("max |a−b|") ?? false, "the statistics");
    const text = details(el).textContent ?? "";
    expect(text).toContain("16 of 16 elements differ");
    expect(text).toContain("0.01");
    expect(selectedKey(el)).toBe("weight");
    const row = el.querySelector('[aria-selected="true"]');
    expect(row?.querySelector(".tdview-mark")?.textContent).toBe("~");
    expect(el.querySelector(".tdview-compare-header")?.textContent).toContain("mixed");
  });

  it("sends the rtol and atol typed, and starts nothing while one is not a number", async () => {
    const source = stepSource();
    const { el } = setup(source);
    await until(() => rows(el).length === 3);
    const atol = el.querySelector<HTMLInputElement>(".tdview-compare-tolerance .tdview-atol");
    if (!atol) throw new Error("no atol field");
    atol.value = "-1";
    atol.dispatchEvent(new Event("input"));
    click(el, ".tdview-compare-all-values");
    await until(() => el.querySelector(".tdview-compare-task [role=alert]") !== null, "the alert");
    expect(el.querySelector(".tdview-compare-task")?.textContent).toContain("atol");
    expect(source.calls("diff_refine")).toHaveLength(0);
    atol.value = "0.5";
    atol.dispatchEvent(new Event("input"));
    click(el, ".tdview-compare-all-values");
    await until(() => el.querySelector(".tdview-refine-done") !== null, "the refine");
    expect(source.calls("diff_refine").at(-1)?.params).toMatchObject({
      level: "values",
      atol: 0.5,
    });
  });

  it("cancels a refine, and nothing changes", async () => {
    const source = stepSource({ latencyMs: 20 });
    const { el } = setup(source);
    await until(() => rows(el).length === 3);
    click(el, ".tdview-compare-all-values");
    await until(() => el.querySelector(".tdview-refine-cancel") !== null);
    click(el, ".tdview-refine-cancel");
    await until(() => el.querySelector(".tdview-refine-cancelled") !== null, "the cancel");
    expect(source.summary.level).toBe("metadata");
    expect(el.querySelector<HTMLButtonElement>(".tdview-compare-all-values")?.disabled).toBe(false);
  });

  it("previews both sides of a leaf with a histogram of their difference", async () => {
    const { el, app } = setup();
    await until(() => rows(el).length === 3);
    await app.setOnlyChanged(false);
    await app.reveal(["model", "layer1", "weight"]);
    await until(
      () => details(el).querySelector<HTMLElement>(".tdview-compare-preview")?.hidden === false,
    );
    click(el, ".tdview-compare-preview .tdview-preview-button");
    await until(() => el.querySelector(".tdview-compare-difference") !== null, "the preview");
    const sides = el.querySelectorAll(".tdview-compare-preview-side");
    expect(sides.length).toBe(2);
    expect(sides[0]?.querySelector(".tdview-stats")).not.toBeNull();
    const difference = el.querySelector(".tdview-compare-difference")?.textContent ?? "";
    expect(difference).toContain("b − a over the 16 values shown");
    expect(difference).toContain("max |b − a| 0.01");
    expect(el.querySelector(".tdview-compare-difference svg")).not.toBeNull();
  });

  it("loads either side with a code line naming that side's checkpoint", async () => {
    const { el, app } = setup();
    await until(() => rows(el).length === 3);
    await app.setOnlyChanged(false);
    await app.reveal(["model", "layer1", "weight"]);
    await until(() => details(el).textContent?.includes("model / layer1 / weight") ?? false);
    const code = (side: string) =>
      el.querySelector(`.tdview-compare-load-${side} .tdview-code`)?.textContent ?? "";
    expect(code("a")).toBe(
      'weight = tdview.Checkpoint("runs/step_1000").load_leaf("model/layer1/weight", device="cpu", mode="r")',
    );
    expect(code("b")).toContain('tdview.Checkpoint("runs/step_1001.tdz")');
    el.querySelector<HTMLElement>(".tdview-compare-load-b .tdview-disclosure")?.click();
    click(el, ".tdview-compare-load-b .tdview-load-button");
    await until(() => el.querySelector(".tdview-compare-load-b .tdview-load-done") !== null);
    expect(el.querySelector(".tdview-compare-load-b .tdview-load-done")?.textContent).toContain(
      "into weight",
    );
    // a renamed key loads from its old path on side a
    await app.reveal(["optim", "momentum"]);
    await until(() => code("a").includes("optim/beta"), "side a's old path");
    expect(code("b")).toContain('"optim/momentum"');
  });
});

describe("the difference of the values shown", () => {
  it("is b − a element by element, binned over its finite values", () => {
    const tensor = (values: number[]) => ({
      dtype: "float32",
      shape: [values.length],
      data: Float32Array.from(values),
    });
    const data = (values: number[]) => ({ shape: [values.length], slice: tensor(values) }) as never;
    const d = sliceDifference(data([1, 2, 3]), data([1.5, 2, 2]));
    expect(d && [...d]).toEqual([0.5, 0, -1]);
    expect(sliceDifference(data([1, 2]), data([1, 2, 3]))).toBeNull();
    const h = histogramOf(Float64Array.from([0.5, 0, -1, Number.NaN]), 3);
    expect(h?.finite).toBe(3);
    expect(h?.maxAbs).toBe(1);
    expect(h && [...(h.counts.data as Float64Array)]).toEqual([1, 0, 2]);
  });
});

describe("the widget with a compare trait", () => {
  it("renders the compare view over the comm and reports selections", async () => {
    const source = stepSource();
    const traits = {
      ...loadGolden("state_compare").message,
      compare: compareState(source),
      selected: [],
    };
    const model = new FakeModel(traits);
    const kernel = attachCompareKernel(model, source);
    const el = document.createElement("div");
    document.body.append(el);
    const cleanup = widget.render({ model, el });
    await until(() => rows(el).length === 3, "the first level over the comm");
    expect(kernel.requests.every((r) => r.method.startsWith("diff_"))).toBe(true);
    press(el, "]");
    await until(() => selectedKey(el) === "scale");
    await until(() => model.sentOf("tdview:select").length > 0);
    expect(model.sentOf("tdview:select").at(-1)?.path).toEqual(["model", "head", "scale"]);
    await until(
      () => details(el).querySelector<HTMLElement>(".tdview-compare-preview")?.hidden === false,
    );
    click(el, ".tdview-compare-preview .tdview-preview-button");
    await until(() => el.querySelector(".tdview-compare-preview-result") !== null, "a preview");
    expect(el.querySelectorAll(".tdview-compare-preview-side .tdview-stats").length).toBe(1);
    click(el, ".tdview-compare-load-b .tdview-load-button");
    await until(() => model.saves > 0, "the loaded trait");
    expect(model.get("loaded")).toEqual({ path: ["model", "head", "scale"], count: 1 });
    cleanup();
    expect(model.listenerCount()).toBe(0);
  });

  it("keeps the selection through a refine whose trait change comes before its reply", async () => {
    const source = stepSource();
    const traits = { ...loadGolden("state_compare").message, compare: compareState(source) };
    const model = new FakeModel({ ...traits, selected: ["model", "head", "scale"] });
    attachCompareKernel(model, source, (summary) =>
      model.change("compare", { ...compareState(source), summary }),
    );
    const el = document.createElement("div");
    document.body.append(el);
    const cleanup = widget.render({ model, el });
    await until(() => selectedKey(el) === "scale", "the selected trait revealed");
    click(el, ".tdview-compare-all-values");
    await until(() => el.querySelector(".tdview-refine-done") !== null, "the refine");
    await until(() => rows(el).includes("~ weight"), "the rebuilt tree");
    await until(() => details(el).textContent?.includes("model / head / scale") ?? false);
    expect(selectedKey(el)).toBe("scale");
    expect(el.querySelector(".tdview-compare-header")?.textContent).toContain("values");
    cleanup();
  });
});

describe("a compare row in little room", () => {
  const item = (key: string, extra: Partial<DiffItem> = {}): DiffItem => ({
    key,
    path: ["model", "blocks", key],
    status: "changed",
    changes: ["content"],
    renamed_from: null,
    path_a: null,
    path_b: null,
    kind: "leaf",
    a: { kind: "leaf", class: "Tensor", dtype: "float32", shape: [768, 256], bytes: 786432 },
    b: { kind: "leaf", class: "Tensor", dtype: "float32", shape: [768, 256], bytes: 786432 },
    fingerprint: "differs",
    values: null,
    value_equal: null,
    note: null,
    problem: null,
    has_children: false,
    rollup: null,
    unverified: false,
    scalars: null,
    ...extra,
  });
  const row = (diff: DiffItem): TreeRow => ({
    index: 3,
    depth: 3,
    posInSet: 1,
    setSize: 1,
    node: compareNode(diff, true),
    label: diff.key,
    expandable: false,
    expanded: false,
    selected: false,
    error: null,
  });
  const measure = estimateMeasure(12); // 7.2 px a character
  const room = (width: number): RowRoom => ({ width, code: measure, badge: measure, ui: measure });
  const drawn = (diff: DiffItem, width: number) => {
    const el = document.createElement("div");
    fillCompareRow(el, row(diff), room(width));
    const text = (c: string) => el.querySelector(`.${c}`)?.textContent ?? null;
    return { key: text("tdview-key"), shape: text("tdview-shape"), said: text("tdview-verdict") };
  };

  it("keeps the key whole: the verdict gives way, then the shape's dims", () => {
    const wide = drawn(item("weight"), 600);
    expect(wide).toEqual({ key: "weight", shape: "float32 [768, 256]", said: "content changed" });
    const narrow = drawn(item("weight"), 280);
    expect(narrow.key).toBe("weight");
    expect(narrow.said).toBeNull();
    expect(narrow.shape).toBe("float32 [768, 256]");
    const narrower = drawn(item("weight"), 230);
    expect(narrower.key).toBe("weight");
    expect(narrower.shape).toMatch(/^float32 \[768, …\]$|^float32$/); // no number cut
    expect(drawn(item("weight"), 140).key).toBe("weight"); // every annotation gone
  });

  it("cuts a key longer than the row in the middle, its end kept", () => {
    const long = "decoder.layers.0.self_attn.in_proj_weight";
    const { key, shape } = drawn(item(long), 300);
    expect(key).not.toBe(long);
    expect(key).toContain("…");
    expect(key?.endsWith("in_proj_weight")).toBe(true);
    expect(key?.startsWith("decoder.")).toBe(true);
    expect(shape).toBe("");
  });
});
