/**
 * The types of the tdview wire protocol, version 1: the synced traits, the messages and
 * each method's params and result. protocol.ts checks them (its decoders) and re-exports
 * them: import them from there.
 */

import type { BUFFER_DTYPES } from "./buffers";
import type { CheckMethods } from "./check-protocol";
import type { DiffMethods } from "./compare-protocol";
import type { DuplicatesMethods, ParamLabel } from "./duplicates-protocol";
import type { SizesMethods } from "./sizes-protocol";

export const PROTOCOL_VERSION = 1;

export type Path = string[];
export type Mode = "r" | "r+" | null;

export const NODE_KINDS = [
  "tensordict",
  "tensorclass",
  "lazy_stack",
  "non_tensor",
  "non_tensor_stack",
  "view",
  "leaf",
  // a folder of checkpoints (a collection): its root, sub-folders, member checkpoints and
  // side files
  "collection",
  "folder",
  "checkpoint",
  "json",
  "pickle",
] as const;
export type NodeKind = (typeof NODE_KINDS)[number];

/** The kinds of a collection's own tree that nothing loads (a folder, a side file). */
export const UNLOADABLE_KINDS: ReadonlySet<NodeKind> = new Set([
  "collection",
  "folder",
  "json",
  "pickle",
]);

/** The member checkpoint of a collection a node is in, as the loader takes it: a
 * "checkpoint" row, and the details of every node inside a member, carry it. */
export interface MemberInfo {
  /** The member's own path: the collection's path as the user gave it, joined with the
   * member's folders. */
  source: string;
  /** How many leading keys of a path name the member (the rest is its subpath). */
  depth: number;
  container: "directory" | "archive";
}

export interface NodeSummary {
  key: string;
  path: Path;
  kind: NodeKind;
  class_name: string;
  has_children: boolean;
  n_children: number;
  /** Shape of a leaf tensor; null for nodes. */
  shape: number[] | null;
  dtype: string | null;
  /** -1 in a dim where the members of a lazy stack differ, as tensordict says. */
  batch_size: number[] | null;
  stack_dim: number | null;
  bytes: number | null;
  numel: number | null;
  pickled: boolean;
  problems: string[];
  /** Set on a member checkpoint of a collection (and on the details of its nodes). */
  member?: MemberInfo;
}

export interface StorageInfo {
  location: string;
  offset: number | null;
  stored_bytes: number;
  compression: string;
  crc32: number | null;
  cost: "map" | "copy" | "decompress" | "none";
}

export interface PickleInfo {
  bytes: number;
  globals: [string, string][];
  /** Set when the scan of its opcodes stopped (too large to scan: imports unknown);
   * `globals` then lists only those found before. Null when the scan was complete (an
   * in-memory tree may leave it out). */
  stopped?: string | null;
}

/** One key of a lazy stack's merged schema (`tdview.index.stack_schema`). */
export interface SchemaEntry {
  key: Path;
  /** "leaf" for a tensor, else the node kind. */
  kind: string;
  class_name: string;
  /** null: no tensor, or the members' dtypes differ. */
  dtype: string | null;
  /** The key's shape in a member, -1 where the members differ; null when unknown. */
  shape: number[] | null;
  /** How many members hold the key (fewer than all: only some do). */
  members: number;
}

export interface StackSchema {
  members: number;
  stack_dim: number;
  entries: SchemaEntry[];
  /** More keys than were sent. */
  truncated: boolean;
}

export interface Rollup {
  /** Tensor bytes (`by_dtype`) plus `pickle_bytes`. */
  bytes: number;
  numel: number;
  /** Tensors; a pickled value is no leaf. */
  leaves: number;
  by_dtype: Record<string, number>;
  /** Values below that a load would unpickle, and their files' bytes: sent only when
   * there are some. */
  pickles?: number;
  pickle_bytes?: number;
}

/** The rows of a torchrl replay-buffer storage: `written` of `capacity` (its first batch
 * dim), from the `storage_metadata.json` next to its `meta.json`. */
export interface StorageRows {
  written: number;
  capacity: number;
}

/** What a preview below a torchrl storage covers: the written rows (default) or all. */
export const ROWS_SCOPES = ["written", "all"] as const;
export type RowsScope = (typeof ROWS_SCOPES)[number];

