/**
 * Tree state with no DOM: what is expanded, which children are loaded, what is selected,
 * and the flattened list of visible rows that the virtual renderer draws.
 *
 * A level (the children of one expanded node) knows its `total` from the node summary's
 * `n_children` before any child is fetched, so every child has a row from the start: a
 * row whose page is not loaded yet is a placeholder (`node: null`). Pages of `pageSize`
 * children are fetched when their rows come into view (`ensureRange`) or when
 * `revealPath` needs them, one request at a time for the whole tree; requests for rows
 * scrolled away are dropped before they are sent.
 *
 * The root is the first row (aria-level 1); selection `[]` is the root.
 */

import { type DataSource, isCancelled } from "./data-source";
import { dotGroupOf, shownKey } from "./dot-groups";
import type { ChildrenResult, NodeSummary, Path } from "./protocol";
import { SerialQueue } from "./serial-queue";

export interface TreeRow {
  /** Index in the flattened visible rows. */
  index: number;
  /** aria-level: 1 for the root. */
  depth: number;
  /** 1-based position among its siblings, and their number. */
  posInSet: number;
  setSize: number;
  /** null while the row's page is not loaded. */
  node: NodeSummary | null;
  label: string;
  expandable: boolean;
  expanded: boolean;
  selected: boolean;
  /** Why the row's page could not be loaded, else null. */
  error: string | null;
}

export interface TreeChange {
  /** Rows were added, removed or filled in. */
  rows: boolean;
  /** The selected row or the node under it changed. */
  selection: boolean;
}

export interface TreeModelOptions {
  pageSize?: number;
  /** Extra rows on each side of `ensureRange` whose pages are fetched ahead. */
  lookahead?: number;
  /** Label of the root row (its key is ""). */
  rootLabel?: string;
  /**
   * Quiet time before the subtree totals a page left out are asked for (see
   * `SerialQueue`): a click right after a page is answered without waiting for them.
   */
  totalsDelayMs?: number;
}

/** What the tree asks of its data: pages of children (the compare view gives pages of
 * its union tree, compare-model.ts). */
export type TreeSource = Pick<DataSource, "children">;

type PageState = "loading" | "loaded" | { error: string };

interface Level {
  id: number;
  parent: Level | null;
  ownerIndex: number;
  path: Path;
  depth: number;
  total: number;
  items: (NodeSummary | undefined)[];
  byKey: Map<string, number>;
  /** Group rows (dot-groups.ts) by index: the prefix of the keys under each. */
  groups: Map<number, string>;
  pages: Map<number, PageState>;
  open: Set<number>;
  cache: Map<number, Level>;
}

/** A row position: `level` null is the root row. */
interface Pos {
  level: Level | null;
  index: number;
}

interface PageRef {
  level: Level;
  page: number;
  /** Set for a background task: fetch the subtree totals of this child index. */
  totalsOf?: number;
}

const ROOT: Pos = { level: null, index: 0 };

/** The row of `key` in the level: the key's own, or the group of keys that holds it. */
function indexOfKey(level: Level, key: string): number | undefined {
  const own = level.byKey.get(key);
  if (own !== undefined) return own;
  for (const [index, prefix] of level.groups) if (key.startsWith(prefix)) return index;
  return undefined;
}

export class TreeModel {
  readonly pageSize: number;
  readonly #source: TreeSource;
  #root: NodeSummary;
  readonly #lookahead: number;
  readonly #rootLabel: string;
  readonly #abort = new AbortController();
  readonly #listeners = new Set<(change: TreeChange) => void>();
  #rootOpen = false;
  #rootLevel: Level | null = null;
  #flat: Pos[] | null = null;
  #sel: Pos = ROOT;
  #selIndex = 0;
  readonly #pages: SerialQueue<PageRef>;
  #levelCount = 0;
  #revealToken = 0;
  /** Expands whose first page has not arrived yet. */
  readonly #opening = new Set<Promise<void>>();

  constructor(source: TreeSource, root: NodeSummary, options: TreeModelOptions = {}) {
    this.#source = source;
    this.#root = root;
    this.pageSize = options.pageSize ?? 200;
    this.#lookahead = options.lookahead ?? 50;
    this.#rootLabel = options.rootLabel ?? (root.key || "(root)");
    this.#pages = new SerialQueue<PageRef>((ref) => this.#load(ref), options.totalsDelayMs ?? 500);
  }

