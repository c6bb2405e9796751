// @vitest-environment happy-dom
/**
 * A refine (or the "only differences" switch) gives the compare view a new tree: the rows
 * the user had open stay open, with their refreshed children and marks, and the selected
 * key stays selected, or its nearest ancestor when the filter leaves the key out.
 */
import { afterEach, describe, expect, it } from "vitest";
import { MemoryCompareSource, type MemoryDiffRow } from "../src/compare-memory-source";
import {
  CompareTreeSource,
  compareNode,
  isCompareNode,
  restoreTreeState,
  treeState,
} from "../src/compare-model";
import type { Path } from "../src/protocol";
import { CompareApp } from "../src/render-compare";
import { TreeModel } from "../src/tree-model";
import { compareState, stats, stepRows, stepSource } from "./compare-fixtures";
import { tick } from "./trees";

const OPTIONS = { device: "cpu", mode: "r" as const, allow_pickle: false, robust_key: true };
const LAYER1_WEIGHT = "model/layer1/weight";

/** Compared by values; a second comparison (within a tolerance, say) finds
 * `model/layer1/weight` equal, so `model/layer1` holds no difference any more. */
function settlingSource(): MemoryCompareSource {
  const settled = (): MemoryDiffRow[] =>
    stepRows("values").map((row) =>
      row.path.join("/") === LAYER1_WEIGHT ? { path: row.path, values: stats(0, 16, 0) } : row,
    );
  return new MemoryCompareSource(stepRows("values"), { level: "values", refined: settled });
}

function treeOf(source: MemoryCompareSource, only = true): TreeModel {
  return new TreeModel(new CompareTreeSource(source, only), compareNode(source.root, only), {
    pageSize: 2, // several pages per level: a key is found by paging
    totalsDelayMs: 0,
  });
}

/** Opens `paths` (each one's ancestors first) and selects `selected`, as a user would. */
async function open(tree: TreeModel, paths: Path[], selected: Path): Promise<void> {
  await tree.expand(0);
  for (const path of paths) {
    const index = await tree.revealPath(path, { select: false });
    expect(index, path.join("/")).toBeGreaterThanOrEqual(0);
    await tree.expand(index);
  }
  expect(await tree.revealPath(selected)).toBeGreaterThanOrEqual(0);
}

/** The loaded rows: path and status, "+" before an open row. */
function rowsOf(tree: TreeModel): string[] {
  const out: string[] = [];
  for (let i = 0; i < tree.rowCount; i++) {
    const row = tree.row(i);
    const node = row?.node ?? null;
    if (!row || !isCompareNode(node)) continue;
    out.push(`${row.expanded ? "+" : " "}${node.path.join("/")} ${node.diff.status}`);
  }
  return out;
}

describe("a tree's state through a refine", () => {
  it("opens the same rows of the new tree, with their new children, and keeps the selection", async () => {
    const source = stepSource();
    const before = treeOf(source);
    await open(before, [["model"], ["model", "head"], ["optim"]], ["optim", "momentum"]);
    const state = treeState(before);
    expect(state).toEqual({
      expanded: [[], ["model"], ["model", "head"], ["optim"]],
      selected: ["optim", "momentum"],
    });
    // metadata: under model/head only `scale` differs
    expect(rowsOf(before).filter((r) => r.includes("model/head/"))).toEqual([
      " model/head/scale added",
    ]);

    await source.refine([], "values");
    const after = treeOf(source);
    expect(await restoreTreeState(after, state)).toEqual(["optim", "momentum"]);
    expect(treeState(after)).toEqual(state);
    expect(after.selectedPath).toEqual(["optim", "momentum"]);
    // the open rows show what the values found: head's weight changed, layer1 appeared
    // (closed: it was not open before), optim's state too
    const rows = rowsOf(after);
    expect(rows).toContain(" model/head/weight changed");
    expect(rows).toContain(" model/layer1 same");
    expect(rows).toContain(" optim/state same");
    expect(rows.filter((r) => r.startsWith("+")).length).toBe(state.expanded.length);
  });

  it("leaves out a node that no longer differs, and selects the nearest ancestor left", async () => {
    const source = settlingSource();
    const before = treeOf(source);
    await open(
      before,
      [["model"], ["model", "layer1"], ["model", "head"]],
      LAYER1_WEIGHT.split("/"),
    );
    const state = treeState(before);
    expect(state.expanded).toContainEqual(["model", "layer1"]);

    await source.refine([], "values");
    const after = treeOf(source);
    expect(await restoreTreeState(after, state)).toEqual(["model"]);
    expect(treeState(after)).toEqual({
      expanded: [[], ["model"], ["model", "head"]],
      selected: ["model"],
    });
    expect(rowsOf(after).some((r) => r.includes("layer1"))).toBe(false);
    // every key is shown without the filter: the node is back, and the key selected
    const all = treeOf(source, false);
    expect(await restoreTreeState(all, state)).toEqual(LAYER1_WEIGHT.split("/"));
    expect(treeState(all)).toEqual(state);
  });

  it("leaves a selection made while it runs as it is", async () => {
    const source = new MemoryCompareSource(stepRows(), { latencyMs: 2 });
    const before = treeOf(source);
    await open(before, [["model"], ["model", "head"]], ["model", "head", "scale"]);
    const after = treeOf(source);
    await after.expand(0);
    const restoring = restoreTreeState(after, treeState(before));
    after.selectIndex(after.indexOfPath(["optim"]));
    expect(await restoring).toEqual(["optim"]);
    expect(after.selectedPath).toEqual(["optim"]);
  });
});

