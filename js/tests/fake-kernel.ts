/**
 * A kernel in a test: answers the requests a `FakeModel` sends, over the wire format,
 * with the results of a `MemoryDataSource`.
 */

import { type DecodedTensor, ProtocolError } from "../src/data-source";
import type { MemoryDataSource } from "../src/memory-data-source";
import { type PreviewParams, parseCancel, parseRequest, type Request } from "../src/protocol";
import type { FakeModel } from "./fake-model";

type Emit = (msg: Record<string, unknown>, buffers?: DataView[]) => void;

function wire(tensor: DecodedTensor, buffers: DataView[]) {
  const bytes = new Uint8Array(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  buffers.push(new DataView(bytes.slice().buffer));
  return { dtype: tensor.dtype, shape: tensor.shape, buffer: buffers.length - 1 };
}

/** A preview reply as the kernel sends it: BufferRefs in the JSON, bytes in buffers. */
async function previewReply(memory: MemoryDataSource, params: PreviewParams) {
  const { path, rows, rows_scope: scope, index, offset, stats, heatmap: cells } = params;
  const data = await memory.preview(path, rows, {
    ...(scope ? { rowsScope: scope } : {}),
    ...(index != null ? { index } : {}),
    ...(offset !== undefined ? { offset } : {}),
    ...(stats !== undefined ? { stats } : {}),
    ...(cells ? { heatmap: cells } : {}),
  });
  const buffers: DataView[] = [];
  const slice = wire(data.slice, buffers);
  const h = data.histogram;
  const histogram = h && {
    edges: wire(h.edges, buffers),
    counts: wire(h.counts, buffers),
    values: h.values && wire(h.values, buffers),
  };
  const m = data.heatmap;
  const heatmap = m && { ...m, cells: wire(m.cells, buffers) };
  return { result: { ...data, slice, histogram, heatmap }, buffers };
}

function answer(memory: MemoryDataSource, req: Request, emit: Emit): Promise<unknown> {
  switch (req.method) {
    case "children":
      return memory.children(req.params.path, req.params.offset, req.params.limit);
    case "node":
      return memory.node(req.params.path);
    case "search":
      return memory.search(req.params.pattern, req.params.limit, {
        offset: req.params.offset ?? 0,
      });
    case "devices":
      return memory.devices();
    case "load":
      return memory.load(req.params, (p) =>
        emit({ kind: "tdview:progress", v: 1, id: req.id, ...p }),
      );
    case "preview":
      return previewReply(memory, req.params);
    default: // the compare view's diff_* methods: compare-fixtures.ts answers them
      return Promise.reject(new ProtocolError("NoCheckpointError", `${req.method}: no comparison`));
  }
}

export interface FakeKernel {
  requests: Request[];
  cancels: number[];
  invalid: unknown[];
  /** The paths of `tdview:select` reports; each is echoed back as the `selected` trait. */
  selects: unknown[];
}

export function attachKernel(model: FakeModel, memory: MemoryDataSource): FakeKernel {
  const kernel: FakeKernel = { requests: [], cancels: [], invalid: [], selects: [] };
  model.onSend = (msg) => {
    if (typeof msg === "object" && msg !== null && "kind" in msg && msg.kind === "tdview:select") {
      const path = "path" in msg ? msg.path : undefined;
      kernel.selects.push(path);
      setTimeout(() => model.change("selected", path), 5); // as the kernel's trait echo
      return;
    }
    const cancel = parseCancel(msg);
    if (cancel) {
      kernel.cancels.push(cancel.id);
      return;
    }
    const req = parseRequest(msg);
    if (!req) {
      kernel.invalid.push(msg);
      return;
    }
    kernel.requests.push(req);
    const base = { kind: "tdview:reply", v: 1, id: req.id };
    const emit: Emit = (msg, buffers = []) => model.emit("msg:custom", msg, buffers);
    answer(memory, req, emit).then(
      (value) => {
        const { result, buffers } =
          req.method === "preview"
            ? (value as { result: unknown; buffers: DataView[] })
            : { result: value, buffers: [] };
        emit({ ...base, ok: true, result }, buffers);
      },
      (e: unknown) => {
        const error =
          e instanceof ProtocolError
            ? { type: e.type, message: e.message, path: e.path }
            : { type: "Error", message: String(e), path: null };
        model.emit("msg:custom", { ...base, ok: false, error }, []);
      },
    );
  };
  return kernel;
}
