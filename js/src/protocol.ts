/**
 * The tdview wire protocol, version 1: the TypeScript mirror of `tdview/protocol/`.
 *
 * Synced traits (small, saved with the notebook): see `WidgetState`.
 *
 * Custom messages (JSON content plus optional binary buffers):
 *
 * - JS → Python `{kind: "tdview:request", v: 1, id, method, params}` and
 *   `{kind: "tdview:cancel", v: 1, id}`.
 * - Python → JS `{kind: "tdview:reply", v: 1, id, ok: true, result}` or
 *   `{kind: "tdview:reply", v: 1, id, ok: false, error: {type, message, path}}`, and any
 *   number of `{kind: "tdview:progress", v: 1, id, done, total, label}` before the reply.
 *
 * Rules both sides keep:
 *
 * - `id` is a positive safe integer chosen by the client and echoed unchanged; it is
 *   unique among the requests of one widget model (several views may share a model).
 * - A path is the nested key as a list of strings; `[]` is the root.
 * - Numbers are finite: a statistic with no finite value is `null` (JSON has no NaN).
 * - Objects may gain keys without a version bump; readers ignore keys they do not know.
 *   Removing or retyping a key bumps `PROTOCOL_VERSION`.
 * - Tensor bytes travel in the message's buffers, described by a `BufferRef`
 *   `{dtype, shape, buffer}` (buffer: index into the buffers list). The bytes are
 *   C-contiguous, little-endian, and `dtype` is one of `BUFFER_DTYPES`: a dtype with no
 *   typed-array equivalent (bfloat16, float16, complex, float8) is converted by Python
 *   before sending, and the preview reply says so in `display_dtype`.
 * - After a cancel the server may still send a reply (usually `ok: false`, type
 *   "Cancelled"); the client ignores replies to ids it no longer waits for.
 * - `search` takes a subpath (`model/layers/0`), a state_dict key (`linear1.weight`),
 *   part of a key (`norm`) or a glob (`*.bias`, `layers/*\/norm1/*`, `**\/exp_avg`), case
 *   ignored (the rules: `search-match.ts`, `tdview/index/_match.py`); matches come
 *   depth-first in load order, root excluded. A reply is one page (`offset`, at most
 *   `limit`) with the number of all matches (`total`) and a summary of each node.
 *   `count: false` (default true) asks for the page alone: the walk stops at the first
 *   match after it, and the reply says `counted: false`, `total` then being the lower
 *   bound `offset + limit + 1` (`truncated` stays exact: true). A walk that ends first
 *   counts exactly: `counted: true`. `limit: 0` only counts (whatever `count` says), so a
 *   view shows a first page at once and asks the count after it, cancelled by a newer
 *   query.
 * - `preview` describes what an `index` expression picks (`[50000:50020, :8]`, `[..., 0]`,
 *   `preview-index.ts`): statistics, histogram and heatmap are of that selection; its table
 *   and heatmap show a `plane` of it (two dims, the others at a position each), the
 *   table from row `offset`.
 */

import { BUFFER_DTYPES } from "./buffers";
import {
  DIFF_METHODS,
  type DiffMethods,
  diffParamDecoders,
  diffResultDecoders,
  withReplace,
} from "./compare-protocol";
import {
  type DuplicatesMethods,
  duplicatesParamDecoders,
  duplicatesResultDecoders,
  type ParamLabel,
  withParam,
} from "./duplicates-protocol";
import { withMetadata } from "./file-metadata";
import { parseIndex } from "./preview-index";
import { type SizesMethods, sizesParamDecoders, sizesResultDecoders } from "./sizes-protocol";
import {
  array,
  bool,
  count,
  type Decoder,
  int,
  isPlainObject,
  literal,
  nullable,
  num,
  object,
  pair,
  record,
  ShapeError,
  str,
  tryDecode,
  unknownValue,
} from "./validate";