// ------------------------------------------------------------ the view

function setup(source: MemoryCompareSource) {
  const app = new CompareApp({
    source,
    state: compareState(source),
    options: OPTIONS,
    detailsDelayMs: 0,
  });
  document.body.append(app.element);
  return { app, el: app.element };
}

async function until(check: () => boolean, what = "the condition"): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (check()) return;
    await tick(2);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** The paths (as row titles give them, "" for the root) of the rows drawn open. */
const openRows = (el: HTMLElement) =>
  [...el.querySelectorAll<HTMLElement>('[role="treeitem"][aria-expanded="true"]')]
    .sort((a, b) => Number(a.dataset.index) - Number(b.dataset.index))
    .map((r) => (r.getAttribute("aria-level") === "1" ? "" : r.title.split(": ")[0]));

const selectedTitle = (el: HTMLElement) =>
  el.querySelector<HTMLElement>('[role="treeitem"][aria-selected="true"]')?.title.split(": ")[0];

const keys = (el: HTMLElement) =>
  [...el.querySelectorAll<HTMLElement>('[role="treeitem"]')].map(
    (r) => r.querySelector(".tdview-key")?.textContent ?? "",
  );

function pressIn(el: HTMLElement, key: string) {
  el.querySelector('[role="tree"]')?.dispatchEvent(
    new KeyboardEvent("keydown", { key, bubbles: true, cancelable: true }),
  );
}

afterEach(() => {
  document.body.replaceChildren();
});

describe("the compare view through a refine", () => {
  it("keeps the rows the user opened, and the selection, when the whole tree is compared again", async () => {
    const { app, el } = setup(stepSource({ latencyMs: 1 }));
    await until(() => keys(el).includes("optim"), "the first level");
    // two levels open by the keyboard: model, then model/head; optim open too
    await app.reveal(["model"]);
    pressIn(el, "ArrowRight");
    await until(() => keys(el).includes("head"), "model open");
    await app.reveal(["model", "head"]);
    pressIn(el, "ArrowRight");
    await until(() => keys(el).includes("scale"), "head open");
    await app.reveal(["optim"]);
    pressIn(el, "ArrowRight");
    await until(() => keys(el).includes("momentum"), "optim open");
    await app.reveal(["model", "head", "scale"]);
    const opened = openRows(el);
    expect(opened).toEqual(["", "model", "model / head", "optim"]);
    const treeBefore = el.querySelector('[role="tree"]');

    el.querySelector<HTMLElement>(".tdview-compare-all-values")?.click();
    await until(() => el.querySelector(".tdview-refine-done") !== null, "the refine");
    // a new tree, with the values' marks: head's weight changed
    await until(() => el.querySelector('[role="tree"]') !== treeBefore, "the new tree");
    expect(keys(el)).toContain("weight");
    expect(openRows(el)).toEqual(opened);
    expect(selectedTitle(el)).toBe("model / head / scale");
    await until(
      () => el.querySelector(".tdview-compare-details")?.textContent?.includes("scale") ?? false,
      "the details",
    );
    app.dispose();
  });

  it("selects the nearest ancestor left when the selected key no longer differs", async () => {
    const { app, el } = setup(settlingSource());
    await until(() => keys(el).includes("optim"), "the first level");
    await app.reveal(LAYER1_WEIGHT.split("/"));
    await app.reveal(["model", "head"]);
    pressIn(el, "ArrowRight");
    await until(() => keys(el).includes("scale"), "head open");
    await app.reveal(LAYER1_WEIGHT.split("/"));
    expect(openRows(el)).toEqual(["", "model", "model / layer1", "model / head"]);

    await app.refine([], "values");
    expect(keys(el)).not.toContain("layer1");
    expect(openRows(el)).toEqual(["", "model", "model / head"]);
    expect(selectedTitle(el)).toBe("model");
    app.dispose();
  });
});
