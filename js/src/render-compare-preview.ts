/**
 * The compare view's preview of a leaf on both sides: each side's statistics and
 * histogram (over the whole leaf, as the normal preview computes them) and a histogram of
 * `b − a` over the values both tables show (computed here, from the first rows only: the
 * value statistics of the whole leaf are what "Compute value statistics" asks for).
 */

import type { CompareState } from "./compare-protocol";
import type { DiffPreviewData } from "./compare-source";
import type { DecodedTensor, PreviewData } from "./data-source";
import { el } from "./dom";
import { formatCount } from "./format";
import { formatValue, histogram, statsTable } from "./render-preview";

/** The last segment of a path as the user gave it. */
export function baseName(source: string): string {
  const parts = source.split(/[\\/]/).filter(Boolean);
  return parts[parts.length - 1] ?? source;
}

/** Bins of the histogram of the difference over the values shown. */
const DIFF_BINS = 32;

/** `b − a` over the values both previews show (the same table shape), else null. */
export function sliceDifference(a: PreviewData, b: PreviewData): Float64Array | null {
  const sa = a.slice;
  const sb = b.slice;
  if (JSON.stringify(sa.shape) !== JSON.stringify(sb.shape)) return null;
  if (JSON.stringify(a.shape) !== JSON.stringify(b.shape)) return null;
  const n = sa.data.length;
  if (n === 0 || n !== sb.data.length) return null;
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = Number(sb.data[i] ?? 0) - Number(sa.data[i] ?? 0);
  return out;
}

/** Equal bins over the finite values of `values`; null when none is finite. */
export function histogramOf(
  values: Float64Array,
  bins = DIFF_BINS,
): { edges: DecodedTensor; counts: DecodedTensor; maxAbs: number; finite: number } | null {
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  let finite = 0;
  let maxAbs = 0;
  for (const v of values) {
    if (!Number.isFinite(v)) continue;
    finite++;
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
    maxAbs = Math.max(maxAbs, Math.abs(v));
  }
  if (finite === 0) return null;
  if (lo === hi) {
    lo -= 0.5;
    hi += 0.5;
  }
  const edges = Float64Array.from({ length: bins + 1 }, (_, i) => lo + ((hi - lo) * i) / bins);
  const counts = new Float64Array(bins);
  for (const v of values) {
    if (!Number.isFinite(v)) continue;
    const i = Math.min(bins - 1, Math.floor(((v - lo) / (hi - lo)) * bins));
    counts[i] = (counts[i] ?? 0) + 1;
  }
  return {
    edges: { dtype: "float64", shape: [bins + 1], data: edges },
    counts: { dtype: "float64", shape: [bins], data: counts },
    maxAbs,
    finite,
  };
}

/** One side of the preview: its statistics (whole leaf) and histogram. */
function sideColumn(label: string, data: PreviewData | null): HTMLElement {
  const column = el("div", "tdview-compare-preview-side");
  column.append(el("h4", "tdview-compare-side-title", label));
  if (!data) {
    column.append(el("p", "tdview-note", "not on this side"));
    return column;
  }
  if (data.stats) column.append(statsTable(data.stats));
  if (data.histogram) column.append(histogram(data.histogram.edges, data.histogram.counts));
  return column;
}

/** The difference of the values both previews show, as a histogram. */
function differenceBox(preview: DiffPreviewData): HTMLElement | null {
  if (!preview.a || !preview.b) return null;
  const box = el("div", "tdview-compare-difference");
  const difference = sliceDifference(preview.a, preview.b);
  const shown = preview.a.slice.data.length;
  if (!difference) {
    box.append(el("p", "tdview-note", "The sides' shapes differ: no element-wise difference."));
    return box;
  }
  const found = histogramOf(difference);
  box.append(
    el(
      "h4",
      "tdview-compare-side-title",
      `b − a over the ${formatCount(shown)} value${shown === 1 ? "" : "s"} shown`,
    ),
  );
  if (!found) {
    box.append(el("p", "tdview-note", "No finite difference among the values shown."));
    return box;
  }
  box.append(
    el(
      "p",
      "tdview-note tdview-compare-difference-max",
      `max |b − a| ${formatValue(found.maxAbs, "float64")} over the values shown` +
        " (compute value statistics for the whole leaf)",
    ),
    histogram(found.edges, found.counts),
  );
  return box;
}

/** The side-by-side preview of a leaf. */
export function renderDiffPreview(preview: DiffPreviewData, state: CompareState): HTMLElement {
  const box = el("div", "tdview-compare-preview-result");
  const sides = el("div", "tdview-compare-preview-sides");
  sides.append(
    sideColumn(`a · ${baseName(state.source_a)}`, preview.a),
    sideColumn(`b · ${baseName(state.source_b)}`, preview.b),
  );
  box.append(sides);
  const difference = differenceBox(preview);
  if (difference) box.append(difference);
  return box;
}
