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
    expect(await source.search("O", 3)).toEqual({
      pattern: "O",
      matches: [["obs"], ["action"], ["done"]],
      truncated: true,
    });
    expect((await source.search("ixel", 10)).matches).toEqual([["obs", "pixels"]]);
    expect((await source.search("", 10)).matches).toEqual([]);
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
    expect(preview.stats).toMatchObject({ min: 1, max: 3, mean: 2, nan: 1, inf: 0, count: 4 });
    expect(preview.display_dtype).toBe("float32");
    expect(preview.slice.data).toBeInstanceOf(Float32Array);
    const counts = [...(preview.histogram?.counts.data ?? [])].map(Number);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(3);
    expect(preview.histogram?.edges.data).toHaveLength(11);
  });

  it("sends a table as the kernel does: rows by the other dims flattened", async () => {
    const tree = new MemoryDataSource({
      key: "",
      children: [
        { key: "t", shape: [2, 2, 3], data: Array.from({ length: 12 }, (_, i) => i) },
        { key: "v", shape: [3], data: [7, 8, 9] },
      ],
    });
    const table = await tree.preview(["t"], 20);
    expect(table.slice.shape).toEqual([2, 6]);
    expect([...table.slice.data]).toEqual(Array.from({ length: 12 }, (_, i) => i));
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
