import { describe, expect, it } from "vitest";
import { DotGroupedSource, dotGroupOf } from "../src/dot-groups";
import { MemoryDataSource, type MemoryNode } from "../src/memory-data-source";
import { TreeModel } from "../src/tree-model";

/** A flat state_dict: a 2-layer decoder, an embedding, a head and a step. */
function flatStateDict(): MemoryNode {
  const keys = ["embed.weight"];
  for (const layer of [0, 1]) {
    for (const p of ["self_attn.in_proj_weight", "self_attn.in_proj_bias", "linear1.weight"]) {
      keys.push(`decoder.layers.${layer}.${p}`);
    }
  }
  keys.push("head.weight", "step");
  return {
    key: "",
    children: keys.map((key) => ({ key, shape: [4, 2], dtype: "float32", bytes: 32 })),
  };
}

async function grouped(enabled = true) {
  const memory = new MemoryDataSource(flatStateDict());
  let groupable = 0;
  const source = new DotGroupedSource(memory, { enabled, onGroupable: () => groupable++ });
  const tree = new TreeModel(source, memory.root, { rootLabel: "flat" });
  await tree.expand(0);
  const labels = () =>
    Array.from({ length: tree.rowCount }, (_, i) => {
      const row = tree.row(i);
      return `${"  ".repeat((row?.depth ?? 1) - 1)}${row?.label}`;
    });
  return { tree, labels, memory, groupable: () => groupable };
}

describe("dotted keys grouped by .", () => {
  it("nests the keys that share a prefix, a one-group chain as one row", async () => {
    const { tree, labels, groupable } = await grouped();
    expect(labels()).toEqual([
      "flat",
      "  embed.weight",
      "  decoder.layers",
      "  head.weight",
      "  step",
    ]);
    expect(groupable()).toBe(1);
    await tree.expand(2);
    await tree.expand(3);
    expect(labels().slice(2, 7)).toEqual([
      "  decoder.layers",
      "    0",
      "      self_attn",
      "      linear1.weight",
      "    1",
    ]);
    const group = dotGroupOf(tree.row(2)?.node);
    expect(group).toEqual({ parent: [], prefix: "decoder.layers.", keys: 6 });
    expect(tree.row(2)?.node?.bytes).toBe(6 * 32);
  });

  it("keeps the real keys: paths, reveals and the selection", async () => {
    const { tree, labels } = await grouped();
    const key = "decoder.layers.1.self_attn.in_proj_bias";
    const index = await tree.revealPath([key]);
    expect(tree.selectedPath).toEqual([key]);
    expect(tree.selectedNode?.key).toBe(key);
    expect(tree.row(index)?.label).toBe("in_proj_bias");
    expect(labels()[index]).toBe("        in_proj_bias");
    expect(tree.indexOfPath([key])).toBe(index);
    // a group is no key: no path is selected on it
    tree.selectIndex(2);
    expect(tree.row(2)?.label).toBe("decoder.layers");
    expect(tree.selectedPath).toBeNull();
    expect(await tree.revealPath(["decoder.layers.9.nothing"])).toBe(-1);
  });

  it("never asks the kernel for a group's path", async () => {
    const { tree, memory } = await grouped();
    await tree.expand(2);
    await tree.expand(3);
    const asked = memory.log.filter((e) => e.method === "children").map((e) => e.params.path);
    expect(asked).toEqual([[]]);
  });

  it("shows the level as it is when switched off, and still says it could group", async () => {
    const { labels, groupable } = await grouped(false);
    expect(labels()).toHaveLength(10);
    expect(labels()[2]).toBe("  decoder.layers.0.self_attn.in_proj_weight");
    expect(groupable()).toBe(1);
  });

  it("leaves a level with no shared prefix, and a folder of checkpoints, as they are", async () => {
    const plain = new MemoryDataSource({
      key: "",
      children: [
        { key: "a.weight", shape: [1], dtype: "float32" },
        { key: "b.weight", shape: [1], dtype: "float32" },
      ],
    });
    const files = new MemoryDataSource({
      key: "",
      kind: "collection",
      children: [
        { key: "step.1.tdz", kind: "checkpoint", children: [] },
        { key: "step.2.tdz", kind: "checkpoint", children: [] },
      ],
    });
    for (const memory of [plain, files]) {
      let groupable = false;
      const source = new DotGroupedSource(memory, { onGroupable: () => (groupable = true) });
      const tree = new TreeModel(source, memory.root);
      await tree.expand(0);
      expect(tree.rowCount).toBe(3);
      expect(groupable).toBe(false);
    }
  });
});

describe("a level too large to group", () => {
  it("is paged as it is, its first page asked once", async () => {
    const memory = new MemoryDataSource({
      key: "",
      children: Array.from({ length: 6000 }, (_, i) => ({
        key: `blocks.${i}.weight`,
        shape: [1],
        dtype: "float32",
      })),
    });
    let groupable = false;
    const source = new DotGroupedSource(memory, { onGroupable: () => (groupable = true) });
    const tree = new TreeModel(source, memory.root);
    await tree.expand(0);
    expect(tree.rowCount).toBe(6001);
    expect(tree.row(1)?.label).toBe("blocks.0.weight");
    const asked = memory.log.filter((e) => e.method === "children").map((e) => e.params);
    expect(asked).toEqual([{ path: [], offset: 0, limit: 200, totals: false }]);
    expect(groupable).toBe(false);
  });
});
