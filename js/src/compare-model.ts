/**
 * The compare view's state without DOM: the union tree as pages a `TreeModel` can draw
 * (`CompareTreeSource`: the existing virtualized tree, fed `diff_children`), and the
 * way from one difference to the next or the previous (`DiffNavigator`).
 *
 * Every row of the tree is a `CompareNode`: a `NodeSummary` (what the tree model needs)
 * carrying its `DiffItem` (what the compare rows draw). With "only differences" the pages
 * hold the keys that differ or hold a difference below them.
 *
 * A difference is a key whose own status is not "same" (or that could not be read). The
 * navigator walks them in the tree's order, depth first, into the subtrees that hold
 * more (not into one added or removed whole: its keys are all added or removed), and
 * fetches the levels it passes through, `pageSize` keys at a time.
 *
 * A refine (or the "only differences" switch) gives a new tree; `treeState` reads what
 * the user made of the old one (the rows expanded, the row selected) and
 * `restoreTreeState` opens the same rows of the new one and selects the same key, or the
 * nearest ancestor of it that the new tree still has.
 */

import { differencesBelow } from "./compare-format";
import type { DiffItem } from "./compare-protocol";
import type { CompareSource } from "./compare-source";
import type { CallOptions, TotalsOptions } from "./data-source";
import {
  type ChildrenResult,
  NODE_KINDS,
  type NodeKind,
  type NodeSummary,
  type Path,
} from "./protocol";
import type { TreeModel, TreeSource } from "./tree-model";

/** A tree row of the compare view. */
export interface CompareNode extends NodeSummary {
  diff: DiffItem;
}

export function isCompareNode(node: NodeSummary | null): node is CompareNode {
  return node !== null && "diff" in node;
}

const KINDS: ReadonlySet<string> = new Set(NODE_KINDS);

/** The row of a diff item. `n_children` is a guess (the page that opens it says how many),
 * and a node's `bytes` 0: the tree model asks no subtree totals of a compare row. */
export function compareNode(item: DiffItem, onlyChanged: boolean): CompareNode {
  const facts = item.b ?? item.a;
  const kind = (item.kind && KINDS.has(item.kind) ? item.kind : "tensordict") as NodeKind;
  const opens = item.has_children && (!onlyChanged || differencesBelow(item) > 0 || !item.rollup);
  return {
    key: item.key,
    path: item.path,
    kind,
    class_name: facts?.class ?? "",
    has_children: opens,
    n_children: opens ? 1 : 0,
    shape: facts?.shape ?? null,
    dtype: facts?.dtype ?? null,
    batch_size: facts?.batch_size ?? null,
    stack_dim: null,
    bytes: facts?.bytes ?? 0,
    numel: null,
    pickled: facts?.pickled ?? false,
    problems: item.problem ? [item.problem] : [],
    diff: item,
  };
}

/** Pages of the union tree for a `TreeModel` (only what differs, when `onlyChanged`). */
export class CompareTreeSource implements TreeSource {
  readonly #source: CompareSource;
  readonly onlyChanged: boolean;

  constructor(source: CompareSource, onlyChanged: boolean) {
    this.#source = source;
    this.onlyChanged = onlyChanged;
  }

  async children(
    path: Path,
    offset: number,
    limit: number,
    opts?: TotalsOptions,
  ): Promise<ChildrenResult & { children: CompareNode[] }> {
    const page = await this.#source.children(path, offset, limit, this.onlyChanged, {
      signal: opts?.signal,
    });
    return {
      path: page.path,
      offset: page.offset,
      total: page.total,
      children: page.items.map((item) => compareNode(item, this.onlyChanged)),
    };
  }
}

/** Whether the key is a difference of its own (a stop of next / previous). */
export function isDifference(item: DiffItem): boolean {
  return item.status !== "same" || item.problem !== null;
}

/** Whether next / previous go into the subtree: it holds differences, and is not added
 * or removed whole. */
