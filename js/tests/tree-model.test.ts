import { describe, expect, it } from "vitest";
import { MemoryDataSource } from "../src/memory-data-source";
import { TreeModel, type TreeRow } from "../src/tree-model";
import { sampleTree, tick, WIDE, wideKey } from "./trees";

function setup(options: { latencyMs?: number; pageSize?: number; totalsDelayMs?: number } = {}) {
  const source = new MemoryDataSource(sampleTree(), { latencyMs: options.latencyMs ?? 0 });
  const tree = new TreeModel(source, source.root, {
    rootLabel: "ckpt",
    pageSize: options.pageSize ?? 200,
    totalsDelayMs: options.totalsDelayMs ?? 0,
  });
  return { source, tree };
}

function labels(tree: TreeModel): string[] {
  const out: string[] = [];
  for (let i = 0; i < tree.rowCount; i++) out.push(tree.row(i)?.label ?? "?");
  return out;
}

/** The page requests (made without totals); the background totals requests apart. */
function children(source: MemoryDataSource) {
  return source
    .calls("children")
    .filter((c) => c.params.totals === false)
    .map((c) => c.params as { path: string[]; offset: number; limit: number });
}

function totalsRequests(source: MemoryDataSource) {
  return source
    .calls("children")
    .filter((c) => c.params.totals !== false)
    .map((c) => c.params as { path: string[]; offset: number; limit: number });
}

