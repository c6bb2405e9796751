/**
 * The tdview wire protocol, version 1: the TypeScript mirror of `tdview/protocol/`. Its
 * checks (the decoders, `parseRequest`, `parseReply`...) are here, its types in
 * protocol-types.ts, re-exported here: import both from this module.
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
import { checkParamDecoders, checkResultDecoders } from "./check-protocol";
import { DIFF_METHODS, diffParamDecoders, diffResultDecoders } from "./compare-protocol";
import {
  duplicatesParamDecoders,
  duplicatesResultDecoders,
  withParam,
} from "./duplicates-protocol";
import { withMetadata } from "./file-metadata";
import { loadFields, withReplace } from "./load-params";
import { parseIndex } from "./preview-index";
import {
  type BufferRef,
  type CancelMessage,
  type DevicesParams,
  type ErrorInfo,
  MAX_HEATMAP_CELLS,
  type MemberInfo,
  type Method,
  NODE_KINDS,
  type NodeDetails,
  type NodeSummary,
  type Options,
  type Params,
  PROTOCOL_VERSION,
  type PreviewParams,
  type Progress,
  type Reply,
  type Request,
  type Result,
  ROWS_SCOPES,
  type Rollup,
  type SearchParams,
  type StackSchema,
  type WidgetState,
} from "./protocol-types";
import { sizesParamDecoders, sizesResultDecoders } from "./sizes-protocol";
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

export * from "./protocol-types";

/** The methods a request may name (`Method`), in the kernel's order. */
export const METHODS = [
  "children",
  "node",
  "search",
  "preview",
  "devices",
  "load",
  "duplicates",
  "sizes",
  "check",
  ...DIFF_METHODS,
] as const;

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
  load: (v, at) => withReplace(v, at, object(loadFields)(v, at)),
  ...sizesParamDecoders,
  ...checkParamDecoders,
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
  ...checkResultDecoders,
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
