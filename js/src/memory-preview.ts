/**
 * A preview computed from an in-memory leaf, as the kernel computes one
 * (`tdview/protocol/_preview.py`, `_selection.py`, `_stats.py`, `_heatmap.py`): the
 * selection an index picks, statistics of that selection (null where they mean nothing
 * for the dtype), a histogram (a bar per value for integers and booleans with at most 64
 * distinct values, else 64 equal bins), the plane of the selection shown (two of its
 * dims, the others at a position each), a table of the plane's rows from `offset`, and
 * a heatmap of the plane in block means. Used by `MemoryDataSource`.
 */

import type { BufferDtype, TypedArray } from "./buffers";
import type { PreviewData } from "./data-source";
import {
  dimSize,
  type IndexPart,
  indexText,
  PreviewIndexError,
  parseIndex,
  selectIndex,
} from "./preview-index";
import type {
  HeatmapParams,
  PlaneParams,
  PreviewDim,
  PreviewPlane,
  PreviewStats,
} from "./protocol";

export const BINS = 64;
export const MAX_COLS = 50;

/** The dtype a kernel sends for each leaf dtype (see `_preview.py`). */
export const DISPLAY_DTYPES: Record<string, BufferDtype> = {
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

export function typedArray(dtype: BufferDtype, values: readonly number[]): TypedArray {
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

const f64 = (values: readonly number[], shape: number[]) => ({
  dtype: "float64",
  shape,
  data: Float64Array.from(values),
});

/** The least and greatest of `values` (a loop: spreading a large array into
 * Math.min overflows the call stack). */
function extremes(values: readonly number[]): [number, number] {
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  for (const v of values) {
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  return [lo, hi];
}

/** Statistics as the kernel sends them for a leaf of `dtype` (`_stats.py`). */
export function statsOf(values: readonly number[], dtype: string): PreviewStats {
  const boolean = dtype === "bool";
  const exact = boolean || /^u?int/.test(dtype);
  const finite = values.filter(Number.isFinite);
  const n = finite.length;
  const mean = finite.reduce((a, b) => a + b, 0) / (n || 1);
  const m2 = finite.reduce((a, b) => a + (b - mean) ** 2, 0);
  const nan = values.filter(Number.isNaN).length;
  return {
    min: n ? extremes(finite)[0] : null,
    max: n ? extremes(finite)[1] : null,
    mean: n && !boolean ? mean : null,
    std: n > 1 && !boolean ? Math.sqrt(m2 / (n - 1)) : null,
    nan: exact ? null : nan,
    inf: exact ? null : values.length - n - nan,
    count: values.length,
  };
}

/** A bar per value for integers and booleans with at most `BINS` distinct values, else
 * `BINS` equal bins over [min, max] of the finite values; null when there is none. */
export function histogramOf(values: readonly number[], dtype: string): PreviewData["histogram"] {
  const finite = values.filter(Number.isFinite);
  if (finite.length === 0) return null;
  const exact = dtype === "bool" || /^u?int/.test(dtype);
  const distinct = [...new Set(finite)].sort((a, b) => a - b);
  if (exact && distinct.length <= BINS) {
    const at = new Map(distinct.map((v, i) => [v, i]));
    const counts = new BigInt64Array(distinct.length);
    for (const v of finite) {
      const i = at.get(v) as number;
      counts[i] = (counts[i] ?? 0n) + 1n;
    }
    const mids = distinct.slice(1).map((v, i) => (v + (distinct[i] as number)) / 2);
    const edges = [(distinct[0] as number) - 0.5, ...mids, (distinct.at(-1) as number) + 0.5];
    return {
      edges: f64(edges, [edges.length]),
      counts: { dtype: "int64", shape: [counts.length], data: counts },
      values: f64(distinct, [distinct.length]),
    };
  }
  let lo = distinct[0] as number;
  let hi = distinct.at(-1) as number;
  if (lo === hi) {
    lo -= 0.5;
    hi += 0.5;
  }
  const edges = Array.from({ length: BINS + 1 }, (_, i) => lo + ((hi - lo) * i) / BINS);
  const counts = new BigInt64Array(BINS);
  for (const v of finite) {
    const i = Math.min(BINS - 1, Math.floor(((v - lo) / (hi - lo)) * BINS));
    counts[i] = (counts[i] ?? 0n) + 1n;
  }
  return {
    edges: f64(edges, [BINS + 1]),
    counts: { dtype: "int64", shape: [BINS], data: counts },
    values: null,
  };
}

/** The selected values of a row-major leaf, in C order of the selection, and its shape. */
export function selected(
  data: readonly number[],
  shape: readonly number[],
  dims: readonly PreviewDim[],
): { values: number[]; shape: number[] } {
  const strides = shape.map((_, d) => shape.slice(d + 1).reduce((a, b) => a * b, 1));
  let flat = [0];
  dims.forEach((dim, d) => {
    const stride = strides[d] as number;
    const next: number[] = [];
    for (const base of flat) {
      for (let p = dim.start; p < dim.stop; p += dim.step) next.push(base + p * stride);
    }
    flat = next;
  });
  return {
    values: flat.map((i) => data[i] ?? 0),
    shape: dims.filter((d) => d.kept).map(dimSize),
  };
}

/** Rows `offset` to `offset + rows` and `MAX_COLS` columns from `colOffset` of a plane
 * (0-d, 1-d or 2-d) as the kernel's table. */
export function tableOf(
  values: readonly number[],
  shape: readonly number[],
  rows: number,
  offset = 0,
  colOffset = 0,
) {
  if (shape.length === 0) return { values: values.slice(0, 1), shape: [] as number[] };
  const first = Math.min(offset, shape[0] ?? 0);
  const nRows = Math.max(0, Math.min(rows, (shape[0] ?? 0) - first));
  if (shape.length === 1) return { values: values.slice(first, first + nRows), shape: [nRows] };
  const width = shape[1] ?? 0;
  const from = Math.min(colOffset, width);
  const cols = Math.min(width - from, MAX_COLS);
  const cells: number[] = [];
  for (let r = first; r < first + nRows; r++) {
    cells.push(...values.slice(r * width + from, r * width + from + cols));
  }
  return { values: cells, shape: [nRows, cols] };
}

/** Block means of a plane (`_heatmap.py`; 1-d: one row); null for 0-d or empty. */
export function heatmapOf(
  values: readonly number[],
  shape: readonly number[],
  size: HeatmapParams,
): PreviewData["heatmap"] {
  if (shape.length === 0) return null;
  const R = shape.length === 1 ? 1 : (shape[0] as number);
  const C = (shape.length === 1 ? shape[0] : shape[1]) as number;
  if (R === 0 || C === 0) return null;
  const h = Math.min(size.rows, R);
  const w = Math.min(size.cols, C);
  const sums = new Float64Array(h * w);
  const counts = new Float64Array(h * w);
  for (let r = 0; r < R; r++) {
    for (let c = 0; c < C; c++) {
      const v = values[r * C + c] as number;
      if (!Number.isFinite(v)) continue;
      const cell = Math.floor((r * h) / R) * w + Math.floor((c * w) / C);
      sums[cell] = (sums[cell] ?? 0) + v;
      counts[cell] = (counts[cell] ?? 0) + 1;
    }
  }
  const cells = Float32Array.from(sums, (s, i) => s / (counts[i] as number));
  const finite = [...cells].filter(Number.isFinite);
  return {
    cells: { dtype: "float32", shape: [h, w], data: cells },
    of: [R, C],
    min: finite.length ? extremes(finite)[0] : null,
    max: finite.length ? extremes(finite)[1] : null,
  };
}

/** The parts of a preview's selection: its index, or all. */
export function selectionParts(index: string | undefined): IndexPart[] {
  return index !== undefined ? parseIndex(index) : [];
}

/** The plane of the selection `dims` shown (`_selection.plane_of`): `asked`, checked,
 * or the last two dims kept, the others at 0; throws `PreviewIndexError`. */
export function planeOf(
  dims: readonly PreviewDim[],
  asked: PlaneParams | undefined,
  shape: readonly number[],
): Omit<PreviewPlane, "offset" | "col_offset"> {
  const kept = dims.flatMap((d, i) => (d.kept ? [i] : []));
  if (!asked || kept.length < 2) {
    const rows = kept.length >= 2 ? (kept.at(-2) as number) : (kept[0] ?? null);
    const cols = kept.length >= 2 ? (kept.at(-1) as number) : null;
    const at = dims.map((_, d) => (kept.includes(d) && d !== rows && d !== cols ? 0 : null));
    return { rows, cols, at };
  }
  const where = `the leaf's shape is [${shape.join(", ")}], the selection ${indexText(dims)}`;
  for (const [name, d] of [
    ["rows", asked.rows],
    ["cols", asked.cols],
  ] as const) {
    if (!kept.includes(d)) {
      throw new PreviewIndexError(
        `plane ${name}: dim ${d} is not one the selection keeps ([${kept.join(", ")}]); ${where}`,
      );
    }
  }
  if (asked.rows === asked.cols) {
    throw new PreviewIndexError(`plane: dim ${asked.rows} is both rows and columns; ${where}`);
  }
  if (asked.at.length !== dims.length) {
    throw new PreviewIndexError(
      `plane at: ${asked.at.length} positions for a leaf of ${dims.length} dims; ${where}`,
    );
  }
  const at = dims.map((dim, d) => {
    if (!dim.kept || d === asked.rows || d === asked.cols) return null;
    const position = asked.at[d] ?? 0;
    if (position >= dimSize(dim)) {
      throw new PreviewIndexError(
        `plane at: position ${position} of dim ${d} is past the ${dimSize(dim)} positions selected; ${where}`,
      );
    }
    return position;
  });
  return { rows: asked.rows, cols: asked.cols, at };
}

/** The plane's values (row-major) and shape, from the selection's values (C order over
 * its kept dims). */
export function planeValues(
  values: readonly number[],
  dims: readonly PreviewDim[],
  plane: Omit<PreviewPlane, "offset" | "col_offset">,
): { values: number[]; shape: number[] } {
  const kept = dims.flatMap((d, i) => (d.kept ? [i] : []));
  const sizes = kept.map((d) => dimSize(dims[d] as PreviewDim));
  const strides = sizes.map((_, k) => sizes.slice(k + 1).reduce((a, b) => a * b, 1));
  let base = 0;
  kept.forEach((d, k) => {
    base += (plane.at[d] ?? 0) * (strides[k] as number);
  });
  const axis = (d: number | null) => (d === null ? -1 : kept.indexOf(d));
  const r = axis(plane.rows);
  const c = axis(plane.cols);
  if (r < 0) return { values: values.slice(0, 1), shape: [] };
  const nr = sizes[r] as number;
  if (c < 0) {
    const out = Array.from(
      { length: nr },
      (_, i) => values[base + i * (strides[r] as number)] ?? 0,
    );
    return { values: out, shape: [nr] };
  }
  const nc = sizes[c] as number;
  const out: number[] = [];
  for (let i = 0; i < nr; i++) {
    for (let j = 0; j < nc; j++) {
      out.push(values[base + i * (strides[r] as number) + j * (strides[c] as number)] ?? 0);
    }
  }
  return { values: out, shape: [nr, nc] };
}

export { selectIndex };