describe("TreeModel", () => {
  it("starts with the root row only, selected, fetching nothing", () => {
    const { source, tree } = setup();
    expect(tree.rowCount).toBe(1);
    expect(tree.row(0)).toMatchObject<Partial<TreeRow>>({
      depth: 1,
      posInSet: 1,
      setSize: 1,
      label: "ckpt",
      expandable: true,
      expanded: false,
      selected: true,
    });
    expect(tree.selectedPath).toEqual([]);
    expect(source.log).toEqual([]);
  });

  it("shows placeholders at once on expand, then the fetched children", async () => {
    const { source, tree } = setup();
    const expanded = tree.expand(0);
    expect(tree.rowCount).toBe(5);
    expect(tree.row(1)?.node).toBeNull();
    await expanded;
    expect(labels(tree)).toEqual(["ckpt", "a", "wide", "zeta", "zulu"]);
    expect(tree.row(2)).toMatchObject({ depth: 2, posInSet: 2, setSize: 4, expandable: true });
    expect(tree.row(3)).toMatchObject({ expandable: false, expanded: false });
    expect(children(source)).toEqual([{ path: [], offset: 0, limit: 200, totals: false }]);
  });

  it("fills in a collection's subtree totals in the background, after its page", async () => {
    const source = new MemoryDataSource({
      key: "",
      children: [
        { key: "sub", bytes: 123, numel: 45, children: [{ key: "x", shape: [3] }] },
        { key: "leaf", shape: [2], dtype: "float32" },
      ],
    });
    const tree = new TreeModel(source, source.root, { rootLabel: "ckpt", totalsDelayMs: 0 });
    await tree.expand(0);
    expect(tree.row(1)?.node).toMatchObject({ key: "sub", bytes: null, numel: null });
    expect(tree.row(2)?.node).toMatchObject({ key: "leaf", bytes: 8 });
    await tick();
    expect(tree.row(1)?.node).toMatchObject({ key: "sub", bytes: 123, numel: 45 });
    expect(totalsRequests(source)).toEqual([{ path: [], offset: 0, limit: 1 }]);
  });

  it("sends a page the user asks for before the waiting background totals", async () => {
    const { source, tree } = setup({ latencyMs: 20 });
    await tree.expand(0); // "a" and "wide" have no totals yet: two background requests
    const opened = tree.expand(2); // "wide", while the first of them runs
    while (source.inFlight > 0 || totalsRequests(source).length < 2) await tick(5);
    await opened;
    const order = source.calls("children").map((c) => [c.params.path, c.params.offset]);
    expect(order).toEqual([
      [[], 0],
      [[], 0],
      [["wide"], 0],
      [[], 1],
    ]);
    expect(source.maxInFlight).toBe(1);
  });

  it("asks for background totals only after a quiet time", async () => {
    const { source, tree } = setup({ totalsDelayMs: 60 });
    await tree.expand(0);
    await tree.expand(1); // a page soon after: it goes first, and restarts the quiet time
    await tick(30);
    expect(totalsRequests(source)).toEqual([]);
    expect(children(source).map((c) => c.path)).toEqual([[], ["a"]]);
    while (totalsRequests(source).length < 3) await tick(10); // "a", "wide", then "y"
    expect(totalsRequests(source).map((c) => [c.path, c.offset])).toEqual([
      [[], 0],
      [[], 1],
      [["a"], 1],
    ]);
  });

  it("keeps fetched children when collapsed and expanded again", async () => {
    const { source, tree } = setup();
    await tree.expand(0);
    await tree.expand(1);
    expect(labels(tree)).toEqual(["ckpt", "a", "x", "y", "wide", "zeta", "zulu"]);
    tree.collapse(1);
    expect(labels(tree)).toEqual(["ckpt", "a", "wide", "zeta", "zulu"]);
    await tree.toggle(1);
    expect(labels(tree)).toEqual(["ckpt", "a", "x", "y", "wide", "zeta", "zulu"]);
    expect(children(source)).toHaveLength(2);
  });

  it("remembers the expansion of a collapsed subtree", async () => {
    const { tree } = setup();
    await tree.expand(0);
    await tree.expand(1);
    await tree.expand(3);
    expect(labels(tree)).toEqual(["ckpt", "a", "x", "y", "deep", "wide", "zeta", "zulu"]);
    expect(tree.row(4)?.depth).toBe(4);
    tree.collapse(0);
    expect(tree.rowCount).toBe(1);
    await tree.expand(0);
    expect(tree.rowCount).toBe(8);
  });

  describe("a level of 100,000 children", () => {
    it("has a row for each child but fetches only the first page", async () => {
      const { source, tree } = setup();
      await tree.expand(0);
      await tree.expand(2);
      expect(tree.rowCount).toBe(5 + WIDE);
      expect(tree.row(3)?.label).toBe(wideKey(0));
      expect(tree.row(3 + 199)?.node?.key).toBe(wideKey(199));
      expect(tree.row(3 + 200)?.node).toBeNull();
      expect(tree.row(3 + WIDE - 1)).toMatchObject({ posInSet: WIDE, setSize: WIDE, node: null });
      expect(children(source).at(-1)).toEqual({
        path: ["wide"],
        offset: 0,
        limit: 200,
        totals: false,
      });
    });

    it("fetches the page of rows scrolled into view, and nothing for loaded rows", async () => {
      const { source, tree } = setup();
      await tree.expand(0);
      await tree.expand(2);
      const before = source.log.length;
      tree.ensureRange(0, 30);
      await tick();
      expect(source.log.length).toBe(before);
      const middle = 3 + 50_000;
      tree.ensureRange(middle, middle + 20);
      await tick();
      const offsets = children(source)
        .slice(2)
        .map((c) => c.offset);
      expect(offsets).toEqual([50_000 - 200, 50_000]);
      expect(tree.row(middle)?.node?.key).toBe(wideKey(50_000));
    });

    it("never has more than one page requested at once, dropping stale pages", async () => {
      const { source, tree } = setup({ latencyMs: 2 });
      await tree.expand(0);
      await tree.expand(2);
      for (let row = 0; row < 40_000; row += 997) {
        tree.ensureRange(row, row + 30);
        await tick(1);
      }
      while (source.inFlight > 0) await tick(2);
      const calls = children(source);
      expect(source.maxInFlight).toBe(1);
      expect(calls.every((c) => c.limit <= 200)).toBe(true);
      expect(calls.length).toBeLessThan(50);
      const last = 3 + 39_881;
      expect(tree.row(last)?.node?.key).toBe(wideKey(39_881));
    });

    it("drops queued pages whose rows were scrolled away before they were sent", async () => {
      const { source, tree } = setup({ latencyMs: 20 });
      await tree.expand(0);
      await tree.expand(2);
      while (source.inFlight > 0 || totalsRequests(source).length < 2) await tick(5);
      for (let k = 1; k <= 10; k++) tree.ensureRange(3 + k * 5000, 3 + k * 5000 + 30);
      while (source.inFlight > 0) await tick(5);
      const offsets = children(source)
        .slice(2)
        .map((c) => c.offset);
      expect(offsets).toEqual([4800, 50_000 - 200, 50_000]);
    });

    it("reveals a child deep in the level, page by page", async () => {
      const { source, tree } = setup();
      const index = await tree.revealPath(["wide", wideKey(1234)]);
      expect(index).toBe(2 + 1 + 1234);
      expect(tree.selectedPath).toEqual(["wide", wideKey(1234)]);
      expect(tree.selectedIndex).toBe(index);
      const wide = children(source).filter((c) => c.path[0] === "wide");
      expect(wide.map((c) => c.offset)).toEqual([0, 200, 400, 600, 800, 1000, 1200]);
      expect(source.maxInFlight).toBe(1);
    });

    it("selects a placeholder by index, and its node once loaded", async () => {
      const { tree } = setup();
      await tree.expand(0);
      await tree.expand(2);
      const changes: boolean[] = [];
      tree.subscribe((c) => changes.push(c.selection));
      tree.selectIndex(3 + WIDE - 1);
      expect(tree.selectedPath).toBeNull();
      tree.ensureRange(3 + WIDE - 10, 3 + WIDE);
      await tick();
      expect(tree.selectedPath).toEqual(["wide", wideKey(WIDE - 1)]);
      expect(changes.filter(Boolean)).toHaveLength(2);
    });
  });

  it("reveals a nested path, expanding its ancestors but not the node", async () => {
    const { tree } = setup();
    const index = await tree.revealPath(["a", "y", "deep"]);
    expect(labels(tree)).toEqual(["ckpt", "a", "x", "y", "deep", "wide", "zeta", "zulu"]);
    expect(index).toBe(4);
    expect(tree.row(4)).toMatchObject({ selected: true, depth: 4 });
    expect(await tree.revealPath(["a"])).toBe(1);
    expect(tree.row(1)?.expanded).toBe(true);
  });

  it("reveals the root as row 0, and a missing key as -1", async () => {
    const { tree } = setup();
    expect(await tree.revealPath([])).toBe(0);
    expect(await tree.revealPath(["a", "nope"])).toBe(-1);
    expect(await tree.revealPath(["zeta", "below-a-leaf"])).toBe(-1);
    expect(tree.indexOfPath(["a", "x"])).toBe(2);
  });

  it("lets only the latest of overlapping reveals select", async () => {
    const { tree } = setup({ latencyMs: 1 });
    const first = tree.revealPath(["wide", wideKey(900)]);
    const second = tree.revealPath(["a", "x"]);
    expect(await first).toBe(-1);
    expect(await second).toBeGreaterThan(0);
    expect(tree.selectedPath).toEqual(["a", "x"]);
  });

  it("moves the selection to a node collapsed above it", async () => {
    const { tree } = setup();
    await tree.revealPath(["a", "y", "deep"]);
    const changes: boolean[] = [];
    tree.subscribe((c) => changes.push(c.selection));
    tree.collapse(1);
    expect(tree.selectedPath).toEqual(["a"]);
    expect(tree.selectedIndex).toBe(1);
    expect(changes).toEqual([true]);
  });

  it("keeps the selection on its node when rows above change", async () => {
    const { tree } = setup();
    await tree.expand(0);
    tree.selectIndex(4);
    expect(tree.selectedPath).toEqual(["zulu"]);
    await tree.expand(1);
    expect(tree.selectedIndex).toBe(6);
    expect(tree.selectedPath).toEqual(["zulu"]);
  });

  it("follows the server's total when it differs from n_children", async () => {
    const source = new MemoryDataSource({
      key: "",
      children: [{ key: "only" }, { key: "two" }],
      n_children: 5,
    });
    const tree = new TreeModel(source, source.root);
    expect(source.root.n_children).toBe(5);
    const expanding = tree.expand(0);
    expect(tree.rowCount).toBe(6);
    await expanding;
    expect(tree.rowCount).toBe(3);
    expect(labels(tree).slice(1)).toEqual(["only", "two"]);
  });

  it("shows a failed page as rows with the error, and retries when reopened", async () => {
    const source = new MemoryDataSource({
      key: "",
      children: [
        { key: "broken", fail: "CheckpointFormatError", n_children: 2, has_children: true },
      ],
    });
    const tree = new TreeModel(source, source.root);
    await tree.expand(0);
    await tree.expand(1);
    expect(tree.rowCount).toBe(4);
    expect(tree.row(2)).toMatchObject({ node: null, error: "broken: CheckpointFormatError" });
    tree.ensureRange(0, 10);
    await tick();
    expect(children(source)).toHaveLength(2);
    tree.collapse(1);
    await tree.expand(1);
    expect(children(source)).toHaveLength(3);
  });

  it("cancels its request on dispose and stops notifying", async () => {
    const { source, tree } = setup({ latencyMs: 50 });
    let notified = 0;
    tree.subscribe(() => notified++);
    void tree.expand(0);
    notified = 0;
    tree.dispose();
    await tick();
    expect(source.inFlight).toBe(0);
    expect(notified).toBe(0);
  });
});
