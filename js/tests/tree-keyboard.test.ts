import { describe, expect, it } from "vitest";
import { MemoryDataSource } from "../src/memory-data-source";
import { TreeKeyboard } from "../src/tree-keyboard";
import { TreeModel } from "../src/tree-model";
import { sampleTree, tick } from "./trees";

async function setup() {
  const source = new MemoryDataSource(sampleTree(1000));
  const tree = new TreeModel(source, source.root, { rootLabel: "ckpt" });
  let now = 0;
  const keys = new TreeKeyboard(tree, { now: () => now, typeAheadMs: 500 });
  await tree.expand(0);
  const press = async (...sequence: string[]) => {
    for (const key of sequence) {
      keys.handle(key);
      now += 10;
      await tick();
    }
    return tree.selectedPath;
  };
  return { tree, keys, press, wait: (ms: number) => (now += ms) };
}

describe("TreeKeyboard", () => {
  it("moves with Up, Down, Home and End, without wrapping", async () => {
    const { press } = await setup();
    expect(await press("ArrowDown")).toEqual(["a"]);
    expect(await press("ArrowDown", "ArrowDown")).toEqual(["zeta"]);
    expect(await press("ArrowUp")).toEqual(["wide"]);
    expect(await press("End")).toEqual(["zulu"]);
    expect(await press("ArrowDown")).toEqual(["zulu"]);
    expect(await press("Home")).toEqual([]);
    expect(await press("ArrowUp")).toEqual([]);
  });

  it("expands with Right, then moves into the children", async () => {
    const { tree, press } = await setup();
    await press("ArrowDown", "ArrowRight");
    expect(tree.row(1)?.expanded).toBe(true);
    expect(tree.selectedPath).toEqual(["a"]);
    expect(await press("ArrowRight")).toEqual(["a", "x"]);
    expect(await press("ArrowRight")).toEqual(["a", "x"]);
  });

  it("collapses with Left, or moves to the parent", async () => {
    const { tree, press } = await setup();
    await press("ArrowDown", "ArrowRight", "ArrowRight", "ArrowDown", "ArrowRight");
    expect(tree.selectedPath).toEqual(["a", "y"]);
    expect(tree.row(3)?.expanded).toBe(true);
    expect(await press("ArrowLeft")).toEqual(["a", "y"]);
    expect(tree.row(3)?.expanded).toBe(false);
    expect(await press("ArrowLeft")).toEqual(["a"]);
    expect(await press("ArrowLeft")).toEqual(["a"]);
    expect(tree.row(1)?.expanded).toBe(false);
    expect(await press("ArrowLeft")).toEqual([]);
    expect(await press("ArrowLeft")).toEqual([]);
    expect(tree.rowCount).toBe(1);
    expect(await press("ArrowLeft")).toEqual([]);
  });

  it("toggles a node with Enter and activates a leaf", async () => {
    const { tree, keys, press } = await setup();
    await press("ArrowDown");
    expect(keys.handle("Enter")).toEqual({ handled: true, activated: ["a"] });
    await tick();
    expect(tree.row(1)?.expanded).toBe(true);
    await press("ArrowDown");
    expect(keys.handle("Enter")).toEqual({ handled: true, activated: ["a", "x"] });
    await press("ArrowUp", "Enter");
    expect(tree.row(1)?.expanded).toBe(false);
  });

  it("jumps by type-ahead, cycling on a repeated letter", async () => {
    const { press } = await setup();
    expect(await press("z")).toEqual(["zeta"]);
    expect(await press("z")).toEqual(["zulu"]);
    expect(await press("z")).toEqual(["zeta"]);
  });

  it("matches a longer prefix typed quickly, case-insensitively", async () => {
    const { press, wait } = await setup();
    expect(await press("Z", "U")).toEqual(["zulu"]);
    wait(1000);
    expect(await press("w")).toEqual(["wide"]);
  });

  it("type-ahead keeps the current row when the longer prefix still matches", async () => {
    const { press } = await setup();
    expect(await press("z", "e")).toEqual(["zeta"]);
  });

  it("leaves other keys alone", async () => {
    const { keys } = await setup();
    expect(keys.handle("Tab").handled).toBe(false);
    expect(keys.handle("a", { ctrlKey: true }).handled).toBe(false);
    expect(keys.handle(" ").handled).toBe(false);
  });
});

describe("keys pressed while a level loads", () => {
  const WALK = [
    ...["ArrowDown", "ArrowRight", "ArrowRight", "ArrowDown", "ArrowRight", "ArrowRight"],
    ...["ArrowDown", "ArrowRight", "ArrowRight", "ArrowDown", "ArrowDown", "Enter", "z"],
  ];

  async function walk(settleEachKey: boolean) {
    const source = new MemoryDataSource(sampleTree(1000), { latencyMs: 15 });
    const tree = new TreeModel(source, source.root, { rootLabel: "ckpt" });
    const keys = new TreeKeyboard(tree);
    const activated: string[][] = [];
    keys.onLateResult = (r) => r.activated && activated.push(r.activated);
    void tree.expand(0);
    for (const key of WALK) {
      const result = keys.handle(key);
      if (result.activated) activated.push(result.activated);
      while (settleEachKey && (keys.waiting > 0 || tree.settling)) await tick(5);
    }
    for (let i = 0; i < 400 && (keys.waiting > 0 || tree.settling); i++) await tick(5);
    const expanded = Array.from({ length: tree.rowCount }, (_, i) => tree.row(i))
      .filter((r) => r?.expanded)
      .map((r) => r?.node?.path);
    return { selected: tree.selectedPath, expanded, activated, rows: tree.rowCount };
  }

  it("are applied in order once it has loaded: fast keys end where slow ones do", async () => {
    const slow = await walk(true);
    expect(slow.selected).toEqual(["zeta"]);
    expect(slow.expanded).toEqual([[], ["a"], ["a", "y"], ["wide"]]);
    expect(slow.activated).toEqual([["wide", "k000002"]]);
    const fast = await walk(false);
    expect(fast).toEqual(slow);
  });
});