export interface NodeDetails extends NodeSummary {
  names: (string | null)[] | null;
  device: string | null;
  subpath: string;
  storage: StorageInfo | null;
  /** The inline JSON value of a non-tensor node, else null. */
  value: unknown;
  pickle: PickleInfo | null;
  rollup: Rollup | null;
  /** Set on a torchrl replay-buffer storage, else null. */
  rows: StorageRows | null;
  /** The merged schema of a lazy stack (or a tensorclass over one), with the subtree
   * totals; null before them; absent on other nodes. */
  schema?: StackSchema | null;
  /** An optimizer's `state/<i>`: its parameter, or why it is not known; absent elsewhere. */
  param?: ParamLabel;
  /** What the file records about itself, on the root (safetensors' `__metadata__`);
   * absent elsewhere. */
  metadata?: Record<string, unknown>;
}

export interface Options {
  device: string;
  mode: Mode;
  allow_pickle: boolean;
  robust_key: boolean;
  /** Whether a load can bind a variable (false in a host without an IPython namespace,
   * such as marimo: the form then offers none). Absent: true. */
  can_bind?: boolean;
  /** A format `load_memmap` refuses (safetensors...): the load line reads it with
   * `tdview.Checkpoint(source).load`. Absent: false. */
  foreign?: boolean;
}

/** The synced traits. */
export interface WidgetState {
  _protocol_version: number;
  source: string;
  root: NodeSummary | null;
  selected: Path;
  options: Options;
  error: string;
}

export interface BufferRef {
  dtype: (typeof BUFFER_DTYPES)[number];
  shape: number[];
  buffer: number;
}

export interface ChildrenParams {
  path: Path;
  offset: number;
  limit: number;
  /** false: collections whose totals are not cached come with bytes/numel null. */
  totals?: boolean;
}
export interface ChildrenResult {
  path: Path;
  offset: number;
  total: number;
  children: NodeSummary[];
}
export interface NodeParams {
  path: Path;
  /** false: a collection's bytes/numel/rollup are null unless cached. */
  totals?: boolean;
}
export interface SearchParams {
  pattern: string;
  /** At most this many matches (0: only count them). */
  limit: number;
  /** The first match of the page (0 when absent). */
  offset?: number;
  /** false: stop at the first match after the page, uncounted (true when absent). */
  count?: boolean;
}
export interface SearchResult {
  pattern: string;
  offset: number;
  /** Every match, not only this page's; when not `counted`, `offset + limit + 1`. */
  total: number;
  /** false: the walk stopped after the page and `total` is only a lower bound. */
  counted: boolean;
  matches: Path[];
  /** A summary of each match, in the order of `matches` (subtree totals only when the
   * kernel has them already: `bytes`/`numel` of a collection may be null). */
  nodes: NodeSummary[];
  /** Matches follow this page. */
  truncated: boolean;
  /** How the pattern was read, for people: a pasted key tuple or bracket form, a
   * `module.` or `_orig_mod.` prefix dropped (`tdview/index/_pasted.py`). */
  notes: string[];
}
/** The most cells a heatmap side may ask for. */
export const MAX_HEATMAP_CELLS = 1024;
export interface HeatmapParams {
  rows: number;
  cols: number;
}
/** The plane of a selection a preview's table and heatmap show (H5Web's dimension
 * mapper): the leaf's dims as rows and columns, and a position per dim of the leaf
 * (within the selection; read for the dims kept and not shown). */
export interface PlaneParams {
  rows: number;
  cols: number;
  at: number[];
}
/** The plane shown: `rows`/`cols` null where the selection keeps fewer dims; `at[d]`
 * the position within the selection of a dim kept and not shown, else null; `offset`
 * and `col_offset` the table's first row and column of the plane. */
export interface PreviewPlane {
  rows: number | null;
  cols: number | null;
  at: (number | null)[];
  offset: number;
  col_offset: number;
}
export interface PreviewParams {
  path: Path;
  rows: number;
  /** Below a torchrl storage: "written" (the default, sent only as "all") or "all". */
  rows_scope?: RowsScope;
  /** What the preview describes (statistics, histogram, heatmap, table), as an index
   * expression (`[50000:50020, :8]`, `[..., 0]`). */
  index?: string | null;
  /** The table's first row of the plane shown (the pager). */
  offset?: number;
  /** The table's first column of the plane shown. */
  col_offset?: number;
  /** The dims of the leaf shown as rows and columns and the position of each other dim
   * the selection keeps (null: its last two dims, the others at 0). */
  plane?: PlaneParams | null;
  /** false: statistics and histogram only when the kernel knows them already. */
  stats?: boolean;
  /** Also the selection downsampled to at most rows x cols cells (1 to 1024 each). */
  heatmap?: HeatmapParams | null;
}
export interface PreviewStats {
  min: number | null;
  max: number | null;
  /** null for a boolean leaf. */
  mean: number | null;
  /** null for a boolean leaf. */
  std: number | null;
  /** null for integer and boolean leaves (which hold none). */
  nan: number | null;
  inf: number | null;
  count: number;
}
/** What a preview shows of one dim of the leaf: `range(start, stop, step)`; `kept` is
 * false for a dim an integer of the index picked (and dropped). */
