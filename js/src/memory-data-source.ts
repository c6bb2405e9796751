/**
 * `DataSource` answering from an in-memory tree: for tests, demos and offline views.
 *
 * It follows the same rules as the kernel (paged children, search semantics from
 * protocol.ts, structured errors) and records every call in `log`, with the number of
 * calls in flight, so tests can check how a client pages.
 */

import type { BufferDtype, TypedArray } from "./buffers";
import {
  abortableDelay,
  type CallOptions,
  type DataSource,
  type PreviewData,
  type PreviewOptions,
  type ProgressInfo,
  ProtocolError,
  type TotalsOptions,
  throwIfAborted,
  withRowsScope,
  withTotals,
} from "./data-source";
import type {
  ChildrenResult,
  DevicesResult,
  LoadParams,
  LoadResult,
  MemberInfo,
  Method,
  NodeDetails,
  NodeKind,
  NodeSummary,
  Path,
  SearchResult,
  StorageRows,
} from "./protocol";
import { UNLOADABLE_KINDS } from "./protocol";
import { loadCode, loadTarget } from "./python-code";

/** A node of the in-memory tree; everything but `key` has a default. */
export interface MemoryNode extends Partial<Omit<NodeDetails, "key" | "path">> {
  key: string;
  children?: MemoryNode[];
  /** Row-major values of a leaf, used by `preview`. */
  data?: readonly number[];
  /** Makes every call about this node fail with this error type. */
  fail?: string;
}

export interface MemoryDataSourceOptions {
  /** Delay of each answer in ms (0: next microtask); a load waits this long per leaf. */
  latencyMs?: number;
  devices?: DevicesResult["devices"];
  /** The checkpoint path written into the code of a load. */
  source?: string;
}

export interface LogEntry {
  method: Method;
  params: Record<string, unknown>;
}

/** The dtype a kernel sends for each leaf dtype (see `_preview.py`). */
const DISPLAY_DTYPES: Record<string, BufferDtype> = {
  bfloat16: "float32",
  float16: "float32",
  float32: "float32",
  float64: "float64",
  bool: "bool",
  uint8: "uint8",
  int8: "int8",
  int16: "int16",
  int32: "int32",
  int64: "int64",
};

function typedArray(dtype: BufferDtype, values: readonly number[]): TypedArray {
  switch (dtype) {
    case "float32":
      return Float32Array.from(values);
    case "bool":
    case "uint8":
      return Uint8Array.from(values);
    case "int8":
      return Int8Array.from(values);
    case "int16":
      return Int16Array.from(values);
    case "int32":
      return Int32Array.from(values);
    case "int64":
      return BigInt64Array.from(values, (v) => BigInt(Math.trunc(v)));
    default:
      return Float64Array.from(values);
  }
}

/** Ten equal bins over [min, max] of the finite values; null when there is none. */
function histogramOf(finite: readonly number[]): PreviewData["histogram"] {
  if (finite.length === 0) return null;
  const bins = 10;
  let lo = Math.min(...finite);
  let hi = Math.max(...finite);
  if (lo === hi) {
    lo -= 0.5;
    hi += 0.5;
  }
  const edges = Float64Array.from({ length: bins + 1 }, (_, i) => lo + ((hi - lo) * i) / bins);
  const counts = new BigInt64Array(bins);
  for (const v of finite) {
    const i = Math.min(bins - 1, Math.floor(((v - lo) / (hi - lo)) * bins));
    counts[i] = (counts[i] ?? 0n) + 1n;
  }
  return {
    edges: { dtype: "float64", shape: [bins + 1], data: edges },
    counts: { dtype: "int64", shape: [bins], data: counts },
  };
}

function leafPaths(node: MemoryNode, path: Path): Path[] {
  if (!node.children) return (node.kind ?? "leaf") === "leaf" ? [path] : [];
  return node.children.flatMap((c) => leafPaths(c, [...path, c.key]));
}

function pickledUnder(node: MemoryNode): boolean {
  return node.pickled === true || (node.children ?? []).some(pickledUnder);
}

