import { describe, expect, it } from "vitest";
import { filterTree } from "../src/filter-tree";
import { MemoryDataSource } from "../src/memory-data-source";
import { TreeModel } from "../src/tree-model";
import { sampleTree } from "./trees";

describe("filterTree", () => {
  it("holds only the matches and their ancestors, in the tree's order", async () => {
    const source = new MemoryDataSource(sampleTree(300));
    const f = await filterTree(source, source.root, "deep");
    expect(f.matches).toEqual([["a", "y", "deep"]]);
    expect(f.total).toBe(1);
    expect(f.root.n_children).toBe(1);
    const top = await f.source.children([], 0, 10);
    expect(top.children.map((c) => c.key)).toEqual(["a"]);
    const a = await f.source.children(["a"], 0, 10);
    expect(a.children.map((c) => [c.key, c.n_children])).toEqual([["y", 1]]);
    const y = await f.source.children(["a", "y"], 0, 10);
    expect(y.children.map((c) => [c.key, c.has_children])).toEqual([["deep", false]]);
  });

  it("reads every page of matches, up to the cap, and a TreeModel pages through them", async () => {
    const source = new MemoryDataSource(sampleTree(300));
    const f = await filterTree(source, source.root, "wide/*", { pageSize: 50, cap: 120 });
    expect(f.total).toBe(300);
    expect(f.matches).toHaveLength(120);
    expect(source.calls("search").map((c) => c.params.offset ?? 0)).toEqual([0, 50, 100]);
    const tree = new TreeModel(f.source, f.root, { pageSize: 50 });
    await tree.expand(0);
    await tree.expand(1);
    expect(tree.row(1)?.label).toBe("wide");
    expect(tree.rowCount).toBe(2 + 120);
  });

  it("shows nothing below the root when nothing matches", async () => {
    const source = new MemoryDataSource(sampleTree(10));
    const f = await filterTree(source, source.root, "nothing-like-this");
    expect(f.root.has_children).toBe(false);
    expect(f.matches).toEqual([]);
  });
});
