/**
 * A flat state_dict shown as its modules nest: the keys of a level that share a dotted
 * prefix (`decoder.layers.0.self_attn.in_proj_weight`, `decoder.layers.0.linear1.weight`)
 * sit under group rows (`decoder.layers` › `0` › `self_attn`), as a `TreeSource` that a
 * `TreeModel` pages like the real tree.
 *
 * A group is no key: its summary (`dotGroupOf`) has a path that is never asked of the
 * kernel (its children are answered here) and that `TreeModel.selectedPath` never gives
 * out. A real key keeps its own summary and path; only the text its row shows is its
 * part after the group's prefix (`shownKey`). A level is grouped when at least two of
 * its keys share a prefix, it holds at most `GROUP_CAP` keys, and none is a file of a
 * folder of checkpoints (`step_1000.tdz` is no module).
 */

import type { TotalsOptions } from "./data-source";
import type { ChildrenResult, NodeKind, NodeSummary, Path } from "./protocol";
import type { TreeSource } from "./tree-model";

/** The most keys of one level that are grouped (each is fetched to group them). */
export const GROUP_CAP = 5000;
/** Keys fetched in one request while a level is read whole (after a first page). */
const PAGE = 2000;
/** Kinds of a folder of checkpoints: their dots are file extensions. */
const FILE_KINDS = new Set<NodeKind>(["collection", "folder", "checkpoint", "json", "pickle"]);

/** A group row: keys of `parent` that start with `prefix` (which ends with "."). */
export interface DotGroup {
  parent: Path;
  prefix: string;
  /** The keys under it, at any depth. */
  keys: number;
}

const groupOf = new WeakMap<NodeSummary, DotGroup>();
const labelOf = new WeakMap<NodeSummary, string>();

/** The group a row stands for, or undefined for a real node. */
export function dotGroupOf(node: NodeSummary | null | undefined): DotGroup | undefined {
  return node ? groupOf.get(node) : undefined;
}

/** The text a row shows for its node: a key's part after its group's prefix. */
export function shownKey(node: NodeSummary): string {
  return labelOf.get(node) ?? node.key;
}

interface Entry {
  node: NodeSummary;
  /** The key's part after the prefixes of the groups it is in. */
  rest: string;
}

export class DotGroupedSource implements TreeSource {
  readonly #source: TreeSource;
  readonly #enabled: boolean;
  readonly #onGroupable: (() => void) | undefined;
  /** Per real path: the rows of the level, or its first page when it is paged through
   * as it is (too many keys, files of a folder). */
  readonly #levels = new Map<string, Promise<NodeSummary[] | ChildrenResult>>();
  /** Per group path (the very array): its rows. */
  readonly #inGroup = new WeakMap<Path, NodeSummary[]>();

  /**
   * @param enabled false: the levels show as they are, and `onGroupable` still says
   *   when one could be grouped (so the toggle shows)
   */
  constructor(source: TreeSource, options: { enabled?: boolean; onGroupable?: () => void } = {}) {
    this.#source = source;
    this.#enabled = options.enabled ?? true;
    this.#onGroupable = options.onGroupable;
  }

  async children(
    path: Path,
    offset: number,
    limit: number,
    opts: TotalsOptions = {},
  ): Promise<ChildrenResult> {
    const rows = this.#inGroup.get(path) ?? (await this.#level(path, limit, opts));
    if (Array.isArray(rows)) {
      return { path, offset, total: rows.length, children: rows.slice(offset, offset + limit) };
    }
    const first = rows; // a level paged through: its first page once, the others asked
    const inFirst = offset + limit <= first.children.length || offset + limit >= first.total;
    if (offset === 0 && inFirst && opts.totals === false) {
      return { ...first, path, children: first.children.slice(0, limit) };
    }
    return this.#source.children(path, offset, limit, opts);
  }

  #level(path: Path, limit: number, opts: TotalsOptions): Promise<NodeSummary[] | ChildrenResult> {
    const key = JSON.stringify(path);
    let level = this.#levels.get(key);
    if (!level) {
      level = this.#read(path, limit, opts);
      this.#levels.set(key, level);
      level.catch(() => this.#levels.delete(key)); // asked again next time
    }
    return level;
  }