interface Entry {
  node: MemoryNode;
  summary: NodeSummary;
  /** The member checkpoint of a collection the node is in (a "checkpoint" node with
   * `member` at or above it), as the kernel puts it on the node's details. */
  member: MemberInfo | undefined;
}

/** The class names the kernel gives a collection's own nodes (`_collection.summary`). */
const OWN_CLASS_NAMES: Partial<Record<NodeKind, string>> = {
  collection: "",
  folder: "",
  json: "JSON file",
  pickle: "pickle file",
};

function memberOf(node: MemoryNode): MemberInfo | undefined {
  return node.kind === "checkpoint" ? node.member : undefined;
}

function summarize(node: MemoryNode, path: Path): NodeSummary {
  const children = node.children ?? [];
  const kind: NodeKind = node.kind ?? (node.children ? "tensordict" : "leaf");
  const leaf = kind === "leaf";
  // a folder or a side file of a collection: no class of its own, no batch size
  const own = OWN_CLASS_NAMES[kind];
  const shape = node.shape ?? (leaf ? [node.data?.length ?? 0] : null);
  const numel = node.numel ?? (shape ? shape.reduce((a, b) => a * b, 1) : null);
  return {
    key: node.key,
    path,
    kind,
    class_name: node.class_name ?? own ?? (leaf ? "Tensor" : "TensorDict"),
    has_children: node.has_children ?? children.length > 0,
    n_children: node.n_children ?? children.length,
    shape,
    dtype: node.dtype ?? (leaf ? "float32" : null),
    batch_size:
      node.batch_size === undefined ? (leaf || own !== undefined ? null : []) : node.batch_size,
    stack_dim: node.stack_dim ?? null,
    bytes: node.bytes ?? (leaf && numel !== null ? numel * 4 : null),
    numel,
    pickled: node.pickled ?? kind === "pickle",
    problems: node.problems ?? [],
    // like the kernel: a member checkpoint of a collection says where it is
    ...(kind === "checkpoint" && node.member ? { member: node.member } : {}),
  };
}

/** What the kernel sends as a preview's table: rows by the remaining dims flattened in C
 * order, cut to 50 columns (a 1-d leaf stays 1-d). */
function tableSlice(
  display: BufferDtype,
  shape: readonly number[],
  nRows: number,
  shown: number[],
) {
  if (shape.length < 2) return { dtype: display, shape: [nRows], data: typedArray(display, shown) };
  const width = shape.slice(1).reduce((a, b) => a * b, 1);
  const cols = Math.min(width, 50);
  const cells: number[] = [];
  for (let r = 0; r < nRows; r++) cells.push(...shown.slice(r * width, r * width + cols));
  return { dtype: display, shape: [nRows, cols], data: typedArray(display, cells) };
}

export class MemoryDataSource implements DataSource {
  readonly log: LogEntry[] = [];
  inFlight = 0;
  maxInFlight = 0;
  readonly root: NodeSummary;
  readonly #tree: MemoryNode;
  readonly #byKey = new WeakMap<MemoryNode, Map<string, MemoryNode>>();
  readonly #latencyMs: number;
  readonly #devices: DevicesResult["devices"];
  readonly #source: string;

  constructor(root: MemoryNode, options: MemoryDataSourceOptions = {}) {
    this.#latencyMs = options.latencyMs ?? 0;
    this.#devices = options.devices ?? [{ name: "cpu", free_bytes: null, total_bytes: null }];
    this.#source = options.source ?? "checkpoint";
    this.#tree = root;
    this.root = summarize(root, []);
  }

  /** Calls of `method` made so far. */
  calls(method: Method): LogEntry[] {
    return this.log.filter((e) => e.method === method);
  }

