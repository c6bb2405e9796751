/**
 * Where the widget's data comes from: one interface, two implementations.
 *
 * - `CommDataSource` (comm-data-source.ts) asks the kernel over the widget's comm.
 * - `MemoryDataSource` (memory-data-source.ts) answers from an in-memory tree (tests,
 *   demos, a saved notebook without a kernel).
 *
 * Every method takes an optional AbortSignal; aborting rejects the promise with a
 * `ProtocolError` of type "Cancelled" and, over a comm, tells the kernel to stop.
 */

import { decodeBuffer, type TypedArray, type WireBuffer } from "./buffers";
import type { CheckResult } from "./check-protocol";
import type { DuplicatesResult } from "./duplicates-protocol";
import type {
  ChildrenResult,
  DevicesResult,
  ErrorInfo,
  HeatmapParams,
  LoadParams,
  LoadResult,
  NodeDetails,
  Path,
  PlaneParams,
  PreviewHeatmap,
  PreviewParams,
  PreviewPlane,
  PreviewResult,
  PreviewSelection,
  PreviewStats,
  RowsScope,
  SearchParams,
  SearchResult,
} from "./protocol";
import type { SizesOptions, SizesResult } from "./sizes-protocol";

/** Error types raised by the client itself (the server's are its exception names). */
export type ClientErrorType = "Cancelled" | "Timeout" | "ConnectionLost" | "BadReply";

/** A failed request: the server's structured error, or one of `ClientErrorType`. */
export class ProtocolError extends Error {
  override name = "ProtocolError";
  readonly type: string;
  readonly path: Path | null;

  constructor(type: string, message: string, path: Path | null = null) {
    super(message);
    this.type = type;
    this.path = path;
  }

  static from(info: ErrorInfo): ProtocolError {
    return new ProtocolError(info.type, info.message, info.path);
  }

  get cancelled(): boolean {
    return this.type === "Cancelled";
  }
}