  subscribe(listener: (change: TreeChange) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Cancels the request in flight and forgets queued ones and listeners. */
  dispose(): void {
    this.#abort.abort();
    this.#pages.close();
    this.#listeners.clear();
  }

  get rowCount(): number {
    return this.#rows().length;
  }

  get selectedIndex(): number {
    this.#rows();
    return this.#selIndex;
  }

  /** Path of the selected node; null while the selected row is not loaded, and on a
   * group of keys (it is no node). */
  get selectedPath(): Path | null {
    const node = this.#nodeAt(this.#sel);
    return node && !dotGroupOf(node) ? node.path : null;
  }

  get selectedNode(): NodeSummary | null {
    return this.#nodeAt(this.#sel);
  }

  row(index: number): TreeRow | null {
    const pos = this.#rows()[index];
    if (!pos) return null;
    const { level } = pos;
    const node = this.#nodeAt(pos);
    const page = level?.pages.get(Math.floor(pos.index / this.pageSize));
    return {
      index,
      depth: level ? level.depth : 1,
      posInSet: pos.index + 1,
      setSize: level ? level.total : 1,
      node,
      label: level ? (node ? shownKey(node) : "") : this.#rootLabel,
      expandable: node?.has_children ?? false,
      expanded: this.#isOpen(pos),
      selected: index === this.#selIndex,
      error: !node && typeof page === "object" ? page.error : null,
    };
  }

  /**
   * Whether a key would act on rows still loading: an expand waits for its first page,
   * or the selected row is a placeholder (a row whose page failed is settled).
   */
  get settling(): boolean {
    return this.#opening.size > 0 || this.#selectedPage() !== null;
  }

  /** Resolves once `settling` is false (asking for the selected row's page if need be). */
  async whenSettled(): Promise<void> {
    while (!this.#abort.signal.aborted) {
      this.#rows();
      const waits = [...this.#opening];
      const page = this.#selectedPage();
      if (page !== null && this.#sel.level) waits.push(this.#request(this.#sel.level, page, true));
      if (waits.length === 0) return;
      await Promise.race(waits);
    }
  }

  /** The page of the selected row while it is a placeholder still to load, else null. */
  #selectedPage(): number | null {
    const { level, index } = this.#sel;
    if (!level || level.items[index]) return null;
    const page = Math.floor(index / this.pageSize);
    const state = level.pages.get(page);
    return state === undefined || state === "loading" ? page : null;
  }

  /** The root's size once it is known (the first summary leaves a large one out). */
  setRootTotals(bytes: number, numel: number | null): void {
    if (this.#root.bytes === bytes && this.#root.numel === numel) return;
    this.#root = { ...this.#root, bytes, numel };
    this.#emit({ rows: true, selection: this.#sel.level === null });
  }

  /** Index of the visible, loaded row with this path, else -1. */
  indexOfPath(path: Path): number {
    const pos = this.#posOf(path);
    return pos ? this.#indexOf(pos) : -1;
  }

  /** Index of the row's parent row, or -1 for the root. */
  parentIndex(index: number): number {
    const level = this.#rows()[index]?.level;
    if (!level) return -1;
    return this.#indexOf({ level: level.parent, index: level.ownerIndex });
  }

  /** Selects a row (the user's choice: a reveal still under way gives up). */
  selectIndex(index: number): void {
    this.#revealToken++;
    const pos = this.#rows()[index];
    if (!pos || index === this.#selIndex) return;
    this.#sel = pos;
    this.#selIndex = index;
    this.#emit({ rows: false, selection: true });
  }

  /** Selects the visible row with this path; false when there is none. */
  select(path: Path): boolean {
    const index = this.indexOfPath(path);
    if (index >= 0) this.selectIndex(index);
    return index >= 0;
  }

  /** Expands the row; resolves when its first page of children has arrived. */
  expand(index: number): Promise<void> {
    const pos = this.#rows()[index];
    return pos ? this.#open(pos) : Promise.resolve();
  }

  collapse(index: number): void {
    this.#revealToken++; // the user's choice: a reveal under way gives up
    const pos = this.#rows()[index];
    if (!pos || !this.#isOpen(pos)) return;
    if (pos.level) pos.level.open.delete(pos.index);
    else this.#rootOpen = false;
    const moved = this.#isInside(this.#sel, pos);
    if (moved) this.#sel = pos;
    this.#flat = null;
    this.#emit({ rows: true, selection: moved });
  }

  toggle(index: number): Promise<void> {
    const row = this.row(index);
    if (row?.expanded) {
      this.collapse(index);
      return Promise.resolve();
    }
    return this.expand(index);
  }

  /** Fetches the pages of the placeholders among rows [start, end) and a little around. */
  ensureRange(start: number, end: number): void {
    const rows = this.#rows();
    const wanted = new Map<Level, Set<number>>();
    const from = Math.max(0, start - this.#lookahead);
    const to = Math.min(rows.length, end + this.#lookahead);
    for (let i = from; i < to; i++) {
      const pos = rows[i];
      if (!pos?.level || pos.level.items[pos.index]) continue;
      const page = Math.floor(pos.index / this.pageSize);
      if (pos.level.pages.has(page) && pos.level.pages.get(page) !== "loading") continue;
      const pages = wanted.get(pos.level) ?? new Set<number>();
      wanted.set(pos.level, pages.add(page));
    }
    this.#pages.prune(({ level, page }) => wanted.get(level)?.has(page) ?? false);
    for (const [level, pages] of wanted) {
      for (const page of pages) void this.#request(level, page, false);
    }
  }

  /**
   * Expands every ancestor of `path`, fetching pages until each key is found, and
   * selects the node. Resolves with its row index, or -1 when a key does not exist or
   * a later reveal superseded this one.
   */
  async revealPath(path: Path, options: { select?: boolean } = {}): Promise<number> {
    const token = ++this.#revealToken;
    let pos: Pos = ROOT;
    for (const key of path) {
      // through the groups of keys that hold it, if any, to the key itself
      for (let inGroup = true; inGroup; ) {
        await this.#open(pos);
        const level = this.#childLevel(pos);
        if (!level || token !== this.#revealToken) return -1;
        const index = await this.#find(level, key);
        if (index < 0 || token !== this.#revealToken) return -1;
        pos = { level, index };
        inGroup = level.groups.has(index);
      }
    }
    const index = this.#indexOf(pos);
    if (options.select ?? true) this.selectIndex(index);
    return index;
  }

  // ------------------------------------------------------------ rows and positions

  #rows(): Pos[] {
    if (this.#flat) return this.#flat;
    const flat: Pos[] = [ROOT];
    if (this.#rootOpen && this.#rootLevel) this.#pushLevel(this.#rootLevel, flat);
    this.#flat = flat;
    this.#selIndex = Math.max(0, this.#indexOf(this.#sel));
    this.#sel = flat[this.#selIndex] ?? ROOT;
    return flat;
  }

  #pushLevel(level: Level, out: Pos[]): void {
    const open = [...level.open].sort((a, b) => a - b);
    let next = 0;
    for (let i = 0; i < level.total; i++) {
      out.push({ level, index: i });
      if (open[next] === i) {
        next++;
        const child = level.cache.get(i);
        if (child) this.#pushLevel(child, out);
      }
    }
  }

  #indexOf(pos: Pos): number {
    const rows = this.#flat ?? this.#rows();
    return rows.findIndex((p) => p.level === pos.level && p.index === pos.index);
  }

  #posOf(path: Path): Pos | null {
    let pos: Pos = ROOT;
    for (const key of path) {
      for (let inGroup = true; inGroup; ) {
        if (!this.#isOpen(pos)) return null;
        const level = this.#childLevel(pos);
        const index = level ? indexOfKey(level, key) : undefined;
        if (!level || index === undefined) return null;
        pos = { level, index };
        inGroup = level.groups.has(index);
      }
    }
    return pos;
  }

  #nodeAt(pos: Pos): NodeSummary | null {
    return pos.level ? (pos.level.items[pos.index] ?? null) : this.#root;
  }

  #isOpen(pos: Pos): boolean {
    return pos.level ? pos.level.open.has(pos.index) : this.#rootOpen;
  }

  /** Whether `pos` lies strictly under `ancestor`. */
  #isInside(pos: Pos, ancestor: Pos): boolean {
    for (let level = pos.level; level; level = level.parent) {
      if (level.parent === ancestor.level && level.ownerIndex === ancestor.index) return true;
    }
    return false;
  }

  #childLevel(pos: Pos): Level | null {
    return pos.level ? (pos.level.cache.get(pos.index) ?? null) : this.#rootLevel;
  }

  // ------------------------------------------------------------ expanding and paging

  #open(pos: Pos): Promise<void> {
    const node = this.#nodeAt(pos);
    if (!node?.has_children) return Promise.resolve();
    let level = this.#childLevel(pos);
    if (!level) {
      level = {
        id: ++this.#levelCount,
        parent: pos.level,
        ownerIndex: pos.index,
        path: node.path,
        depth: (pos.level?.depth ?? 1) + 1,
        total: node.n_children,
        items: new Array(node.n_children),
        byKey: new Map(),
        groups: new Map(),
        pages: new Map(),
        open: new Set(),
        cache: new Map(),
      };
      if (pos.level) pos.level.cache.set(pos.index, level);
      else this.#rootLevel = level;
    }
    // Reopening a node retries the pages that failed.
    for (const [page, state] of level.pages) {
      if (typeof state === "object") level.pages.delete(page);
    }
    if (!this.#isOpen(pos)) {
      if (pos.level) pos.level.open.add(pos.index);
      else this.#rootOpen = true;
      this.#flat = null;
      this.#emit({ rows: true, selection: false });
    }
    const first = this.#request(level, 0, true);
    if (level.pages.get(0) !== "loaded") {
      this.#opening.add(first);
      void first.then(() => this.#opening.delete(first));
    }
    return first;
  }

  /** Finds `key` in the level, loading pages in order until it turns up. */
  async #find(level: Level, key: string): Promise<number> {
    const pages = Math.ceil(level.total / this.pageSize);
    for (let page = 0; indexOfKey(level, key) === undefined && page < pages; page++) {
      await this.#request(level, page, true);
      if (this.#abort.signal.aborted) return -1;
    }
    return indexOfKey(level, key) ?? -1;
  }

  #request(level: Level, page: number, pinned: boolean): Promise<void> {
    if (level.pages.get(page) === "loaded") return Promise.resolve();
    return this.#pages.add(`${level.id}:${page}`, { level, page }, pinned);
  }

  async #load({ level, page, totalsOf }: PageRef): Promise<void> {
    if (totalsOf !== undefined) return this.#loadTotals(level, totalsOf);
    if (level.pages.get(page) === "loaded" || this.#abort.signal.aborted) return;
    level.pages.set(page, "loading");
    const { pageSize } = this;
    const signal = this.#abort.signal;
    let result: ChildrenResult;
    try {
      result = await this.#source.children(level.path, page * pageSize, pageSize, {
        signal,
        totals: false,
      });
      this.#fill(level, page, result);
    } catch (error) {
      this.#failPage(level, page, error);
      return;
    }
    // Subtree totals the reply left out (collections the kernel had not summed yet):
    // asked one child at a time, in the background, so that summing a large subtree
    // never holds up what the user asks for next.
    // A side file of a folder of checkpoints may come without its size too.
    for (const [i, child] of result.children.entries()) {
      const sideFile = child.kind === "json" || child.kind === "pickle";
      if (child.bytes !== null || !(child.has_children || sideFile)) continue;
      const index = result.offset + i;
      void this.#pages.add(`${level.id}:t${index}`, { level, page, totalsOf: index }, false, true);
    }
  }

  async #loadTotals(level: Level, index: number): Promise<void> {
    const current = level.items[index];
    if (!current || current.bytes !== null || this.#abort.signal.aborted) return;
    let answer: ChildrenResult;
    try {
      answer = await this.#source.children(level.path, index, 1, { signal: this.#abort.signal });
    } catch {
      return; // the row stays without totals; the node's details still give them
    }
    const now = level.items[index];
    const fresh = answer.children[0];
    if (!now || !fresh || fresh.key !== now.key) return;
    level.items[index] = { ...now, bytes: fresh.bytes, numel: fresh.numel };
    this.#emit({ rows: true, selection: false });
  }

  #failPage(level: Level, page: number, error: unknown): void {
    if (isCancelled(error)) {
      level.pages.delete(page);
      return;
    }
    level.pages.set(page, { error: error instanceof Error ? error.message : String(error) });
    this.#emit({ rows: true, selection: false });
  }