export function descends(item: DiffItem): boolean {
  return (
    item.has_children &&
    item.status !== "added" &&
    item.status !== "removed" &&
    differencesBelow(item) > 0
  );
}

const keyOf = (path: Path) => JSON.stringify(path);

interface Level {
  items: DiffItem[];
  byKey: Map<string, number>;
  total: number;
}

export interface NavigatorOptions {
  /** Keys fetched per request while walking a level. */
  pageSize?: number;
}

/** Finds the next and the previous difference from a path. */
export class DiffNavigator {
  readonly #source: CompareSource;
  readonly #root: DiffItem;
  readonly #pageSize: number;
  readonly #levels = new Map<string, Promise<Level>>();
  readonly #items = new Map<string, DiffItem>();
  readonly #orders = new Map<string, Promise<Map<string, number>>>();

  constructor(source: CompareSource, root: DiffItem, options: NavigatorOptions = {}) {
    this.#source = source;
    this.#root = root;
    this.#pageSize = options.pageSize ?? 1000;
  }

  /** The path of the first difference after `from` in the tree's order, or null. */
  async next(from: Path, opts?: CallOptions): Promise<Path | null> {
    let current = await this.#item(from, opts);
    for (;;) {
      const found = await this.#successor(current, opts);
      if (!found) return null;
      if (isDifference(found)) return found.path;
      current = found;
    }
  }

  /** The path of the last difference before `from` in the tree's order, or null. */
  async previous(from: Path, opts?: CallOptions): Promise<Path | null> {
    let current = await this.#item(from, opts);
    for (;;) {
      const found = await this.#predecessor(current, opts);
      if (!found) return null;
      if (isDifference(found)) return found.path;
      current = found;
    }
  }

  /** The first difference of the tree, or null when there is none. */
  first(opts?: CallOptions): Promise<Path | null> {
    return this.next([], opts);
  }

  // ------------------------------------------------------------ walking

  async #successor(item: DiffItem, opts?: CallOptions): Promise<DiffItem | null> {
    if (descends(item)) {
      const level = await this.#level(item.path, opts);
      const first = level.items[0];
      if (first) return first;
    }
    for (let path = item.path; path.length > 0; path = path.slice(0, -1)) {
      const parent = path.slice(0, -1);
      const level = await this.#level(parent, opts);
      const index = await this.#indexIn(level, parent, path, opts);
      if (index === null) return null;
      const next = index.after ? level.items[index.at] : level.items[index.at + 1];
      if (next) return next;
    }
    return null;
  }

  async #predecessor(item: DiffItem, opts?: CallOptions): Promise<DiffItem | null> {
    const path = item.path;
    if (path.length === 0) return null;
    const parentPath = path.slice(0, -1);
    const level = await this.#level(parentPath, opts);
    const index = await this.#indexIn(level, parentPath, path, opts);
    const before = index === null ? -1 : index.at - 1;
    let found = before >= 0 ? level.items[before] : undefined;
    // before the first key of a level: its parent (the root is where walks start, no stop)
    if (!found) return parentPath.length ? this.#item(parentPath, opts) : null;
    while (descends(found)) {
      const inner = await this.#level(found.path, opts);
      const last = inner.items[inner.items.length - 1];
      if (!last) break;
      found = last;
    }
    return found;
  }

  /**
   * Where `path` is among the differing keys of its parent: `at` its index, or, for a
   * key that is not among them (a key without differences, shown when "only
   * differences" is off), `after: true` and `at` the index of the first one after it.
   */
  async #indexIn(
    level: Level,
    parent: Path,
    path: Path,
    opts?: CallOptions,
  ): Promise<{ at: number; after: boolean } | null> {
    const key = path[path.length - 1] ?? "";
    const at = level.byKey.get(key);
    if (at !== undefined) return { at, after: false };
    // Not a difference: its place in the whole level says which differences follow it.
    const order = await this.#order(parent, opts);
    const position = order.get(key);
    if (position === undefined) return null;
    let first = 0;
    const placeOf = (i: number) => order.get(level.items[i]?.key ?? "") ?? Infinity;
    while (first < level.items.length && placeOf(first) < position) first++;
    return { at: first, after: true };
  }

  /** Every key of a level (differing or not) and its place in it, fetched once. */
  #order(path: Path, opts?: CallOptions): Promise<Map<string, number>> {
    const key = keyOf(path);
    let found = this.#orders.get(key);
    if (!found) {
      found = (async () => {
        const order = new Map<string, number>();
        for (let offset = 0; ; offset += this.#pageSize) {
          const page = await this.#source.children(path, offset, this.#pageSize, false, opts);
          for (const [i, item] of page.items.entries()) order.set(item.key, offset + i);
          if (!page.items.length || offset + page.items.length >= page.total) return order;
        }
      })();
      this.#orders.set(key, found);
      found.catch(() => this.#orders.delete(key));
    }
    return found;
  }

  /** Every differing key below `path` (fetched once, `pageSize` at a time). */
  #level(path: Path, opts?: CallOptions): Promise<Level> {
    const key = keyOf(path);
    let found = this.#levels.get(key);
    if (!found) {
      found = this.#fetch(path, opts);
      this.#levels.set(key, found);
      found.catch(() => this.#levels.delete(key));
    }
    return found;
  }

  async #fetch(path: Path, opts?: CallOptions): Promise<Level> {
    const items: DiffItem[] = [];
    let total = 0;
    do {
      const page = await this.#source.children(path, items.length, this.#pageSize, true, opts);
      total = page.total;
      items.push(...page.items);
      if (!page.items.length) break;
    } while (items.length < total);
    const byKey = new Map(items.map((it, i) => [it.key, i]));
    for (const it of items) this.#items.set(keyOf(it.path), it);
    return { items, byKey, total };
  }

  async #item(path: Path, opts?: CallOptions): Promise<DiffItem> {
    if (path.length === 0) return this.#root;
    const known = this.#items.get(keyOf(path));
    if (known) return known;
    const item = await this.#source.node(path, opts);
    this.#items.set(keyOf(path), item);
    return item;
  }
}

