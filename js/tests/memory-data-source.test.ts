import { describe, expect, it } from "vitest";
import { ProtocolError } from "../src/data-source";
import { MemoryDataSource } from "../src/memory-data-source";
import { replayTree } from "./trees";

describe("MemoryDataSource", () => {
  const source = new MemoryDataSource(replayTree());

  it("summarizes the root", () => {
    expect(source.root).toMatchObject({
      key: "",
      path: [],
      kind: "tensordict",
      has_children: true,
      n_children: 5,
      batch_size: [1000],
    });
  });

  it("pages children", async () => {
    const page = await source.children([], 1, 2);
    expect(page).toMatchObject({ path: [], offset: 1, total: 5 });
    expect(page.children.map((c) => c.path)).toEqual([["action"], ["reward"]]);
    expect((await source.children([], 4, 200)).children).toHaveLength(1);
    expect((await source.children([], 9, 200)).children).toHaveLength(0);
  });

  it("searches keys by case-insensitive substring, depth first, with a limit", async () => {
    const first = await source.search("O", 3);
    expect(first).toMatchObject({
      pattern: "O",
      offset: 0,
      matches: [["obs"], ["action"], ["done"]],
      truncated: true,
    });
    expect(first.nodes.map((n) => [n.path, n.kind])).toEqual([
      [["obs"], "tensordict"],
      [["action"], "leaf"],
      [["done"], "leaf"],
    ]);
    expect((await source.search("ixel", 10)).matches).toEqual([["obs", "pixels"]]);
    expect((await source.search("", 10)).matches).toEqual([]);
  });

  it("counts every match and pages through them", async () => {
    const all = await source.search("*", 1000);
    const page = await source.search("*", 2, { offset: 1 });
    expect(page.total).toBe(all.total);
    expect(page.matches).toEqual(all.matches.slice(1, 3));
    expect(source.log.at(-1)?.params).toEqual({ pattern: "*", limit: 2, offset: 1 });
    const count = await source.search("*", 0);
    expect(count.matches).toEqual([]);
    expect(count.total).toBe(all.total);
    expect((await source.search("obs/pixels", 5)).matches).toEqual([["obs", "pixels"]]);
  });

  it("gives node details and inline values", async () => {
    expect((await source.node(["info"])).value).toEqual({ seed: 7 });
    expect((await source.node(["obs", "pixels"])).device).toBe("cpu");
  });

  it("previews a leaf with statistics", async () => {
    const tree = new MemoryDataSource({
      key: "",
      children: [{ key: "x", shape: [3, 2], data: [1, 2, 3, Number.NaN, 5, 6] }],
    });
    const preview = await tree.preview(["x"], 2);
    expect(preview.slice.shape).toEqual([2, 2]);
    expect([...preview.slice.data]).toEqual([1, 2, 3, Number.NaN]);
    // like the kernel: statistics over the whole leaf, not the rows shown
    expect(preview.stats).toMatchObject({ min: 1, max: 6, mean: 3.4, nan: 1, inf: 0, count: 6 });
    expect(preview.display_dtype).toBe("float32");
    expect(preview.slice.data).toBeInstanceOf(Float32Array);
    const counts = [...(preview.histogram?.counts.data ?? [])].map(Number);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(5);
    expect(preview.histogram?.edges.data).toHaveLength(65);
    expect(preview.histogram?.values).toBeNull();
    expect(preview.selection).toEqual({
      index: "[0:3, 0:2]",
      shape: [3, 2],
      dims: [
        { start: 0, stop: 3, step: 1, kept: true },
        { start: 0, stop: 2, step: 1, kept: true },
      ],
    });
  });

  it("previews what an index picks, as the kernel does", async () => {
    const data = Array.from({ length: 40 }, (_, i) => i);
    const tree = new MemoryDataSource({
      key: "",
      children: [
        { key: "m", shape: [10, 4], data },
        { key: "flag", shape: [6], dtype: "bool", data: [0, 1, 0, 0, 0, 0] },
      ],
    });
    const picked = await tree.preview(["m"], 20, { index: "[5:8, -1]" });
    expect(picked.slice.shape).toEqual([3]);
    expect([...picked.slice.data]).toEqual([23, 27, 31]);
    expect(picked.selection.index).toBe("[5:8, 3]");
    expect(picked.stats).toMatchObject({ count: 3, min: 23, max: 31 }); // of the selection
    const paged = await tree.preview(["m"], 2, { offset: 9 });
    expect([...paged.slice.data]).toEqual([36, 37, 38, 39]);
    expect(paged.plane).toEqual({ rows: 0, cols: 1, at: [null, null], offset: 9, col_offset: 0 });
    expect(paged.stats?.count).toBe(40);
    const fresh = new MemoryDataSource({ key: "", children: [{ key: "m", shape: [10, 4], data }] });
    const cold = await fresh.preview(["m"], 2, { stats: false });
    expect(cold.stats).toBeNull();
    expect((await tree.preview(["m"], 2, { stats: false })).stats?.count).toBe(40);
    const map = await tree.preview(["m"], 1, { heatmap: { rows: 2, cols: 2 } });
    expect(map.heatmap?.of).toEqual([10, 4]);
    expect([...(map.heatmap?.cells.data ?? [])]).toEqual([8.5, 10.5, 28.5, 30.5]);
    const flag = await tree.preview(["flag"], 6);
    expect(flag.stats).toMatchObject({ mean: null, std: null, nan: null, inf: null, count: 6 });
    expect([...(flag.histogram?.counts.data ?? [])].map(Number)).toEqual([5, 1]);
    expect([...(flag.histogram?.values?.data ?? [])]).toEqual([0, 1]);
    await expect(tree.preview(["m"], 2, { index: "[0, 0, 0]" })).rejects.toMatchObject({
      type: "PreviewIndexError",
    });
    await expect(tree.preview(["m"], 2, { index: "[::-1]" })).rejects.toMatchObject({
      type: "RequestError",
    });
  });

  it("sends a table as the kernel does: a plane of two dims, the others at a position", async () => {
    const tree = new MemoryDataSource({
      key: "",
      children: [
        { key: "t", shape: [2, 2, 3], data: Array.from({ length: 12 }, (_, i) => i) },
        { key: "v", shape: [3], data: [7, 8, 9] },
      ],
    });
    const table = await tree.preview(["t"], 20);
    expect(table.plane).toEqual({
      rows: 1,
      cols: 2,
      at: [0, null, null],
      offset: 0,
      col_offset: 0,
    });
    expect(table.slice.shape).toEqual([2, 3]);
    expect([...table.slice.data]).toEqual([0, 1, 2, 3, 4, 5]);
    expect(table.stats?.count).toBe(12);
    const slid = await tree.preview(["t"], 20, { plane: { rows: 2, cols: 0, at: [0, 1, 0] } });
    expect(slid.slice.shape).toEqual([3, 2]);
    expect([...slid.slice.data]).toEqual([3, 9, 4, 10, 5, 11]); // t[:, 1, :].T
    await expect(
      tree.preview(["t"], 20, { plane: { rows: 2, cols: 0, at: [0, 2, 0] } }),
    ).rejects.toMatchObject({ type: "PreviewIndexError" });
    expect((await tree.preview(["v"], 2)).slice.shape).toEqual([2]);
  });

  it("loads with progress and gives reproducing code", async () => {
    const seen: number[] = [];
    const result = await source.load(
      { path: ["obs"], device: "cuda:0", mode: null, allow_pickle: false, variable: "obs" },
      (p) => seen.push(p.done),
    );
    expect(seen).toEqual([0, 1, 2]);
    expect(result.code).toBe(
      'obs = tdview.load_memmap("checkpoint", subpath="obs", device="cuda:0", mode=None)',
    );
  });

  it("fails like the kernel: structured errors, cancellation", async () => {
    await expect(source.node(["nope"])).rejects.toMatchObject({ type: "KeyError", path: ["nope"] });
    const abort = new AbortController();
    abort.abort();
    await expect(source.devices({ signal: abort.signal })).rejects.toBeInstanceOf(ProtocolError);
    await expect(source.preview(["obs"], 1)).rejects.toMatchObject({ type: "TypeError" });
  });
});
