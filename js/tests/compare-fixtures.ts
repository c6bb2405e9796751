/** In-memory comparisons for the compare view's tests, and a fake kernel answering the
 * `diff_*` methods of a `FakeModel` from a `MemoryCompareSource`. */

import {
  type MemoryCompareOptions,
  MemoryCompareSource,
  type MemoryDiffRow,
} from "../src/compare-memory-source";
import type { CompareState, DiffLevel, DiffSummary, ValueStats } from "../src/compare-protocol";
import { type DecodedTensor, ProtocolError } from "../src/data-source";
import { MemoryDataSource, type MemoryNode } from "../src/memory-data-source";
import { parseCancel, parseRequest, type Request } from "../src/protocol";
import type { FakeModel } from "./fake-model";

export function stats(differing: number, numel: number, maxAbs: number): ValueStats {
  return {
    numel,
    equal: differing === 0,
    differing,
    max_abs: maxAbs,
    mean_abs: maxAbs / 2,
    rel_l2: differing ? 0.01 : 0,
    cosine: differing ? 0.9999 : 1,
    nan_a: 0,
    nan_b: 0,
    nan_appeared: 0,
    nan_disappeared: 0,
    inf_a: 0,
    inf_b: 0,
    inf_appeared: 0,
    inf_disappeared: 0,
    bytes_only: false,
  };
}

const node = (path: string[], extra: MemoryDiffRow = { path }) => ({
  ...extra,
  path,
  kind: "tensordict",
});
const leaf = (path: string[], extra: Partial<MemoryDiffRow> = {}): MemoryDiffRow => ({
  path,
  ...extra,
});

/**
 * A model before and after one optimizer step, with one key added:
 *
 * root
 * ├── model            layer1/{weight, bias}, layer2/{weight, bias}, head/{weight, scale +}
 * ├── optim            state/{exp_avg, step}, lr (removed), momentum (renamed from beta)
 * └── config           epochs (same)
 *
 * At the metadata level only `scale` (added), `lr` (removed) and `momentum` (renamed)
 * differ; compared by values, every weight and `exp_avg` and `step` changed too.
 */
export function stepRows(level: DiffLevel = "metadata"): MemoryDiffRow[] {
  const changed = (n: number, max: number): Partial<MemoryDiffRow> =>
    level === "values"
      ? { status: "changed", changes: ["content"], values: stats(n, n, max) }
      : level === "fingerprint"
        ? { status: "changed", changes: ["content"], fingerprint: "differs" }
        : {};
  const same: Partial<MemoryDiffRow> =
    level === "values"
      ? { values: stats(0, 4, 0) }
      : level === "fingerprint"
        ? { fingerprint: "crc_equal" }
        : {};
  return [
    node([]),
    node(["model"]),
    node(["model", "layer1"]),
    leaf(["model", "layer1", "weight"], changed(16, 0.01)),
    leaf(["model", "layer1", "bias"], same),
    node(["model", "layer2"]),
    leaf(["model", "layer2", "weight"], changed(16, 0.02)),
    leaf(["model", "layer2", "bias"], same),
    node(["model", "head"]),
    leaf(["model", "head", "weight"], changed(8, 0.03)),
    leaf(["model", "head", "scale"], { status: "added" }),
    node(["optim"]),
    node(["optim", "state"]),
    leaf(["optim", "state", "exp_avg"], changed(16, 0.001)),
    // its numbers are read at every level but metadata, as the kernel reads them
    leaf(["optim", "state", "step"], {
      ...changed(1, 1),
      ...(level === "metadata" ? {} : { scalars: [1000, 1001] }),
    }),
    leaf(["optim", "lr"], { status: "removed" }),
    leaf(["optim", "momentum"], {
      status: "renamed",
      renamed_from: ["optim", "beta"],
      fingerprint: "crc_equal",
    }),
    node(["config"]),
    leaf(["config", "epochs"], same),
  ];
}

/** The leaf trees of each side (previews and loads): `model/layer1/weight` and
 * `model/head/scale` with values, b's weight one step on. */
export function sideTrees(): { a: MemoryNode; b: MemoryNode } {
  const weight = (shift: number) => Array.from({ length: 16 }, (_, i) => i / 10 + shift);
  const tree = (shift: number, extra: MemoryNode[]): MemoryNode => ({
    key: "",
    children: [
      {
        key: "model",
        children: [
          {
            key: "layer1",
            children: [{ key: "weight", shape: [4, 4], data: weight(shift) }],
          },
          { key: "head", children: extra },
        ],
      },
    ],
  });
  return {
    a: tree(0, []),
    b: tree(0.01, [{ key: "scale", shape: [4], data: [1, 1, 1, 1] }]),
  };
}

