/**
 * `DataSource` over the anywidget model's custom messages (see protocol.ts).
 *
 * Each call gets a fresh id and an entry in the pending map; the reply with that id
 * settles it. A call ends in exactly one of: the reply, a timeout (no reply nor
 * progress for `timeoutMs`), an abort (the caller's signal; a cancel message is sent),
 * or the connection ending (comm closed, model destroyed, a send that throws, or
 * `dispose()`), which rejects every pending call at once. A lost connection stays lost:
 * later calls reject at once without sending, and `onLost` hears of it once.
 */

import type { WireBuffer } from "./buffers";
import type { CheckResult } from "./check-protocol";
import {
  type CallOptions,
  cancelledError,
  type DataSource,
  type PreviewData,
  type PreviewOptions,
  type ProgressInfo,
  ProtocolError,
  previewParams,
  resolvePreview,
  type SearchOptions,
  searchParams,
  type TotalsOptions,
  withTotals,
} from "./data-source";
import type { DuplicatesResult } from "./duplicates-protocol";
import {
  type ChildrenResult,
  type DevicesResult,
  type LoadParams,
  type LoadResult,
  type Method,
  makeCancel,
  makeRequest,
  type NodeDetails,
  type Params,
  type Path,
  parseProgress,
  parseReply,
  parseResult,
  type Result,
  type SearchResult,
} from "./protocol";
import { type SizesOptions, type SizesResult, sizesParams } from "./sizes-protocol";
import { isPlainObject, ShapeError } from "./validate";

type Listener = (a?: unknown, b?: unknown) => void;

/** The part of anywidget's model that the comm needs. */
export interface CommModel {
  send(content: unknown, callbacks?: unknown, buffers?: ArrayBuffer[] | ArrayBufferView[]): void;
  on(event: string, callback: Listener): void;
  off(event: string, callback: Listener): void;
}

export interface CommCallOptions extends CallOptions {
  onProgress?: ((p: ProgressInfo) => void) | undefined;
  timeoutMs?: number | undefined;
}

export interface CommDataSourceOptions {
  /** Idle timeout of a call in ms: reset by each progress message. Default 60 s. */
  timeoutMs?: number;
  /** First id; by default a random multiple of 2**32, so that views sharing a model differ. */
  firstId?: number;
  /** Called once when the connection is lost (not on `dispose()`). */
  onLost?: (error: ProtocolError) => void;
  /** Called after each load that succeeded. */
  onLoaded?: (result: LoadResult) => void;
}

/** A send that throws: in JupyterLab, the kernel restarted (its comms are gone). */
export const KERNEL_RESTARTED = "the kernel restarted: run the cell again";
/** The comm closed or the model was destroyed. */
export const CONNECTION_CLOSED = "the connection to the kernel was lost: run the cell again";

interface Pending {
  method: Method;
  resolve: (value: { result: unknown; buffers: WireBuffer[] }) => void;
  reject: (error: ProtocolError) => void;
  onProgress: ((p: ProgressInfo) => void) | undefined;
  armTimer: () => void;
  finish: () => void;
}

function randomFirstId(): number {
  return (Math.floor(Math.random() * 2 ** 20) + 1) * 2 ** 32;
}

export class CommDataSource implements DataSource {
  readonly #model: CommModel;
  readonly #pending = new Map<number, Pending>();
  readonly #timeoutMs: number;
  readonly #onLost: ((error: ProtocolError) => void) | undefined;
  readonly #onLoaded: ((result: LoadResult) => void) | undefined;
  #nextId: number;
  #lost: ProtocolError | null = null;