// ------------------------------------------------------------ keeping a tree's state

/** What the user made of a tree: the paths of the rows expanded, in the tree's order (a
 * row before the rows below it), and the path selected. */
export interface TreeState {
  expanded: Path[];
  selected: Path;
}

/** The rows expanded in `tree` (those shown: a row inside a collapsed one is not) and the
 * selection (`fallback` while the selected row is not loaded). */
export function treeState(tree: TreeModel, fallback: Path = []): TreeState {
  const expanded: Path[] = [];
  for (let i = 0; i < tree.rowCount; i++) {
    const row = tree.row(i);
    if (row?.expanded && row.node) expanded.push(row.node.path);
  }
  return { expanded, selected: tree.selectedPath ?? fallback };
}

/** Whether two states expand the same rows and select the same key. */
export function sameTreeState(a: TreeState, b: TreeState): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * Expands the rows of `state.expanded` that `tree` still has (a key gone, or a node with
 * nothing left to show, stays closed) and selects `state.selected`, or its nearest
 * ancestor that the tree has. Resolves with the path selected; a selection made by
 * someone else while this ran (a click, a reveal) is left as it is, and its path given.
 */
export async function restoreTreeState(tree: TreeModel, state: TreeState): Promise<Path | null> {
  let moved = false;
  const unsubscribe = tree.subscribe((change) => {
    if (change.selection) moved = true;
  });
  try {
    for (const path of state.expanded) {
      const index = path.length ? await tree.revealPath(path, { select: false }) : 0;
      if (moved) break;
      if (index >= 0) await tree.expand(index);
    }
    for (let n = state.selected.length; n >= 0 && !moved; n--) {
      const path = state.selected.slice(0, n);
      const index = n ? await tree.revealPath(path, { select: false }) : 0;
      if (index < 0 || moved) continue;
      tree.selectIndex(index);
      return path;
    }
    return tree.selectedPath;
  } finally {
    unsubscribe();
  }
}