export function stepSource(options: MemoryCompareOptions = {}): MemoryCompareSource {
  const trees = sideTrees();
  return new MemoryCompareSource(stepRows(), {
    sourceA: "runs/step_1000",
    sourceB: "runs/step_1001.tdz",
    refined: stepRows,
    sides: {
      a: new MemoryDataSource(trees.a, { source: "runs/step_1000" }),
      b: new MemoryDataSource(trees.b, { source: "runs/step_1001.tdz" }),
    },
    ...options,
  });
}

export function compareState(source: MemoryCompareSource): CompareState {
  return {
    source_a: "runs/step_1000",
    source_b: "runs/step_1001.tdz",
    summary: source.summary,
    root: source.root,
  };
}

type Emit = (msg: Record<string, unknown>, buffers?: DataView[]) => void;

function wire(tensor: DecodedTensor, buffers: DataView[]) {
  const bytes = new Uint8Array(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  buffers.push(new DataView(bytes.slice().buffer));
  return { dtype: tensor.dtype, shape: tensor.shape, buffer: buffers.length - 1 };
}

/** A decoded preview as the kernel sends it: BufferRefs in the JSON, bytes in buffers. */
function wirePreview(data: Record<string, unknown> | null, buffers: DataView[]): unknown {
  if (!data) return null;
  const out: Record<string, unknown> = { ...data };
  const tensor = (v: unknown) => v as DecodedTensor;
  out.slice = wire(tensor(data.slice), buffers);
  const h = data.histogram as Record<string, unknown> | null;
  if (h) {
    out.histogram = {
      ...h,
      edges: wire(tensor(h.edges), buffers),
      counts: wire(tensor(h.counts), buffers),
      ...(h.values ? { values: wire(tensor(h.values), buffers) } : {}),
    };
  }
  const heat = data.heatmap as Record<string, unknown> | null;
  if (heat) out.heatmap = { ...heat, cells: wire(tensor(heat.cells), buffers) };
  return out;
}

async function answer(
  memory: MemoryCompareSource,
  req: Request,
  emit: Emit,
  onRefined?: (summary: DiffSummary) => void,
): Promise<{ result: unknown; buffers: DataView[] }> {
  const progress = (p: object) => emit({ kind: "tdview:progress", v: 1, id: req.id, ...p });
  const none: DataView[] = [];
  switch (req.method) {
    case "diff_children": {
      const { path, offset, limit, only_changed } = req.params;
      return {
        result: await memory.children(path, offset, limit, only_changed ?? false),
        buffers: none,
      };
    }
    case "diff_node":
      return { result: await memory.node(req.params.path), buffers: none };
    case "diff_refine": {
      const summary = await memory.refine(req.params.path, req.params.level, {
        onProgress: progress,
      });
      onRefined?.(summary); // as the kernel: the `compare` trait changes before the reply
      return { result: summary, buffers: none };
    }
    case "diff_preview": {
      const data = await memory.preview(req.params.path, req.params.rows);
      const buffers: DataView[] = [];
      const a = wirePreview(data.a as unknown as Record<string, unknown> | null, buffers);
      const b = wirePreview(data.b as unknown as Record<string, unknown> | null, buffers);
      return { result: { path: data.path, a, b }, buffers };
    }
    case "diff_load": {
      const { side, ...params } = req.params;
      return { result: await memory.load(side, params, progress), buffers: none };
    }
    case "devices":
      return { result: await memory.devices(), buffers: none };
    default:
      throw new ProtocolError("NoCheckpointError", `${req.method}: a compare view answers diff_*`);
  }
}

export interface FakeCompareKernel {
  requests: Request[];
  cancels: number[];
}

/** Answers the requests a `FakeModel` sends from `memory` (over the wire format). */
export function attachCompareKernel(
  model: FakeModel,
  memory: MemoryCompareSource,
  onRefined?: (summary: DiffSummary) => void,
): FakeCompareKernel {
  const kernel: FakeCompareKernel = { requests: [], cancels: [] };
  model.onSend = (msg) => {
    const cancel = parseCancel(msg);
    if (cancel) {
      kernel.cancels.push(cancel.id);
      return;
    }
    const req = parseRequest(msg);
    if (!req) return;
    kernel.requests.push(req);
    const base = { kind: "tdview:reply", v: 1, id: req.id };
    const emit: Emit = (m, buffers = []) => model.emit("msg:custom", m, buffers);
    answer(memory, req, emit, onRefined).then(
      ({ result, buffers }) => emit({ ...base, ok: true, result }, buffers),
      (e: unknown) => {
        const error =
          e instanceof ProtocolError
            ? { type: e.type, message: e.message, path: e.path }
            : { type: "Error", message: String(e), path: null };
        emit({ ...base, ok: false, error }, []);
      },
    );
  };
  return kernel;
}