  /** The whole level, grouped; its first page when it is not to be grouped. */
  async #read(
    path: Path,
    limit: number,
    opts: TotalsOptions,
  ): Promise<NodeSummary[] | ChildrenResult> {
    const call = { signal: opts.signal, totals: false } as TotalsOptions;
    const first = await this.#source.children(path, 0, limit, call);
    if (first.total > GROUP_CAP || first.children.some((n) => FILE_KINDS.has(n.kind))) {
      return first;
    }
    const nodes = [...first.children];
    while (nodes.length < first.total) {
      const page = await this.#source.children(path, nodes.length, PAGE, call);
      if (page.children.length === 0) break;
      nodes.push(...page.children);
    }
    if (nodes.some((n) => FILE_KINDS.has(n.kind))) return { ...first, children: nodes };
    const rows = this.#group(
      path,
      nodes.map((node) => ({ node, rest: node.key })),
    );
    if (rows.some((row) => groupOf.has(row))) {
      this.#onGroupable?.();
      if (this.#enabled) return rows;
    }
    return nodes;
  }

  /** Rows for entries under `parent` whose keys all begin with `prefix`. */
  #group(parent: Path, entries: Entry[], prefix = ""): NodeSummary[] {
    const order: (Entry | string)[] = [];
    const buckets = new Map<string, Entry[]>();
    for (const entry of entries) {
      const dot = entry.rest.indexOf(".");
      if (dot <= 0 || dot === entry.rest.length - 1) {
        order.push(entry);
        continue;
      }
      const head = entry.rest.slice(0, dot);
      const bucket = buckets.get(head);
      const rest = { node: entry.node, rest: entry.rest.slice(dot + 1) };
      if (bucket) bucket.push(rest);
      else {
        buckets.set(head, [rest]);
        order.push(head);
      }
    }
    return order.map((item) => {
      if (typeof item !== "string") return this.#keyRow(item, prefix);
      const bucket = buckets.get(item) ?? [];
      const [only] = bucket;
      if (bucket.length === 1 && only)
        return this.#keyRow({ ...only, rest: `${item}.${only.rest}` }, prefix);
      return this.#groupRow(parent, item, bucket, `${prefix}${item}.`);
    });
  }

  #keyRow(entry: Entry, prefix: string): NodeSummary {
    if (prefix === "") return entry.node;
    const row = { ...entry.node }; // the label is this tree's, not the summary's
    labelOf.set(row, entry.rest);
    return row;
  }

  #groupRow(parent: Path, label: string, entries: Entry[], prefix: string): NodeSummary {
    let rows = this.#group(parent, entries, prefix);
    let shown = label;
    let full = prefix;
    // a group holding one group only is one row: `decoder.layers`, not `decoder` › `layers`
    for (let only = rows[0]; rows.length === 1 && only && groupOf.has(only); only = rows[0]) {
      const inner = groupOf.get(only) as DotGroup;
      shown = `${shown}.${shownKey(only)}`;
      full = inner.prefix;
      rows = this.#inGroup.get(only.path) ?? [];
    }
    const sum = (pick: (n: NodeSummary) => number | null) =>
      entries.reduce<number | null>((acc, e) => {
        const v = pick(e.node);
        return acc === null || v === null ? null : acc + v;
      }, 0);
    const row: NodeSummary = {
      key: shown,
      path: [...parent, full], // never asked of the kernel: `children` answers it here
      kind: "tensordict",
      class_name: "",
      has_children: true,
      n_children: rows.length,
      shape: null,
      dtype: null,
      batch_size: null,
      stack_dim: null,
      bytes: sum((n) => n.bytes),
      numel: sum((n) => n.numel),
      pickled: false,
      problems: [],
    };
    groupOf.set(row, { parent, prefix: full, keys: entries.length });
    this.#inGroup.set(row.path, rows);
    return row;
  }
}