  #fill(level: Level, page: number, result: ChildrenResult): void {
    let structural = false;
    let moved = false;
    if (result.total !== level.total) {
      structural = true;
      level.total = result.total;
      level.items.length = result.total;
      for (const i of level.open) if (i >= result.total) level.open.delete(i);
      for (const [key, i] of level.byKey) if (i >= result.total) level.byKey.delete(key);
      for (const i of level.groups.keys()) if (i >= result.total) level.groups.delete(i);
      moved = this.#clampSelection(level);
    }
    const selectedBefore = this.#nodeAt(this.#sel);
    result.children.forEach((child, i) => {
      const index = result.offset + i;
      if (index >= level.total) return;
      level.items[index] = child;
      const group = dotGroupOf(child);
      if (group) level.groups.set(index, group.prefix);
      else level.byKey.set(child.key, index);
    });
    level.pages.set(page, "loaded");
    if (structural) this.#flat = null;
    this.#emit({ rows: true, selection: moved || this.#nodeAt(this.#sel) !== selectedBefore });
  }

  /**
   * The level has fewer rows than it announced: a selection on (or below) a row past its
   * end moves to its last row, or to its parent when it is empty. True when it moved.
   */
  #clampSelection(level: Level): boolean {
    for (let pos: Pos = this.#sel; pos.level; ) {
      if (pos.level === level && pos.index >= level.total) {
        this.#sel =
          level.total > 0
            ? { level, index: level.total - 1 }
            : { level: level.parent, index: level.ownerIndex };
        return true;
      }
      pos = { level: pos.level.parent, index: pos.level.ownerIndex };
    }
    return false;
  }

  #emit(change: TreeChange): void {
    for (const listener of [...this.#listeners]) listener(change);
  }
}