export interface PreviewDim {
  start: number;
  stop: number;
  step: number;
  kept: boolean;
}
export interface PreviewSelection {
  /** The index applied, clipped to the leaf and written back (`[50000:50020, 0:8]`). */
  index: string;
  /** One per dim of the leaf. */
  dims: PreviewDim[];
  /** The selection's shape; the table is its first rows (and 50 columns). */
  shape: number[];
}
/** The selection as a table (dim 0 rows, the rest flattened) in block means: cell
 * (i, j) is the mean of the finite values at rows r with r*h//R == i and columns c with
 * c*w//C == j; NaN where a block has none. */
export interface PreviewHeatmap {
  /** float32 [h, w]. */
  cells: BufferRef;
  /** [R, C]: the table's rows and columns. */
  of: number[];
  min: number | null;
  max: number | null;
}
export interface PreviewResult {
  path: Path;
  /** The leaf's own dtype, e.g. "bfloat16". */
  dtype: string;
  shape: number[];
  /** The dtype of the buffers sent, e.g. "float32" for a bfloat16 leaf. */
  display_dtype: string;
  slice: BufferRef;
  selection: PreviewSelection;
  /** What the table and the heatmap show of the selection. */
  plane: PreviewPlane;
  /** Of the selection; null when not computed (`stats: false` and not known yet). */
  stats: PreviewStats | null;
  /** `values`: a bar per value (integers and booleans with at most 64 distinct values),
   * `counts[i]` elements equal `values[i]`; null for equal bins over `edges`. */
  histogram: { edges: BufferRef; counts: BufferRef; values: BufferRef | null } | null;
  heatmap: PreviewHeatmap | null;
  /** Below a torchrl storage: its rows and which of them the preview covers; else null. */
  rows: (StorageRows & { scope: RowsScope }) | null;
}
export type DevicesParams = Record<string, never>;
export interface DeviceInfo {
  name: string;
  free_bytes: number | null;
  total_bytes: number | null;
}
export interface DevicesResult {
  devices: DeviceInfo[];
}
export interface LoadParams {
  path: Path;
  device: string;
  mode: Mode;
  allow_pickle: boolean;
  variable: string | null;
  /** Rebind `variable` if it is bound already (absent: false; the kernel then answers a
   * `VariableBoundError` saying what it holds, and reads nothing). */
  replace?: boolean;
}
export interface LoadResult {
  path: Path;
  summary: string;
  variable: string | null;
  code: string;
}

/** The methods, the compare view's (`diff_*`, compare-protocol.ts) included. */
export interface Methods extends CheckMethods, DuplicatesMethods, DiffMethods, SizesMethods {
  children: { params: ChildrenParams; result: ChildrenResult };
  node: { params: NodeParams; result: NodeDetails };
  search: { params: SearchParams; result: SearchResult };
  preview: { params: PreviewParams; result: PreviewResult };
  devices: { params: DevicesParams; result: DevicesResult };
  load: { params: LoadParams; result: LoadResult };
}
export type Method = keyof Methods;
export type Params<M extends Method> = Methods[M]["params"];
export type Result<M extends Method> = Methods[M]["result"];
export type Request = {
  [M in Method]: { kind: "tdview:request"; v: 1; id: number; method: M; params: Params<M> };
}[Method];

export interface CancelMessage {
  kind: "tdview:cancel";
  v: 1;
  id: number;
}

export interface ErrorInfo {
  type: string;
  message: string;
  path: Path | null;
}

export interface ReplyOk {
  kind: "tdview:reply";
  v: 1;
  id: number;
  ok: true;
  /** Checked per method with `parseResult`. */
  result: Record<string, unknown>;
}
export interface ReplyError {
  kind: "tdview:reply";
  v: 1;
  id: number;
  ok: false;
  error: ErrorInfo;
}
export type Reply = ReplyOk | ReplyError;

export interface Progress {
  kind: "tdview:progress";
  v: 1;
  id: number;
  done: number;
  total: number;
  label: string;
}