  children(
    path: Path,
    offset: number,
    limit: number,
    opts?: TotalsOptions,
  ): Promise<ChildrenResult> {
    const totals = opts?.totals !== false;
    return this.#answer("children", withTotals({ path, offset, limit }, opts), opts, () => {
      const { node } = this.#lookup(path);
      const all = node.children ?? [];
      const children = all.slice(offset, offset + limit).map((c) => {
        const summary = summarize(c, [...path, c.key]);
        // like the kernel: without totals, a collection's subtree sums are not there yet,
        // nor the size of a side file of a folder of checkpoints
        const summed = c.children || c.kind === "json" || c.kind === "pickle";
        return totals || !summed ? summary : { ...summary, bytes: null, numel: null };
      });
      return { path, offset, total: all.length, children };
    });
  }

  node(path: Path, opts?: TotalsOptions): Promise<NodeDetails> {
    const totals = opts?.totals !== false;
    return this.#answer("node", withTotals({ path }, opts), opts, () => {
      const { node, summary, member } = this.#lookup(path);
      return {
        ...summary,
        ...(member ? { member } : {}),
        names: node.names ?? null,
        device: node.device ?? (summary.kind === "leaf" ? "cpu" : null),
        // inside a member of a collection, the path after the member's, as the kernel's
        subpath: node.subpath ?? loadTarget("", path, member).path.join("/"),
        storage: node.storage ?? null,
        value: node.value ?? null,
        pickle: node.pickle ?? null,
        rows: node.rows ?? null,
        // like the kernel: without totals, a collection's subtree sums are not there yet
        rollup: totals || !node.children ? (node.rollup ?? null) : null,
        ...(totals || !node.children ? {} : { bytes: null, numel: null }),
      };
    });
  }

  search(pattern: string, limit: number, opts?: CallOptions): Promise<SearchResult> {
    return this.#answer("search", { pattern, limit }, opts, () => {
      const needle = pattern.toLowerCase();
      const matches: Path[] = [];
      let truncated = false;
      const visit = (node: MemoryNode, path: Path): boolean => {
        for (const child of node.children ?? []) {
          const childPath = [...path, child.key];
          if (needle !== "" && child.key.toLowerCase().includes(needle)) {
            if (matches.length === limit) return false;
            matches.push(childPath);
          }
          if (!visit(child, childPath)) return false;
        }
        return true;
      };
      truncated = !visit(this.#tree, []);
      return { pattern, matches, truncated };
    });
  }

  preview(path: Path, rows: number, opts?: PreviewOptions): Promise<PreviewData> {
    return this.#answer("preview", withRowsScope({ path, rows }, opts), opts, () => {
      const { node, summary } = this.#lookup(path);
      if (summary.kind !== "leaf" || !summary.shape) {
        throw new ProtocolError("TypeError", `${path.join("/")} is not a tensor`, path);
      }
      const rowSize = summary.shape.slice(1).reduce((a, b) => a * b, 1);
      const data = node.data ?? [];
      // like the kernel: below a torchrl storage, only its written rows unless asked for all
      const storage = this.#storageRows(path, summary.shape);
      const scope = opts?.rowsScope ?? "written";
      const inScope = storage && scope === "written" ? storage.written : (summary.shape[0] ?? 1);
      // Rows of the leaf that `data` fills (a test tree may give fewer values than its shape).
      const nRows = Math.min(rows, inScope, Math.floor(data.length / rowSize));
      const shown = data.slice(0, nRows * rowSize);
      const dtype = summary.dtype ?? "float32";
      const display = DISPLAY_DTYPES[dtype] ?? "float64";
      const finite = shown.filter(Number.isFinite);
      const nan = shown.filter(Number.isNaN).length;
      const mean = finite.reduce((a, b) => a + b, 0) / (finite.length || 1);
      const variance = finite.reduce((a, b) => a + (b - mean) ** 2, 0) / (finite.length || 1);
      return {
        path,
        dtype,
        shape: summary.shape,
        display_dtype: display,
        slice: tableSlice(display, summary.shape, nRows, shown),
        stats: {
          min: finite.length ? Math.min(...finite) : null,
          max: finite.length ? Math.max(...finite) : null,
          mean: finite.length ? mean : null,
          std: finite.length ? Math.sqrt(variance) : null,
          nan,
          inf: shown.length - finite.length - nan,
          count: shown.length,
        },
        histogram: histogramOf(finite),
        rows: storage && { ...storage, scope },
      };
    });
  }

  /** The rows of the nearest node above a leaf that has them (a torchrl storage), when
   * the leaf's dim 0 is that storage's capacity; else null. */
  #storageRows(path: Path, shape: readonly number[]): StorageRows | null {
    let node: MemoryNode | undefined = this.#tree;
    let found: StorageRows | null = null;
    for (const key of path.slice(0, -1)) {
      if (node?.rows) found = node.rows;
      node = node && this.#childrenByKey(node).get(key);
    }
    if (node?.rows) found = node.rows;
    return found && shape.length > 0 && shape[0] === found.capacity ? found : null;
  }

  devices(opts?: CallOptions): Promise<DevicesResult> {
    return this.#answer("devices", {}, opts, () => ({ devices: this.#devices }));
  }

  /**
   * Loads like the kernel: progress per leaf of the subtree (each after `latencyMs`), a
   * "PickleRefusedError" for a pickled node without `allow_pickle`, and the code line
   * that `tdview.protocol._load.load_code` writes.
   */
  async load(
    params: LoadParams,
    onProgress?: (p: ProgressInfo) => void,
    opts?: CallOptions,
  ): Promise<LoadResult> {
    const signal = opts?.signal;
    this.log.push({ method: "load", params: { ...params } });
    throwIfAborted(signal);
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      const { node, summary, member } = this.#lookup(params.path);
      if (UNLOADABLE_KINDS.has(summary.kind)) {
        // as the kernel does: a folder or a side file of a collection is not loaded
        const what = params.path.join("/") || "the collection";
        throw new ProtocolError("SubpathError", `${what} is not a checkpoint`, params.path);
      }
      const leaves = leafPaths(node, params.path);
      onProgress?.({ done: 0, total: leaves.length, label: params.path.join("/") });
      for (const [i, leaf] of leaves.entries()) {
        await this.#wait(signal);
        onProgress?.({ done: i + 1, total: leaves.length, label: leaf.join("/") });
      }
      await this.#wait(signal);
      if (pickledUnder(node) && !params.allow_pickle) {
        throw new ProtocolError(
          "PickleRefusedError",
          "Refusing to load pickled non-tensor data. Pass allow_pickle=True only when the saved data is trusted.",
          params.path,
        );
      }
      const { variable } = params;
      return {
        path: params.path,
        summary: `${summary.class_name}(batch_size=[${(summary.batch_size ?? []).join(", ")}])`,
        variable,
        code: loadCode({
          ...loadTarget(this.#source, params.path, member),
          leaf: summary.kind === "leaf",
          device: params.device,
          mode: params.mode,
          allowPickle: params.allow_pickle,
          variable,
        }),
      };
    } finally {
      this.inFlight--;
    }
  }

  #lookup(path: Path): Entry {
    let node: MemoryNode | undefined = this.#tree;
    let member = memberOf(node);
    for (const key of path) {
      node = node && this.#childrenByKey(node).get(key);
      member ??= node && memberOf(node);
    }
    if (!node) throw new ProtocolError("KeyError", `no node at ${JSON.stringify(path)}`, path);
    if (node.fail) throw new ProtocolError(node.fail, `${path.join("/")}: ${node.fail}`, path);
    return { node, summary: summarize(node, path), member };
  }

  #childrenByKey(node: MemoryNode): Map<string, MemoryNode> {
    let map = this.#byKey.get(node);
    if (!map) {
      map = new Map((node.children ?? []).map((c) => [c.key, c]));
      this.#byKey.set(node, map);
    }
    return map;
  }

  async #answer<T>(
    method: Method,
    params: Record<string, unknown>,
    opts: CallOptions | undefined,
    compute: () => T,
  ): Promise<T> {
    const signal = opts?.signal;
    this.log.push({ method, params });
    throwIfAborted(signal);
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      await this.#wait(signal);
      return compute();
    } finally {
      this.inFlight--;
    }
  }

  #wait(signal: AbortSignal | undefined): Promise<void> {
    if (this.#latencyMs === 0) {
      return Promise.resolve().then(() => throwIfAborted(signal));
    }
    return abortableDelay(this.#latencyMs, signal);
  }
}
