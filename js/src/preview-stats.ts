/**
 * The statistics of a preview as text and SVG: the values formatted by dtype, what the
 * statistics describe (the whole tensor or a selection of it), the label/value pairs, the
 * histogram (a bar per bin, or per value) and the note of the dtype shown.
 */

import type { DecodedTensor, PreviewData } from "./data-source";
import { el, svg } from "./dom";
import { formatCount } from "./format";
import { dimSize } from "./preview-index";
import type { PreviewStats } from "./protocol";

/** One value as text: 6 significant digits for floats, exact integers, True/False. */
export function formatValue(value: number | bigint | undefined, dtype: string): string {
  if (value === undefined) return "";
  if (typeof value === "bigint") return value.toString();
  if (dtype === "bool") return value ? "True" : "False";
  if (Number.isNaN(value)) return "nan";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  if (!dtype.startsWith("float")) return String(value);
  const size = Math.abs(value);
  if (size !== 0 && (size >= 1e6 || size < 1e-4)) {
    return value.toExponential(5).replace(/\.?0+e/, "e");
  }
  return String(Number(value.toPrecision(6)));
}

function statText(value: number | null): string {
  return value === null ? "—" : formatValue(value, "float64");
}

/** A min or max: a whole number (every min and max of an integer leaf) shown exactly. */
function extremeText(value: number | null): string {
  return value !== null && Number.isSafeInteger(value) ? String(value) : statText(value);
}

/** The corner of the table: "row" for a matrix shown as it lies, else which dims are
 * rows and columns ("d2 \\ d3"). */
export function statsScope(data: PreviewData): string {
  const count = data.selection.shape.reduce((a, b) => a * b, 1);
  const written = data.rows?.scope === "written" && data.rows ? data.rows.written : null;
  const rowSize = data.shape.slice(1).reduce((a, b) => a * b, 1);
  const all = written !== null ? written * rowSize : data.shape.reduce((a, b) => a * b, 1);
  const whole = data.selection.dims.every(
    (d, i) =>
      d.kept &&
      d.step === 1 &&
      d.start === 0 &&
      dimSize(d) === (i === 0 && written !== null ? written : data.shape[i]),
  );
  const of = written !== null ? "written rows" : "tensor";
  if (whole) return `Statistics of the whole ${of}: ${formatCount(all)} values`;
  return `Statistics of ${data.selection.index}: ${formatCount(count)} of ${formatCount(all)} values`;
}

/** The statistics as label/value pairs that wrap to the panel's width; mean, std, NaN
 * and Inf are left out where the kernel sends null (they make no sense for the dtype). */
export function statsTable(stats: PreviewStats): HTMLElement {
  const box = el("div", "tdview-stats");
  const optional = (label: string, value: number | null, text: (v: number) => string) =>
    value === null ? [] : [[label, text(value)] as [string, string]];
  const entries: [string, string][] = [
    ["min", extremeText(stats.min)],
    ["max", extremeText(stats.max)],
    ...optional("mean", stats.mean, statText),
    ...optional("std", stats.std, statText),
    ...optional("NaN", stats.nan, formatCount),
    ...optional("Inf", stats.inf, formatCount),
    ["count", formatCount(stats.count)],
  ];
  for (const [label, value] of entries) {
    const item = el("div", "tdview-stat");
    const v = el("span", "tdview-stat-value", value);
    if ((label === "NaN" || label === "Inf") && value !== "0") v.classList.add("tdview-warn");
    item.append(el("span", "tdview-stat-label", label), v);
    box.append(item);
  }
  return box;
}

const HIST_HEIGHT = 100;

export interface HistogramOptions {
  /** A bar per value (`counts[i]` elements equal `values[i]`) instead of bins. */
  values?: DecodedTensor | null;
  /** The dtype the values are written in (default float64). */
  dtype?: string;
  /** Bar heights by log(1 + count), so that rare values stay visible. */
  log?: boolean;
}

/** The most per-value bars labelled under the chart (more: only in their tooltips). */
const MAX_VALUE_LABELS = 16;

/** Bars for `counts` over `edges` (one more edge than counts), or one per value of
 * `options.values`, as an SVG figure. */
export function histogram(
  edges: DecodedTensor,
  counts: DecodedTensor,
  options: HistogramOptions = {},
): HTMLElement {
  const n = counts.data.length;
  const count = (i: number) => Number(counts.data[i] ?? 0);
  const edge = (i: number) => Number(edges.data[i] ?? 0);
  const values = options.values ?? null;
  const valueText = (i: number) =>
    formatValue(Number(values?.data[i] ?? 0), options.dtype ?? "float64");
  const scale = options.log ? (c: number) => Math.log1p(c) : (c: number) => c;
  let max = 0;
  for (let i = 0; i < n; i++) max = Math.max(max, count(i));
  const figure = el("figure", "tdview-histogram");
  const chart = svg("svg", {
    viewBox: `0 0 ${n} ${HIST_HEIGHT}`,
    preserveAspectRatio: "none",
    role: "img",
    "aria-label": values
      ? `Histogram: ${n} values from ${valueText(0)} to ${valueText(n - 1)}`
      : `Histogram: ${n} bins from ${formatValue(edge(0), "float64")} to ${formatValue(edge(n), "float64")}`,
  });
  chart.append(
    svg("rect", { class: "tdview-histogram-bg", x: 0, y: 0, width: n, height: HIST_HEIGHT }),
  );
  for (let i = 0; i < n; i++) {
    const c = count(i);
    // Any non-empty bin stays visible, however small next to the tallest.
    const h = c === 0 ? 0 : Math.max(1.5, (scale(c) / scale(max)) * HIST_HEIGHT);
    const bar = svg("rect", {
      class: "tdview-histogram-bar",
      x: i + 0.08,
      y: HIST_HEIGHT - h,
      width: 0.84,
      height: h,
    });
    const title = svg("title");
    title.textContent = values
      ? `${valueText(i)}: ${formatCount(c)}`
      : `[${formatValue(edge(i), "float64")}, ${formatValue(edge(i + 1), "float64")}): ${formatCount(c)}`;
    bar.append(title);
    chart.append(bar);
  }
  const axis = el("figcaption", "tdview-histogram-axis");
  const scaleNote = options.log ? " · log scale" : "";
  if (values) {
    const labels = el("div", "tdview-histogram-values");
    labels.style.gridTemplateColumns = `repeat(${n}, 1fr)`;
    if (n <= MAX_VALUE_LABELS) {
      for (let i = 0; i < n; i++) labels.append(el("span", "", valueText(i)));
      figure.append(chart, labels);
    } else {
      figure.append(chart);
    }
    axis.append(
      el("span", "", valueText(0)),
      el(
        "span",
        "tdview-histogram-max",
        `${n} value${n === 1 ? "" : "s"} · tallest ${formatCount(max)}${scaleNote}`,
      ),
      el("span", "", valueText(n - 1)),
    );
    figure.append(axis);
    return figure;
  }
  axis.append(
    el("span", "", formatValue(edge(0), "float64")),
    el("span", "tdview-histogram-max", `${n} bins · tallest ${formatCount(max)}${scaleNote}`),
    el("span", "", formatValue(edge(n), "float64")),
  );
  figure.append(chart, axis);
  return figure;
}

/** Which dtype the values are shown in, when it is not the leaf's own. */
export function dtypeNote(data: PreviewData): string {
  if (data.display_dtype === data.dtype) return "";
  if (data.dtype.startsWith("complex"))
    return `shown as |z| in ${data.display_dtype} (stored as ${data.dtype})`;
  return `shown as ${data.display_dtype} (stored as ${data.dtype})`;
}
