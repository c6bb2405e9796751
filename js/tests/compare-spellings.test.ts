import { describe, expect, it } from "vitest";
import { spelledPaths } from "../src/compare-format";
import { type CompareState, type DiffItem, parseCompareState } from "../src/compare-protocol";
import { sidePath } from "../src/render-compare-details";
import { loadGolden } from "./golden";

/** A leaf the flat side a spells `2.0.weight`, the side b as `2/0/weight`. */
const spelled: DiffItem = {
  key: "weight",
  path: ["2", "0", "weight"],
  status: "changed",
  changes: ["content"],
  renamed_from: null,
  path_a: ["2.0.weight"],
  path_b: ["2", "0", "weight"],
  kind: "leaf",
  a: { kind: "leaf", class: "Tensor", dtype: "float32", shape: [2, 3], bytes: 24 },
  b: { kind: "leaf", class: "Tensor", dtype: "float32", shape: [2, 3], bytes: 24 },
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

function state(subpathA: string[], subpathB: string[]): CompareState {
  const golden = parseCompareState(loadGolden("state_compare").message.compare);
  if (!golden) throw new Error("the golden compare state does not parse");
  return { ...golden, summary: { ...golden.summary, subpath_a: subpathA, subpath_b: subpathB } };
}

describe("keys paired across spellings", () => {
  it("name the side whose real path differs, not a rename's old path", () => {
    expect(spelledPaths(spelled)).toEqual([["a", ["2.0.weight"]]]);
    const flatB = { ...spelled, path_a: spelled.path, path_b: ["2.0.weight"] };
    expect(spelledPaths(flatB)).toEqual([["b", ["2.0.weight"]]]);
    const plain = { ...spelled, path_a: spelled.path, path_b: spelled.path };
    expect(spelledPaths(plain)).toEqual([]);
    const renamed = {
      ...plain,
      status: "renamed" as const,
      renamed_from: ["old"],
      path_a: ["old"],
    };
    expect(spelledPaths(renamed)).toEqual([]);
    // a node one side spells only in its keys' names: that side has no path
    const group = {
      ...plain,
      path: ["2"],
      key: "2",
      path_a: null,
      path_b: ["2"],
      a: null,
      has_children: true,
    };
    expect(spelledPaths(group)).toEqual([]);
  });

  it("load and preview each side by its own path, under its subpath", () => {
    const s = state(["model"], []);
    expect(sidePath(s, spelled, "a")).toEqual(["model", "2.0.weight"]);
    expect(sidePath(s, spelled, "b")).toEqual(["2", "0", "weight"]);
    const renamed = { ...spelled, path_a: ["old"], renamed_from: ["old"] };
    expect(sidePath(s, renamed, "a")).toEqual(["model", "old"]);
  });
});