  constructor(model: CommModel, options: CommDataSourceOptions = {}) {
    this.#model = model;
    this.#timeoutMs = options.timeoutMs ?? 60_000;
    this.#nextId = options.firstId ?? randomFirstId();
    this.#onLost = options.onLost;
    this.#onLoaded = options.onLoaded;
    model.on("msg:custom", this.#onMessage);
    model.on("comm:close", this.#onClose);
    model.on("destroy", this.#onClose);
  }

  /** Number of calls waiting for a reply. */
  get pendingCount(): number {
    return this.#pending.size;
  }

  /** Sends one request; resolves with the checked result and the reply's buffers. */
  call<M extends Method>(
    method: M,
    params: Params<M>,
    opts: CommCallOptions = {},
  ): Promise<{ result: Result<M>; buffers: WireBuffer[] }> {
    const { signal } = opts;
    if (this.#lost) return Promise.reject(this.#lost);
    if (signal?.aborted) return Promise.reject(cancelledError());
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const onAbort = () => this.#fail(id, cancelledError(), true);
      const pending: Pending = {
        method,
        resolve: resolve as Pending["resolve"],
        reject,
        onProgress: opts.onProgress,
        armTimer: () => {
          clearTimeout(timer);
          const ms = opts.timeoutMs ?? this.#timeoutMs;
          const message = `no reply to ${method} within ${ms / 1000} s`;
          timer = setTimeout(() => this.#fail(id, new ProtocolError("Timeout", message), true), ms);
        },
        finish: () => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          this.#pending.delete(id);
        },
      };
      this.#pending.set(id, pending);
      signal?.addEventListener("abort", onAbort, { once: true });
      pending.armTimer();
      try {
        this.#model.send(makeRequest(id, method, params));
      } catch {
        // The comm is gone (a kernel restart): every later send would throw the same.
        this.#lose(KERNEL_RESTARTED, true);
      }
    });
  }

  children(
    path: Path,
    offset: number,
    limit: number,
    opts?: TotalsOptions,
  ): Promise<ChildrenResult> {
    return this.#result("children", withTotals({ path, offset, limit }, opts), opts);
  }

  node(path: Path, opts?: TotalsOptions): Promise<NodeDetails> {
    return this.#result("node", withTotals({ path }, opts), opts);
  }

  search(pattern: string, limit: number, opts?: SearchOptions): Promise<SearchResult> {
    return this.#result("search", searchParams(pattern, limit, opts), opts);
  }

  async preview(path: Path, rows: number, opts?: PreviewOptions): Promise<PreviewData> {
    const params = previewParams(path, rows, opts);
    const { result, buffers } = await this.call("preview", params, { ...opts });
    return resolvePreview(result, buffers);
  }

  sizes(path: Path, opts?: SizesOptions): Promise<SizesResult> {
    return this.call("sizes", sizesParams(path, opts), { ...opts }).then((r) => r.result);
  }

  duplicates(
    path: Path,
    read: boolean,
    onProgress?: (p: ProgressInfo) => void,
    opts?: CallOptions,
  ): Promise<DuplicatesResult> {
    return this.call("duplicates", { path, read }, { ...opts, onProgress }).then((r) => r.result);
  }

  check(
    path: Path,
    values: boolean,
    onProgress?: (p: ProgressInfo) => void,
    opts?: CallOptions,
  ): Promise<CheckResult> {
    return this.call("check", { path, values }, { ...opts, onProgress }).then((r) => r.result);
  }

  devices(opts?: CallOptions): Promise<DevicesResult> {
    return this.#result("devices", {}, opts);
  }

  load(
    params: LoadParams,
    onProgress?: (p: ProgressInfo) => void,
    opts?: CallOptions,
  ): Promise<LoadResult> {
    return this.call("load", params, { ...opts, onProgress }).then((r) => {
      this.#onLoaded?.(r.result);
      return r.result;
    });
  }

  /** Rejects every pending call and stops listening. Later calls reject at once. */
  dispose(message = "the widget was closed"): void {
    if (!this.#lost) this.#lose(message);
    this.#model.off("msg:custom", this.#onMessage);
    this.#model.off("comm:close", this.#onClose);
    this.#model.off("destroy", this.#onClose);
  }

  #result<M extends Method>(method: M, params: Params<M>, opts?: CallOptions): Promise<Result<M>> {
    return this.call(method, params, { ...opts }).then((r) => r.result);
  }

  #fail(id: number, error: ProtocolError, sendCancel: boolean): void {
    const pending = this.#pending.get(id);
    if (!pending) return;
    pending.finish();
    pending.reject(error);
    if (sendCancel && !this.#lost) {
      try {
        this.#model.send(makeCancel(id));
      } catch {
        // The connection is gone; nothing to cancel.
      }
    }
  }

  #lose(message: string, notify = false): void {
    if (this.#lost) return;
    const lost = new ProtocolError("ConnectionLost", message);
    this.#lost = lost;
    for (const id of [...this.#pending.keys()]) this.#fail(id, lost, false);
    if (notify) this.#onLost?.(lost);
  }

  readonly #onClose: Listener = () => this.#lose(CONNECTION_CLOSED, true);

  readonly #onMessage: Listener = (msg, buffers) => {
    if (!isPlainObject(msg) || typeof msg.id !== "number") return;
    const pending = this.#pending.get(msg.id);
    if (!pending) return;
    if (msg.kind === "tdview:progress") {
      const progress = parseProgress(msg);
      if (progress) {
        pending.armTimer();
        pending.onProgress?.({ done: progress.done, total: progress.total, label: progress.label });
      }
      return;
    }
    if (msg.kind !== "tdview:reply") return;
    this.#settle(msg.id, pending, msg, Array.isArray(buffers) ? (buffers as WireBuffer[]) : []);
  };

  #settle(id: number, pending: Pending, msg: unknown, buffers: WireBuffer[]): void {
    const reply = parseReply(msg);
    if (reply === null) {
      this.#fail(id, new ProtocolError("BadReply", `malformed reply to ${pending.method}`), false);
      return;
    }
    if (!reply.ok) {
      this.#fail(id, ProtocolError.from(reply.error), false);
      return;
    }
    let result: unknown;
    try {
      result = parseResult(pending.method, reply.result);
    } catch (e) {
      const why = e instanceof ShapeError ? e.message : String(e);
      this.#fail(
        id,
        new ProtocolError("BadReply", `bad reply to ${pending.method}: ${why}`),
        false,
      );
      return;
    }
    pending.finish();
    pending.resolve({ result, buffers });
  }
}
