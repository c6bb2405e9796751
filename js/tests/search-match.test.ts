/**
 * The search rules (src/search-match.ts) against the cases shared with the Python tests
 * (tests/search_cases.json): the same pattern, the same paths, the same matches, and the
 * same pages with the count on and off.
 */

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { MemoryDataSource, type MemoryNode } from "../src/memory-data-source";
import { compileSearch } from "../src/search-match";

interface Case {
  tree: string;
  pattern: string;
  why: string;
  matches: string[][];
  /** How the pattern was read (none when absent). */
  notes?: string[];
}

const file = join(
  dirname(fileURLToPath(import.meta.url)),
  "..",
  "..",
  "tests",
  "search_cases.json",
);
/** One page of a search and the reply both sides give (`pages` in the file). */
interface PageCase {
  tree: string;
  pattern: string;
  offset: number;
  limit: number;
  count: boolean;
  why: string;
  total: number;
  counted: boolean;
  truncated: boolean;
  matches: string[][];
}

const doc = JSON.parse(readFileSync(file, "utf8")) as {
  trees: Record<string, string[][]>;
  cases: Case[];
  pages: PageCase[];
};

/** A tree whose nodes are exactly `paths` (a path with none below it is a leaf). */
function treeOf(paths: string[][]): MemoryNode {
  const root: MemoryNode = { key: "", children: [] };
  const byPath = new Map<string, MemoryNode>([["", root]]);
  for (const path of paths) {
    const parent = byPath.get(JSON.stringify(path.slice(0, -1)).slice(1, -1)) as MemoryNode;
    const node: MemoryNode = { key: path[path.length - 1] as string };
    parent.children = [...(parent.children ?? []), node];
    byPath.set(JSON.stringify(path).slice(1, -1), node);
  }
  for (const node of byPath.values()) if (node.children?.length === 0) delete node.children;
  return root;
}

describe("search rules", () => {
  it.each(doc.cases.map((c) => [`${c.tree}: ${JSON.stringify(c.pattern)}`, c] as const))(
    "%s",
    (_, c) => {
      const match = compileSearch(c.pattern);
      const tree = doc.trees[c.tree] ?? [];
      expect(
        tree.filter((p) => match(p)),
        c.why,
      ).toEqual(c.matches);
      expect(match.notes, c.why).toEqual(c.notes ?? []);
    },
  );

  it.each(Object.keys(doc.trees))("the in-memory data source finds them in %s", async (name) => {
    const tree = doc.trees[name] ?? [];
    const source = new MemoryDataSource(treeOf(tree));
    for (const c of doc.cases.filter((k) => k.tree === name)) {
      const result = await source.search(c.pattern, 1000);
      expect(result.matches, c.pattern).toEqual(c.matches);
      expect(result.total).toBe(c.matches.length);
      expect(result.nodes.map((n) => n.path)).toEqual(c.matches);
      expect(result.notes, c.pattern).toEqual(c.notes ?? []);
    }
  });

  it.each(doc.pages.map((c) => [c.why, c] as const))("a page: %s", async (_, c) => {
    const source = new MemoryDataSource(treeOf(doc.trees[c.tree] ?? []));
    const result = await source.search(c.pattern, c.limit, { offset: c.offset, count: c.count });
    expect(result.matches, c.why).toEqual(c.matches);
    expect([result.total, result.counted, result.truncated], c.why).toEqual([
      c.total,
      c.counted,
      c.truncated,
    ]);
  });

  it("has a reason for every case", () => {
    expect(doc.cases.length).toBeGreaterThan(40);
    for (const c of doc.cases) expect(c.why.length).toBeGreaterThan(0);
  });
});