/** Resolves after `ms`, or rejects as cancelled when `signal` aborts first. */
export function abortableDelay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(cancelledError());
    const onAbort = () => {
      clearTimeout(timer);
      reject(cancelledError());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

export function isCancelled(error: unknown): boolean {
  return error instanceof ProtocolError && error.cancelled;
}

export interface CallOptions {
  signal?: AbortSignal | undefined;
}

export interface TotalsOptions extends CallOptions {
  /**
   * false: collections whose subtree totals the kernel has not computed yet come with
   * `bytes`/`numel` null (a first paint that walks nothing). Default true.
   */
  totals?: boolean;
}

export interface PreviewOptions extends CallOptions {
  /** Below a torchrl storage: its written rows ("written", the default) or all of them. */
  rowsScope?: RowsScope;
  /** What the preview describes: an index expression such as `[50000:50020, :8]`. */
  index?: string;
  /** The table's first row of the plane shown (the pager). */
  offset?: number;
  /** The table's first column of the plane shown. */
  colOffset?: number;
  /** The dims shown as rows and columns and the positions of the others. */
  plane?: PlaneParams;
  /** false: statistics only when the kernel knows them already (a page of a leaf
   * previewed before, or a first look that must not read the whole leaf). */
  stats?: boolean;
  /** Also the selection downsampled to at most rows x cols cells (1 to 1024 each). */
  heatmap?: HeatmapParams;
}

export interface SearchOptions extends CallOptions {
  /** The first match of the page (default 0). */
  offset?: number;
  /** false: the page alone, answered before the walk ends (`counted: false`). */
  count?: boolean;
}

/** The search params: `offset` is sent only when it is not 0, `count` only when false
 * (the request a client sent before they existed stays the same). */
export function searchParams(
  pattern: string,
  limit: number,
  opts?: SearchOptions,
): SearchParams & Record<string, unknown> {
  const params: SearchParams & Record<string, unknown> = { pattern, limit };
  if (opts?.offset) params.offset = opts.offset;
  if (opts?.count === false) params.count = false;
  return params;
}

/** The preview params for `opts`: each optional param is sent only when asked, so that a
 * plain preview stays the request it was before they existed. */
export function previewParams(
  path: Path,
  rows: number,
  opts?: PreviewOptions,
): PreviewParams & Record<string, unknown> {
  const params: PreviewParams & Record<string, unknown> = withRowsScope({ path, rows }, opts);
  if (opts?.index !== undefined) params.index = opts.index;
  if (opts?.offset !== undefined) params.offset = opts.offset;
  if (opts?.stats === false) params.stats = false;
  if (opts?.heatmap !== undefined) params.heatmap = opts.heatmap;
  if (opts?.plane !== undefined) params.plane = opts.plane;
  if (opts?.colOffset) params.col_offset = opts.colOffset;
  return params;
}

/** The preview params for `opts`: `rows_scope` is sent only when it is "all". */
export function withRowsScope<P extends object>(
  params: P,
  opts?: PreviewOptions,
): P | (P & { rows_scope: "all" }) {
  return opts?.rowsScope === "all" ? { ...params, rows_scope: "all" } : params;
}

/**
 * The request params for `opts`: `totals: false` is sent only when asked, so that a
 * default request stays what it was before the flag existed.
 */
export function withTotals<P extends object>(
  params: P,
  opts?: TotalsOptions,
): P | (P & { totals: false }) {
  return opts?.totals === false ? { ...params, totals: false } : params;
}

export interface ProgressInfo {
  done: number;
  total: number;
  label: string;
}

export interface DecodedTensor {
  dtype: string;
  shape: number[];
  data: TypedArray;
}

/** A preview with its buffers decoded. */
export interface PreviewData {
  path: Path;
  dtype: string;
  shape: number[];
  display_dtype: string;
  slice: DecodedTensor;
  selection: PreviewSelection;
  plane: PreviewPlane;
  stats: PreviewStats | null;
  /** `values`: a bar per value (see `PreviewResult`), else null. */
  histogram: { edges: DecodedTensor; counts: DecodedTensor; values: DecodedTensor | null } | null;
  heatmap: (Omit<PreviewHeatmap, "cells"> & { cells: DecodedTensor }) | null;
  rows: PreviewResult["rows"];
}

export interface DataSource {
  children(
    path: Path,
    offset: number,
    limit: number,
    opts?: TotalsOptions,
  ): Promise<ChildrenResult>;
  node(path: Path, opts?: TotalsOptions): Promise<NodeDetails>;
  search(pattern: string, limit: number, opts?: SearchOptions): Promise<SearchResult>;
  preview(path: Path, rows: number, opts?: PreviewOptions): Promise<PreviewData>;
  devices(opts?: CallOptions): Promise<DevicesResult>;
  load(
    params: LoadParams,
    onProgress?: (p: ProgressInfo) => void,
    opts?: CallOptions,
  ): Promise<LoadResult>;
  /** Is the subtree at `path` healthy (absent: the source cannot check). */
  check?(
    path: Path,
    values: boolean,
    onProgress?: (p: ProgressInfo) => void,
    opts?: CallOptions,
  ): Promise<CheckResult>;
  /** The leaves with the same bytes as the leaf at `path` (absent: the source cannot
   * say); `read` lets the kernel read payloads, reporting progress. */
  duplicates?(
    path: Path,
    read: boolean,
    onProgress?: (p: ProgressInfo) => void,
    opts?: CallOptions,
  ): Promise<DuplicatesResult>;
  /** One level of where a subtree's bytes go (absent: the source cannot say). */
  sizes?(path: Path, opts?: SizesOptions): Promise<SizesResult>;
}

export function cancelledError(): ProtocolError {
  return new ProtocolError("Cancelled", "the request was cancelled");
}

/** Throws the "Cancelled" error when the signal has fired. */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw cancelledError();
}

/** Decodes the BufferRefs of a preview reply; a bad buffer is a "BadReply" error. */
export function resolvePreview(result: PreviewResult, buffers: readonly WireBuffer[]): PreviewData {
  const tensor = (ref: PreviewResult["slice"]): DecodedTensor => {
    try {
      return { dtype: ref.dtype, shape: ref.shape, data: decodeBuffer(ref, buffers) };
    } catch (e) {
      throw new ProtocolError("BadReply", `preview of ${result.path.join("/")}: ${String(e)}`);
    }
  };
  const { histogram, heatmap } = result;
  return {
    path: result.path,
    dtype: result.dtype,
    shape: result.shape,
    display_dtype: result.display_dtype,
    slice: tensor(result.slice),
    selection: result.selection,
    plane: result.plane,
    stats: result.stats,
    histogram: histogram && {
      edges: tensor(histogram.edges),
      counts: tensor(histogram.counts),
      values: histogram.values && tensor(histogram.values),
    },
    heatmap: heatmap && { ...heatmap, cells: tensor(heatmap.cells) },
    rows: result.rows,
  };
}
