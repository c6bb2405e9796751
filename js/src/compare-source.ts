/**
 * Where the compare view's data comes from: one interface (`CompareSource`), over the
 * widget's comm (`CommCompareSource`, the `diff_*` methods of compare-protocol.ts) or
 * in memory (`MemoryCompareSource`, compare-memory-source.ts: tests, offline views).
 *
 * As with `DataSource`, every call takes an optional AbortSignal; aborting rejects with a
 * "Cancelled" `ProtocolError` and, over a comm, tells the kernel to stop.
 */

import type { CommDataSource } from "./comm-data-source";
import type { DiffItem, DiffLevel, DiffPage, DiffSummary, Side } from "./compare-protocol";
import {
  type CallOptions,
  type PreviewData,
  type ProgressInfo,
  resolvePreview,
} from "./data-source";
import type { DevicesResult, LoadParams, LoadResult, Path } from "./protocol";

/** A side-by-side preview with its buffers decoded (null where a side lacks the leaf). */
export interface DiffPreviewData {
  path: Path;
  a: PreviewData | null;
  b: PreviewData | null;
}

export interface RefineOptions extends CallOptions {
  rtol?: number;
  atol?: number;
  allowPickle?: boolean;
  onProgress?: (p: ProgressInfo) => void;
}

export interface CompareSource {
  /** A page of the keys below `path` (`onlyChanged`: those that differ or hold a
   * difference). */
  children(
    path: Path,
    offset: number,
    limit: number,
    onlyChanged: boolean,
    opts?: CallOptions,
  ): Promise<DiffPage>;
  node(path: Path, opts?: CallOptions): Promise<DiffItem>;
  /** Compares the subtree at `path` again at `level`; resolves with the new summary. */
  refine(path: Path, level: DiffLevel, opts?: RefineOptions): Promise<DiffSummary>;
  preview(path: Path, rows: number, opts?: CallOptions): Promise<DiffPreviewData>;
  /** A load from one side's checkpoint (`params.path` is that side's own key). */
  load(
    side: Side,
    params: LoadParams,
    onProgress?: (p: ProgressInfo) => void,
    opts?: CallOptions,
  ): Promise<LoadResult>;
  devices(opts?: CallOptions): Promise<DevicesResult>;
}

/** The `diff_children` params of a page: `only_changed` only when set (off is the
 * kernel's default), as the comm sends them and the memory source logs them. */
export function childrenParams(path: Path, offset: number, limit: number, onlyChanged: boolean) {
  return { path, offset, limit, ...(onlyChanged ? { only_changed: true } : {}) };
}

/** The refine params for `opts`: tolerances and the pickle flag only when set. */
export function refineParams(path: Path, level: DiffLevel, opts: RefineOptions = {}) {
  return {
    path,
    level,
    ...(opts.rtol ? { rtol: opts.rtol } : {}),
    ...(opts.atol ? { atol: opts.atol } : {}),
    ...(opts.allowPickle ? { allow_pickle: true } : {}),
  };
}

export class CommCompareSource implements CompareSource {
  readonly #comm: CommDataSource;
  readonly #onLoaded: ((result: LoadResult) => void) | undefined;

  /** `onLoaded`: after each load that succeeded (the widget writes its `loaded` trait). */
  constructor(comm: CommDataSource, onLoaded?: (result: LoadResult) => void) {
    this.#comm = comm;
    this.#onLoaded = onLoaded;
  }

  async children(
    path: Path,
    offset: number,
    limit: number,
    onlyChanged: boolean,
    opts?: CallOptions,
  ): Promise<DiffPage> {
    const params = childrenParams(path, offset, limit, onlyChanged);
    return (await this.#comm.call("diff_children", params, { ...opts })).result;
  }

  async node(path: Path, opts?: CallOptions): Promise<DiffItem> {
    return (await this.#comm.call("diff_node", { path }, { ...opts })).result;
  }

  async refine(path: Path, level: DiffLevel, opts: RefineOptions = {}): Promise<DiffSummary> {
    const { signal, onProgress } = opts;
    const reply = await this.#comm.call("diff_refine", refineParams(path, level, opts), {
      signal,
      onProgress,
    });
    return reply.result;
  }

  async preview(path: Path, rows: number, opts?: CallOptions): Promise<DiffPreviewData> {
    const { result, buffers } = await this.#comm.call("diff_preview", { path, rows }, { ...opts });
    return {
      path: result.path,
      a: result.a && resolvePreview(result.a, buffers),
      b: result.b && resolvePreview(result.b, buffers),
    };
  }

  async load(
    side: Side,
    params: LoadParams,
    onProgress?: (p: ProgressInfo) => void,
    opts?: CallOptions,
  ): Promise<LoadResult> {
    const reply = await this.#comm.call("diff_load", { side, ...params }, { ...opts, onProgress });
    this.#onLoaded?.(reply.result);
    return reply.result;
  }

  devices(opts?: CallOptions): Promise<DevicesResult> {
    return this.#comm.devices(opts);
  }
}
