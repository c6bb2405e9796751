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
    expect(bad({ index: "[0]", offset: 3 })).toBeNull();
    expect(bad({ offset: -1 })).toBeNull();
    expect(bad({ heatmap: { rows: 0, cols: 4 } })).toBeNull();
    expect(bad({ heatmap: { rows: 4, cols: 1025 } })).toBeNull();
    expect(bad({ stats: "no" })).toBeNull();
    expect(bad({ offset: 7 })).not.toBeNull();
    expect(bad({ index: null, heatmap: null })).not.toBeNull();
  });
});
