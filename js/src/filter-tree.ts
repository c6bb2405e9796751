/**
 * The tree filtered in place: only the matches of a search and their ancestors, as a
 * `TreeSource` that a `TreeModel` pages like the whole tree. The matches are read with
 * `search` (page after page, up to `cap`), the ancestors that are no match with `node`.
 * A match's own subtree is left out: the row of a matching node has no children.
 */

import type { CallOptions, DataSource } from "./data-source";
import type { ChildrenResult, NodeSummary, Path } from "./protocol";
import type { TreeSource } from "./tree-model";

/** The most matches a filtered tree holds (more: the status says how many are left out). */
export const FILTER_CAP = 1000;

export interface FilteredTree {
  source: TreeSource;
  root: NodeSummary;
  /** The matches shown (at most the cap) and how many there are in all. */
  matches: Path[];
  total: number;
}

const keyOf = (path: Path) => JSON.stringify(path);

export async function filterTree(
  source: DataSource,
  root: NodeSummary,
  pattern: string,
  opts: CallOptions & { cap?: number; pageSize?: number } = {},
): Promise<FilteredTree> {
  const cap = opts.cap ?? FILTER_CAP;
  const pageSize = opts.pageSize ?? 200;
  const signal = opts.signal;
  const summaries = new Map<string, NodeSummary>();
  const matches: Path[] = [];
  let total = 0;
  for (let offset = 0; matches.length < cap; ) {
    const limit = Math.min(pageSize, cap - matches.length);
    const page = await source.search(pattern, limit, { signal, offset });
    total = page.total;
    page.matches.forEach((path, i) => {
      matches.push(path);
      const node = page.nodes[i];
      if (node) summaries.set(keyOf(path), node);
    });
    if (!page.truncated || page.matches.length === 0) break;
    offset += page.matches.length;
  }
  // the ancestors that are no match, each asked for once
  const missing = new Map<string, Path>();
  for (const path of matches) {
    for (let d = 1; d < path.length; d++) {
      const up = path.slice(0, d);
      if (!summaries.has(keyOf(up))) missing.set(keyOf(up), up);
    }
  }
  const found = await Promise.all(
    [...missing.values()].map((p) => source.node(p, { signal, totals: false })),
  );
  for (const node of found) summaries.set(keyOf(node.path), node);
  // children lists in the order of the matches (depth first, as search gives them)
  const children = new Map<string, Path[]>();
  const added = new Set<string>();
  for (const path of matches) {
    for (let d = 1; d <= path.length; d++) {
      const child = path.slice(0, d);
      if (added.has(keyOf(child))) continue;
      added.add(keyOf(child));
      const parent = keyOf(path.slice(0, d - 1));
      const list = children.get(parent) ?? [];
      list.push(child);
      children.set(parent, list);
    }
  }
  const summary = (path: Path): NodeSummary => {
    const node = summaries.get(keyOf(path)) as NodeSummary;
    const n = children.get(keyOf(path))?.length ?? 0;
    return { ...node, has_children: n > 0, n_children: n };
  };
  const filtered: TreeSource = {
    children(path: Path, offset: number, limit: number): Promise<ChildrenResult> {
      const list = children.get(keyOf(path)) ?? [];
      return Promise.resolve({
        path,
        offset,
        total: list.length,
        children: list.slice(offset, offset + limit).map(summary),
      });
    },
  };
  const top = children.get(keyOf([]))?.length ?? 0;
  return {
    source: filtered,
    root: { ...root, has_children: top > 0, n_children: top },
    matches,
    total,
  };
}
