/**
 * `DataSource` answering from an in-memory tree: for tests, demos and offline views.
 *
 * It follows the same rules as the kernel (paged children, the search rules of
 * search-match.ts and its pages, previews as memory-preview.ts computes them, structured
 * errors) and records every call in `log`, with the number of calls in flight, so tests
 * can check how a client pages.
 */

import {
  abortableDelay,
  type CallOptions,
  type DataSource,
  type PreviewData,
  type PreviewOptions,
  type ProgressInfo,
  ProtocolError,
  previewParams,
  type SearchOptions,
  searchParams,
  type TotalsOptions,
  throwIfAborted,
  withTotals,
} from "./data-source";
import {
  DISPLAY_DTYPES,
  heatmapOf,
  histogramOf,
  planeOf,
  planeValues,
  selected,
  selectIndex,
  selectionParts,
  statsOf,
  tableOf,
  typedArray,
} from "./memory-preview";
import { IndexSyntaxError, indexText } from "./preview-index";
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
  PreviewDim,
  SearchResult,
  StorageRows,
} from "./protocol";
import { UNLOADABLE_KINDS } from "./protocol";
import { loadCode, loadTarget } from "./python-code";
import { compileSearch } from "./search-match";

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
  /** The kernel's names and what each holds: a load does not rebind one without
   * `replace` (a `VariableBoundError`), and binds its variable here. */
  namespace?: Map<string, string>;
}

export interface LogEntry {
  method: Method;
  params: Record<string, unknown>;
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
  readonly #namespace: Map<string, string> | undefined;
  /** Leaves previewed (and so statistics the "kernel" knows), with their rows covered. */
  readonly #previewed = new Set<string>();

  constructor(root: MemoryNode, options: MemoryDataSourceOptions = {}) {
    this.#latencyMs = options.latencyMs ?? 0;
    this.#devices = options.devices ?? [{ name: "cpu", free_bytes: null, total_bytes: null }];
    this.#source = options.source ?? "checkpoint";
    this.#namespace = options.namespace;
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

  /** Like the kernel: the rules of `search-match.ts`, depth-first in the tree's order,
   * one page from `offset` with the number of all matches and a summary of each; with
   * `count: false` (and a limit) it stops at the first match after the page, uncounted. */
  search(pattern: string, limit: number, opts?: SearchOptions): Promise<SearchResult> {
    return this.#answer("search", searchParams(pattern, limit, opts), opts, () => {
      const match = compileSearch(pattern);
      const offset = opts?.offset ?? 0;
      const stop = offset + limit;
      const early = opts?.count === false && limit > 0;
      const page: [Path, MemoryNode][] = [];
      let total = 0;
      let counted = true;
      const stack: [MemoryNode, Path][] = [[this.#tree, []]];
      while (stack.length && !match.empty) {
        const [node, path] = stack.pop() as [MemoryNode, Path];
        const children = node.children ?? [];
        for (let i = children.length - 1; i >= 0; i--) {
          const child = children[i] as MemoryNode;
          stack.push([child, [...path, child.key]]);
        }
        if (path.length && match(path)) {
          if (total >= offset && total < stop) page.push([path, node]);
          total++;
          if (early && total > stop) {
            counted = false;
            break;
          }
        }
      }
      return {
        pattern,
        offset,
        total,
        counted,
        matches: page.map(([p]) => p),
        nodes: page.map(([p, n]) => summarize(n, p)),
        truncated: offset + page.length < total,
        notes: [...match.notes],
      };
    });
  }

  /** Like the kernel (`memory-preview.ts`): the selection of `index`, its statistics and
   * histogram (with `stats: false`, only for a selection previewed before), the plane
   * shown and its table from row `offset`, and a heatmap of the plane when asked. */
  preview(path: Path, rows: number, opts?: PreviewOptions): Promise<PreviewData> {
    return this.#answer("preview", previewParams(path, rows, opts), opts, () => {
      const { node, summary } = this.#lookup(path);
      if (summary.kind !== "leaf" || !summary.shape) {
        throw new ProtocolError("TypeError", `${path.join("/")} is not a tensor`, path);
      }
      const shape = summary.shape;
      const rowSize = shape.slice(1).reduce((a, b) => a * b, 1);
      const data = node.data ?? [];
      // like the kernel: below a torchrl storage, only its written rows unless asked for all
      const storage = this.#storageRows(path, shape);
      const scope = opts?.rowsScope ?? "written";
      const inScope = storage && scope === "written" ? storage.written : (shape[0] ?? 1);
      // Rows of the leaf that `data` fills (a test tree may give fewer values than its shape).
      const leafShape = shape.length
        ? [Math.min(inScope, Math.floor(data.length / (rowSize || 1))), ...shape.slice(1)]
        : [];
      const values = data.slice(
        0,
        leafShape.reduce((a, b) => a * b, 1),
      );
      let dims: PreviewDim[];
      let shown: ReturnType<typeof planeOf>;
      try {
        dims = selectIndex(selectionParts(opts?.index), leafShape);
        shown = planeOf(dims, opts?.plane, leafShape);
      } catch (e) {
        const type = e instanceof IndexSyntaxError ? "RequestError" : "PreviewIndexError";
        throw new ProtocolError(type, e instanceof Error ? e.message : String(e), path);
      }
      const picked = selected(values, leafShape, dims);
      const plane = planeValues(picked.values, dims, shown);
      const offset = opts?.offset ?? 0;
      const colOffset = opts?.colOffset ?? 0;
      const table = tableOf(plane.values, plane.shape, rows, offset, colOffset);
      const dtype = summary.dtype ?? "float32";
      const display = DISPLAY_DTYPES[dtype] ?? "float64";
      const known = `${JSON.stringify(path)} ${leafShape[0] ?? ""} ${indexText(dims)}`;
      const stats = opts?.stats !== false || this.#previewed.has(known);
      this.#previewed.add(known);
      return {
        path,
        dtype,
        shape,
        display_dtype: display,
        slice: { dtype: display, shape: table.shape, data: typedArray(display, table.values) },
        selection: { index: indexText(dims), dims, shape: picked.shape },
        plane: { ...shown, offset, col_offset: colOffset },
        stats: stats ? statsOf(picked.values, dtype) : null,
        histogram: stats ? histogramOf(picked.values, dtype) : null,
        heatmap: opts?.heatmap ? heatmapOf(plane.values, plane.shape, opts.heatmap) : null,
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
      const bound = params.variable === null ? undefined : this.#namespace?.get(params.variable);
      if (bound !== undefined && !params.replace) {
        const message = `\`${params.variable}\` is already bound to ${bound}`;
        throw new ProtocolError("VariableBoundError", message, params.path);
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
      if (variable !== null) this.#namespace?.set(variable, `a ${summary.class_name}`);
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
