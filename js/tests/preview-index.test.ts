/**
 * The preview index grammar (src/preview-index.ts) against the cases shared with the
 * Python tests (tests/preview_index_cases.json), and the request decoder that uses it.
 */

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  dimSize,
  exampleIndex,
  IndexSyntaxError,
  indexText,
  PreviewIndexError,
  parseIndex,
  selectIndex,
} from "../src/preview-index";
import { makeRequest, parseRequest } from "../src/protocol";

interface Case {
  index: string;
  why: string;
  parts?: unknown[];
  shape?: number[];
  dims?: unknown[];
  canonical?: string;
  error?: "RequestError" | "PreviewIndexError";
}

const file = join(
  dirname(fileURLToPath(import.meta.url)),
  "..",
  "..",
  "tests",
  "preview_index_cases.json",
);
const cases = (JSON.parse(readFileSync(file, "utf8")) as { cases: Case[] }).cases;

describe("preview index", () => {
  it.each(cases.map((c) => [JSON.stringify(c.index).slice(0, 40), c] as const))("%s", (_, c) => {
    if (c.error === "RequestError") {
      expect(() => parseIndex(c.index), c.why).toThrow(IndexSyntaxError);
      return;
    }
    const parts = parseIndex(c.index);
    expect(parts, c.why).toEqual(c.parts);
    const shape = c.shape ?? [];
    if (c.error === "PreviewIndexError") {
      expect(() => selectIndex(parts, shape), c.why).toThrow(PreviewIndexError);
      return;
    }
    const dims = selectIndex(parts, shape);
    expect(dims, c.why).toEqual(c.dims);
    expect(indexText(dims)).toBe(c.canonical);
    for (const d of dims)
      expect(dimSize(d)).toBe(Math.max(0, Math.ceil((d.stop - d.start) / d.step)));
  });

  it("is checked in a preview request as the kernel checks it", () => {
    const ok = makeRequest(1, "preview", {
      path: ["x"],
      rows: 20,
      index: "[50000:50020, :8]",
      stats: false,
      heatmap: { rows: 64, cols: 8 },
    });
    expect(parseRequest(ok)).not.toBeNull();
    const bad = (params: Record<string, unknown>) =>
      parseRequest({ ...ok, params: { path: ["x"], rows: 4, ...params } });
    expect(bad({ index: "[::-1]" })).toBeNull();
    expect(bad({ index: "__import__('os')" })).toBeNull();
    expect(bad({ plane: { rows: 0, cols: 1 } })).toBeNull();
    expect(bad({ plane: { rows: -1, cols: 1, at: [] } })).toBeNull();
    expect(bad({ index: "[0]", offset: 3 })).not.toBeNull(); // the table's page of a selection
    expect(bad({ plane: { rows: 2, cols: 3, at: [1, 0, 0, 0] } })).not.toBeNull();
    expect(bad({ offset: -1 })).toBeNull();
    expect(bad({ heatmap: { rows: 0, cols: 4 } })).toBeNull();
    expect(bad({ heatmap: { rows: 4, cols: 1025 } })).toBeNull();
    expect(bad({ stats: "no" })).toBeNull();
    expect(bad({ offset: 7 })).not.toBeNull();
    expect(bad({ index: null, heatmap: null })).not.toBeNull();
  });

  it("says which part a leaf cannot take, and the leaf's shape", () => {
    const shape = [64, 3, 7, 7];
    expect(() => selectIndex(parseIndex("[0, 0, 7]"), shape)).toThrow(
      "part 2 of [0, 0, 7], 7, is out of range for dim 2 of size 7 (from -7 to 6): " +
        "the leaf's shape is [64, 3, 7, 7]",
    );
    expect(() => selectIndex(parseIndex("[0, 0, 0]"), [256, 64])).toThrow(
      "[0, 0, 0] has 3 parts but the leaf has 2 dims: its shape is [256, 64]",
    );
    expect(() => selectIndex(parseIndex("[..., -8]"), shape)).toThrow("part 1 of [..., -8]");
  });

  it("suggests an index from the leaf's own shape", () => {
    expect(exampleIndex([256, 64])).toBe("[128:148, :8]");
    expect(exampleIndex([1000])).toBe("[500:520]");
    expect(exampleIndex([64, 3, 7, 7])).toBe("[1, ..., :4]");
    expect(exampleIndex([3, 2])).toBe("[1:3, :2]");
    expect(exampleIndex([])).toBe("");
    for (const shape of [[256, 64], [1000], [64, 3, 7, 7], [3, 2], [1], [1, 1, 1]]) {
      expect(() => selectIndex(parseIndex(exampleIndex(shape)), shape)).not.toThrow();
    }
  });
});
