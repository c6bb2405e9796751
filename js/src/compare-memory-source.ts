/**
 * `CompareSource` answering from an in-memory diff: the rows of a diff in its order (as
 * `tdview.diff` lists them: a node before the keys below it) and, for previews and loads,
 * a `MemoryDataSource` per side. For tests and offline views.
 *
 * It keeps the kernel's rules (paged children, `only_changed`, rollups counted as
 * `DiffRollup`, a refine replacing the rows of a subtree) and records each call in `log`.
 */

import type {
  DiffFacts,
  DiffItem,
  DiffLevel,
  DiffPage,
  DiffRollup,
  DiffSummary,
  Side,
  SummaryLevel,
} from "./compare-protocol";
import {
  type CompareSource,
  childrenParams,
  type DiffPreviewData,
  type RefineOptions,
  refineParams,
} from "./compare-source";
import {
  abortableDelay,
  type CallOptions,
  type ProgressInfo,
  ProtocolError,
  throwIfAborted,
} from "./data-source";
import type { MemoryDataSource } from "./memory-data-source";
import type { DevicesResult, LoadParams, LoadResult, Path } from "./protocol";

/** A row of the diff: `path` and what differs from a same leaf. */
export type MemoryDiffRow = Partial<
  Omit<DiffItem, "path" | "key" | "rollup" | "has_children" | "unverified">
> & {
  path: Path;
};

export interface MemoryCompareOptions {
  /** The sides' previews and loads (paths there are each side's own). */
  sides?: Partial<Record<Side, MemoryDataSource>>;
  /** What a refine at a level finds: the rows replacing those of the refined subtree
   * (the rows of `rows(level)` at or below that path). */
  refined?: (level: DiffLevel) => MemoryDiffRow[];
  sourceA?: string;
  sourceB?: string;
  level?: SummaryLevel;
  /** Delay of each answer (ms); a refine reports progress this often, 4 times. */
  latencyMs?: number;
}

export interface CompareLogEntry {
  method: string;
  params: Record<string, unknown>;
}

const LEAF: DiffFacts = { kind: "leaf", class: "Tensor", dtype: "float32", shape: [4], bytes: 16 };

function emptyRollup(): DiffRollup {
  return {
    same: 0,
    changed: 0,
    added: 0,
    removed: 0,
    renamed: 0,
    problems: 0,
    leaves: 0,
    bytes_changed: 0,
    bytes_added: 0,
    bytes_removed: 0,
    elements_changed: 0,
    differences: 0,
    same_leaves: 0,
    same_metadata: 0,
    same_crc: 0,
  };
}

const key = (path: Path) => JSON.stringify(path);
const within = (path: Path, root: Path) =>
  path.length >= root.length && root.every((k, i) => path[i] === k);

export class MemoryCompareSource implements CompareSource {
  readonly log: CompareLogEntry[] = [];
  #rows: DiffItem[] = [];
  #byPath = new Map<string, DiffItem>();
  #children = new Map<string, DiffItem[]>();
  #rollups = new Map<string, DiffRollup>();
  #level: SummaryLevel;
  readonly #options: MemoryCompareOptions;

  constructor(rows: MemoryDiffRow[], options: MemoryCompareOptions = {}) {
    this.#options = options;
    this.#level = options.level ?? "metadata";
    this.#index(rows.map((r) => this.#item(r)));
  }

  /** Calls of `method` made so far. */
  calls(method: string): CompareLogEntry[] {
    return this.log.filter((e) => e.method === method);
  }

  get summary(): DiffSummary {
    const total = this.#rollup([]);
    return {
      a: this.#options.sourceA ?? "a",
      b: this.#options.sourceB ?? "b",
      subpath_a: [],
      subpath_b: [],
      level: this.#level,
      rtol: 0,
      atol: 0,
      equal: total.differences + total.problems === 0,
      summary: total,
    };
  }

  /** The root's item, as the `compare` trait holds it. */
  get root(): DiffItem {
    return this.#details([]);
  }