export { BUFFER_DTYPES, type BufferDtype, decodeBuffer, type TypedArray } from "./buffers";

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
export interface Methods extends DuplicatesMethods, DiffMethods, SizesMethods {
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
export const METHODS = [
  "children",
  "node",
  "search",
  "preview",
  "devices",
  "load",
  "duplicates",
  "sizes",
  ...DIFF_METHODS,
] as const;

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

// ---------------------------------------------------------------- decoders

const path = array(str);
const shape = array(count);
/** A batch size: a size per dim, or -1 where the members of a lazy stack differ. */
const batchSize = array<number>((v, at) => (v === -1 ? -1 : count(v, at)));
const mode = literal("r", "r+", null);

const summaryShape = {
  key: str,
  path,
  kind: literal(...NODE_KINDS),
  class_name: str,
  has_children: bool,
  n_children: count,
  shape: nullable(shape),
  dtype: nullable(str),
  batch_size: nullable(batchSize),
  stack_dim: nullable(int),
  bytes: nullable(count),
  numel: nullable(count),
  pickled: bool,
  problems: array(str),
};

const decodeMember: Decoder<MemberInfo> = object({
  source: str,
  depth: count,
  container: literal("directory", "archive"),
});

/** `decode`, with the node's `member` when the message has one (it is optional). */
function withMember<T extends NodeSummary>(decode: Decoder<T>): Decoder<T> {
  return (v, at) => {
    const node = decode(v, at);
    const member = isPlainObject(v) ? v.member : undefined;
    if (member !== undefined) node.member = decodeMember(member, `${at}.member`);
    return node;
  };
}

export const decodeNodeSummary: Decoder<NodeSummary> = withMember(object(summaryShape));

const rollupShape = object({ bytes: count, numel: count, leaves: count, by_dtype: record(count) });

/** A rollup, with `pickles` and `pickle_bytes` when the subtree holds pickled values. */
const decodeRollup: Decoder<Rollup> = (v, at) => {
  const rollup: Rollup = rollupShape(v, at);
  for (const key of ["pickles", "pickle_bytes"] as const) {
    const found = (v as Record<string, unknown>)[key];
    if (found !== undefined) rollup[key] = count(found, `${at}.${key}`);
  }
  return rollup;
};

const detailsShape = object({
  ...summaryShape,
  names: nullable(array(nullable(str))),
  device: nullable(str),
  subpath: str,
  storage: nullable(
    object({
      location: str,
      offset: nullable(count),
      stored_bytes: count,
      compression: str,
      crc32: nullable(count),
      cost: literal("map", "copy", "decompress", "none"),
    }),
  ),
  value: unknownValue,
  pickle: nullable(
    object({ bytes: count, globals: array(pair(str, str)), stopped: nullable(str) }),
  ),
  rollup: nullable(decodeRollup),
  rows: nullable(object({ written: count, capacity: count })),
});

export const decodeNodeDetails: Decoder<NodeDetails> = withMember(detailsShape);

const decodeStackSchema: Decoder<StackSchema> = object({
  members: count,
  stack_dim: int,
  entries: array(
    object({
      key: path,
      kind: str,
      class_name: str,
      dtype: nullable(str),
      shape: nullable(batchSize),
      members: count,
    }),
  ),
  truncated: bool,
});

/** Node details with a lazy stack's optional `schema` (kept when present). */
function withSchema(decode: Decoder<NodeDetails>): Decoder<NodeDetails> {
  return (v, at) => {
    const details = decode(v, at);
    const schema = (v as Record<string, unknown>).schema;
    if (schema !== undefined) details.schema = nullable(decodeStackSchema)(schema, `${at}.schema`);
    return details;
  };
}

export const decodeBufferRef: Decoder<BufferRef> = object({
  dtype: literal(...BUFFER_DTYPES),
  shape,
  buffer: count,
});

const decodeSharedOptions = object({
  device: str,
  mode,
  allow_pickle: bool,
  robust_key: bool,
  can_bind: bool,
});

/** The options, with `foreign` when the kernel sends it (an older one does not). */
export const decodeOptions: Decoder<Options> = (v, at) => {
  const found: Options = decodeSharedOptions(v, at);
  const foreign = isPlainObject(v) ? v.foreign : undefined;
  return foreign === undefined ? found : { ...found, foreign: bool(foreign, `${at}.foreign`) };
};

export const decodeState: Decoder<WidgetState> = object({
  _protocol_version: count,
  source: str,
  root: nullable(decodeNodeSummary),
  selected: path,
  options: decodeOptions,
  error: str,
});

const paramDecoders: { [M in Method]: Decoder<Params<M>> } = {
  children: object({ path, offset: count, limit: count }),
  node: object({ path }),
  search: (v, at) => {
    const params: SearchParams = object({ pattern: str, limit: count })(v, at);
    const offset = optional(v, "offset");
    if (offset !== undefined) params.offset = count(offset, `${at}.offset`);
    const counting = optional(v, "count");
    if (counting !== undefined) params.count = bool(counting, `${at}.count`);
    return params;
  },
  preview: (v, at) => {
    const params: PreviewParams = object({ path, rows: count })(v, at);
    // optional: checked when sent, as the kernel does
    const scope = optional(v, "rows_scope");
    if (scope !== undefined) params.rows_scope = literal(...ROWS_SCOPES)(scope, `${at}.rows_scope`);
    return decodePreviewView(v, at, params);
  },
  devices: (v, at) => object({})(v, at) as DevicesParams,
  load: (v, at) => {
    const params: LoadParams = object({
      path,
      device: str,
      mode,
      allow_pickle: bool,
      variable: nullable(str),
    })(v, at);
    return withReplace(v, at, params);
  },
  ...sizesParamDecoders,
  ...duplicatesParamDecoders,
  ...diffParamDecoders,
};

/** The key's value when a params object has it (an optional param), else undefined. */
function optional(v: unknown, key: string): unknown {
  return isPlainObject(v) && Object.hasOwn(v, key) ? v[key] : undefined;
}

/** A heatmap side: 1 to `MAX_HEATMAP_CELLS`. */
const side: Decoder<number> = (v, at) => {
  const n = count(v, at);
  if (n < 1 || n > MAX_HEATMAP_CELLS) throw new ShapeError(at, `1 to ${MAX_HEATMAP_CELLS}`, v);
  return n;
};

/** The optional view params of a preview, checked as the kernel checks them: an index
 * that parses (and not with an offset), an offset, stats, a heatmap's size. */
function decodePreviewView(v: unknown, at: string, params: PreviewParams): PreviewParams {
  const index = optional(v, "index");
  const offset = optional(v, "offset");
  if (index !== undefined) {
    params.index = nullable(str)(index, `${at}.index`);
    if (params.index !== null) {
      try {
        parseIndex(params.index);
      } catch (e) {
        throw new ShapeError(`${at}.index`, `an index expression (${String(e)})`, index);
      }
    }
  }
  if (offset !== undefined) params.offset = count(offset, `${at}.offset`);
  const colOffset = optional(v, "col_offset");
  if (colOffset !== undefined) params.col_offset = count(colOffset, `${at}.col_offset`);
  const stats = optional(v, "stats");
  if (stats !== undefined) params.stats = bool(stats, `${at}.stats`);
  const heatmap = optional(v, "heatmap");
  if (heatmap !== undefined) {
    params.heatmap = nullable(object({ rows: side, cols: side }))(heatmap, `${at}.heatmap`);
  }
  const plane = optional(v, "plane");
  if (plane !== undefined) {
    params.plane = nullable(object({ rows: count, cols: count, at: array(count) }))(
      plane,
      `${at}.plane`,
    );
  }
  return params;
}

const stat = nullable(num);
const resultDecoders: { [M in Method]: Decoder<Result<M>> } = {
  children: object({ path, offset: count, total: count, children: array(decodeNodeSummary) }),
  node: withMetadata(withParam(withSchema(decodeNodeDetails))),
  search: object({
    pattern: str,
    offset: count,
    total: count,
    counted: bool,
    matches: array(path),
    nodes: array(decodeNodeSummary),
    truncated: bool,
    notes: array(str),
  }),
  preview: object({
    path,
    dtype: str,
    shape,
    display_dtype: str,
    slice: decodeBufferRef,
    selection: object({
      index: str,
      dims: array(object({ start: count, stop: count, step: count, kept: bool })),
      shape,
    }),
    plane: object({
      rows: nullable(count),
      cols: nullable(count),
      at: array(nullable(count)),
      offset: count,
      col_offset: count,
    }),
    stats: nullable(
      object({
        min: stat,
        max: stat,
        mean: stat,
        std: stat,
        nan: nullable(count),
        inf: nullable(count),
        count,
      }),
    ),
    histogram: nullable(
      object({
        edges: decodeBufferRef,
        counts: decodeBufferRef,
        values: nullable(decodeBufferRef),
      }),
    ),
    heatmap: nullable(object({ cells: decodeBufferRef, of: shape, min: stat, max: stat })),
    rows: nullable(object({ written: count, capacity: count, scope: literal(...ROWS_SCOPES) })),
  }),
  devices: object({
    devices: array(
      object({ name: str, free_bytes: nullable(count), total_bytes: nullable(count) }),
    ),
  }),
  load: object({ path, summary: str, variable: nullable(str), code: str }),
  ...sizesResultDecoders,
  ...duplicatesResultDecoders,
  // a diff_preview holds a preview of each side, a diff_load answers as a load
  ...diffResultDecoders(
    (v, at) => resultDecoders.preview(v, at),
    (v, at) => resultDecoders.load(v, at),
  ),
};

const envelope = (kind: string) => object({ kind: literal(kind), v: literal(1), id: count });

const decodeErrorInfo: Decoder<ErrorInfo> = object({
  type: str,
  message: str,
  path: nullable(path),
});

// ---------------------------------------------------------------- public helpers

export function isMethod(value: unknown): value is Method {
  return (METHODS as readonly unknown[]).includes(value);
}

/** Builds a request message. */
export function makeRequest<M extends Method>(id: number, method: M, params: Params<M>) {
  return { kind: "tdview:request", v: PROTOCOL_VERSION, id, method, params } as const;
}

export function makeCancel(id: number): CancelMessage {
  return { kind: "tdview:cancel", v: 1, id };
}

/** Checks a request (as the server would). Null when it is not a valid v1 request. */
export function parseRequest(msg: unknown): Request | null {
  if (!isPlainObject(msg) || tryDecode(envelope("tdview:request"), msg) === null) return null;
  const method = msg.method;
  if (!isMethod(method)) return null;
  const decode: Decoder<unknown> = paramDecoders[method];
  const params = tryDecode(decode, msg.params, "params");
  if (params === null) return null;
  return { kind: "tdview:request", v: 1, id: msg.id as number, method, params } as Request;
}

export function parseCancel(msg: unknown): CancelMessage | null {
  const env = tryDecode(envelope("tdview:cancel"), msg);
  return env === null ? null : { kind: "tdview:cancel", v: 1, id: env.id };
}

/**
 * Checks a reply's envelope. The result is checked per method by `parseResult`,
 * since only the caller knows which method an id was for.
 */
export function parseReply(msg: unknown): Reply | null {
  if (!isPlainObject(msg)) return null;
  const env = tryDecode(envelope("tdview:reply"), msg);
  if (env === null) return null;
  if (msg.ok === true && isPlainObject(msg.result)) {
    return { kind: "tdview:reply", v: 1, id: env.id, ok: true, result: msg.result };
  }
  if (msg.ok === false) {
    const error = tryDecode(decodeErrorInfo, msg.error, "error");
    if (error !== null) return { kind: "tdview:reply", v: 1, id: env.id, ok: false, error };
  }
  return null;
}

/** Checks the result of `method`; throws a `ShapeError` naming the bad field. */
export function parseResult<M extends Method>(method: M, result: unknown): Result<M> {
  return resultDecoders[method](result, "result");
}

export function parseProgress(msg: unknown): Progress | null {
  return tryDecode(
    object({
      kind: literal("tdview:progress"),
      v: literal(1),
      id: count,
      done: count,
      total: count,
      label: str,
    }),
    msg,
  );
}

export function isProgress(msg: unknown): msg is Progress {
  return parseProgress(msg) !== null;
}

/** Checks the synced traits; null when any is missing or mistyped. */
export function parseState(state: unknown): WidgetState | null {
  return tryDecode(decodeState, state);
}