  async children(
    path: Path,
    offset: number,
    limit: number,
    onlyChanged: boolean,
    opts?: CallOptions,
  ): Promise<DiffPage> {
    await this.#start("diff_children", childrenParams(path, offset, limit, onlyChanged), opts);
    this.#get(path);
    const all = this.#children.get(key(path)) ?? [];
    const rows = onlyChanged ? all.filter((r) => this.#differs(r)) : all;
    const items = rows.slice(offset, offset + limit).map((r) => this.#page(r));
    return { path, offset, total: rows.length, items };
  }

  async node(path: Path, opts?: CallOptions): Promise<DiffItem> {
    await this.#start("diff_node", { path }, opts);
    return this.#details(path);
  }

  async refine(path: Path, level: DiffLevel, opts: RefineOptions = {}): Promise<DiffSummary> {
    await this.#start("diff_refine", refineParams(path, level, opts), opts);
    this.#get(path);
    const steps = 4;
    for (let done = 0; done <= steps; done++) {
      opts.onProgress?.({ done, total: steps, label: path.join("/") });
      if (done < steps) await abortableDelay(this.#options.latencyMs ?? 0, opts.signal);
    }
    throwIfAborted(opts.signal);
    const found = (this.#options.refined?.(level) ?? []).filter((r) => within(r.path, path));
    const start = this.#rows.findIndex((r) => within(r.path, path));
    const kept = this.#rows.filter((r) => !within(r.path, path));
    const fresh = found.map((r) => this.#item(r));
    kept.splice(start < 0 ? kept.length : start, 0, ...fresh);
    this.#index(kept);
    // like the kernel: the whole diff compared again is at that level, a part mixes them
    if (path.length === 0) this.#level = level;
    else if (level !== this.#level) this.#level = "mixed";
    return this.summary;
  }

  async preview(path: Path, rows: number, opts?: CallOptions): Promise<DiffPreviewData> {
    await this.#start("diff_preview", { path, rows }, opts);
    const row = this.#get(path);
    const side = async (name: Side, where: Path | null, present: DiffFacts | null) => {
      const source = this.#options.sides?.[name];
      return present && where && source ? source.preview(where, rows, opts) : null;
    };
    return { path, a: await side("a", row.path_a, row.a), b: await side("b", row.path_b, row.b) };
  }

  async load(
    side: Side,
    params: LoadParams,
    onProgress?: (p: ProgressInfo) => void,
    opts?: CallOptions,
  ): Promise<LoadResult> {
    await this.#start("diff_load", { side, ...params }, opts);
    const source = this.#options.sides?.[side];
    if (!source) throw new ProtocolError("NoCheckpointError", `no side ${side}`);
    return source.load(params, onProgress, opts);
  }

  async devices(opts?: CallOptions): Promise<DevicesResult> {
    await this.#start("devices", {}, opts);
    return { devices: [{ name: "cpu", free_bytes: null, total_bytes: null }] };
  }

  // ------------------------------------------------------------ rows

  #item(row: MemoryDiffRow): DiffItem {
    const status = row.status ?? "same";
    const facts = row.kind && row.kind !== "leaf" ? { kind: row.kind, class: "TensorDict" } : LEAF;
    return {
      key: row.path[row.path.length - 1] ?? "",
      path: row.path,
      status,
      changes: row.changes ?? [],
      renamed_from: row.renamed_from ?? null,
      path_a:
        row.path_a !== undefined
          ? row.path_a
          : status === "added"
            ? null
            : (row.renamed_from ?? row.path),
      path_b: row.path_b !== undefined ? row.path_b : status === "removed" ? null : row.path,
      kind: row.kind ?? "leaf",
      a: row.a !== undefined ? row.a : status === "added" ? null : facts,
      b: row.b !== undefined ? row.b : status === "removed" ? null : facts,
      fingerprint: row.fingerprint ?? null,
      values: row.values ?? null,
      value_equal: row.value_equal ?? null,
      note: row.note ?? null,
      problem: row.problem ?? null,
      has_children: false,
      rollup: null,
      unverified: false,
      scalars: row.scalars ?? null,
    };
  }

  /** As the kernel says it: the same by metadata alone (a leaf with bytes or a pickle,
   * nothing of its content compared). */
  #unverified(row: DiffItem): boolean {
    if (row.status !== "same" || row.problem || row.has_children) return false;
    if (row.fingerprint || row.values || row.value_equal !== null) return false;
    const facts = row.b ?? row.a;
    return facts?.kind === "leaf" ? (facts.bytes ?? 0) > 0 : facts?.pickled === true;
  }

  #index(rows: DiffItem[]): void {
    this.#rows = rows;
    this.#byPath = new Map(rows.map((r) => [key(r.path), r]));
    this.#children = new Map();
    for (const row of rows) {
      if (row.path.length === 0) continue;
      const parent = key(row.path.slice(0, -1));
      const list = this.#children.get(parent) ?? [];
      list.push(row);
      this.#children.set(parent, list);
    }
    for (const row of rows) {
      row.has_children = this.#children.has(key(row.path));
      row.unverified = this.#unverified(row);
    }
    this.#rollups = new Map();
  }

  #get(path: Path): DiffItem {
    const row = this.#byPath.get(key(path));
    if (!row) throw new ProtocolError("SubpathError", `no key ${path.join("/")} in the diff`, path);
    return row;
  }

  #rollup(path: Path): DiffRollup {
    const found = this.#rollups.get(key(path));
    if (found) return found;
    const total = emptyRollup();
    for (const row of this.#rows) {
      if (!within(row.path, path)) continue;
      if (row.status === "same") total.same++;
      else total[row.status]++;
      if (row.problem) total.problems++;
      if (row.has_children) continue;
      total.leaves++;
      if (row.status === "same") {
        total.same_leaves++;
        if (row.unverified) total.same_metadata++;
        else if (row.fingerprint === "crc_equal" && !row.values && row.value_equal === null) {
          total.same_crc++;
        }
      }
      const bytes = (row.b ?? row.a)?.bytes ?? 0;
      if (row.status === "changed") total.bytes_changed += bytes;
      if (row.status === "added") total.bytes_added += bytes;
      if (row.status === "removed") total.bytes_removed += bytes;
      total.elements_changed += row.values?.differing ?? 0;
    }
    total.differences = total.changed + total.added + total.removed + total.renamed;
    this.#rollups.set(key(path), total);
    return total;
  }

  #differs(row: DiffItem): boolean {
    if (row.status !== "same" || row.problem) return true;
    const total = this.#rollup(row.path);
    return row.has_children && total.differences + total.problems > 0;
  }

  #page(row: DiffItem): DiffItem {
    return { ...row, rollup: row.has_children ? this.#rollup(row.path) : null };
  }

  #details(path: Path): DiffItem {
    return { ...this.#get(path), rollup: this.#rollup(path) };
  }

  async #start(method: string, params: Record<string, unknown>, opts?: CallOptions) {
    this.log.push({ method, params });
    throwIfAborted(opts?.signal);
    await abortableDelay(this.#options.latencyMs ?? 0, opts?.signal);
  }
}
