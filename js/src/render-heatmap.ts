/**
 * A 2-D leaf (or the table of a wider one: dim 0 rows, the rest flattened) as a heatmap:
 * the kernel's block means (`PreviewData.heatmap`, at most 1024 x 1024 cells) drawn on a
 * canvas, one pixel per cell, scaled up without smoothing.
 *
 * The colour scale runs from the theme's background to its accent, read from JupyterLab's
 * `--jp-*` variables (with fallbacks for other front ends), so a dark theme gets a dark
 * low end and a light theme a light one; cells with no finite value are transparent.
 */

import type { PreviewData } from "./data-source";
import { el } from "./dom";
import { formatCount } from "./format";

const short = (v: number | null) => (v === null ? "—" : String(Number(v.toPrecision(4))));

export type Rgb = [number, number, number];

/** The colour ends of the scale: the CSS variable first, then its fallback. */
export const LOW_COLOR = ["--jp-layout-color1", "#ffffff"] as const;
export const HIGH_COLOR = ["--jp-brand-color1", "#1976d2"] as const;

/** `#rgb`, `#rrggbb` or `rgb(r, g, b)` / `rgba(…)` as [r, g, b], else null. */
export function parseColor(text: string): Rgb | null {
  const t = text.trim().toLowerCase();
  const short = /^#([0-9a-f])([0-9a-f])([0-9a-f])$/.exec(t);
  if (short) return [1, 2, 3].map((i) => Number.parseInt(`${short[i]}${short[i]}`, 16)) as Rgb;
  const long = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})(?:[0-9a-f]{2})?$/.exec(t);
  if (long) return [1, 2, 3].map((i) => Number.parseInt(long[i] as string, 16)) as Rgb;
  const fn = /^rgba?\(\s*([\d.]+)[\s,]+([\d.]+)[\s,]+([\d.]+)/.exec(t);
  if (fn) return [1, 2, 3].map((i) => Math.round(Number(fn[i]))) as Rgb;
  return null;
}

/** A theme colour: the variable's value on `element` when it parses, else `fallback`. */
export function themeColor(element: Element | null, [name, fallback]: readonly [string, string]) {
  const value = element ? getComputedStyle(element).getPropertyValue(name) : "";
  return parseColor(value) ?? (parseColor(fallback) as Rgb);
}

/** RGBA pixels of `cells` (row-major), each cell mixed from `low` to `high` by where it
 * lies in [min, max]; NaN cells transparent. */
export function heatmapPixels(
  cells: ArrayLike<number>,
  min: number,
  max: number,
  low: Rgb,
  high: Rgb,
): Uint8ClampedArray {
  const out = new Uint8ClampedArray(cells.length * 4);
  const span = max > min ? max - min : 1;
  for (let i = 0; i < cells.length; i++) {
    const v = cells[i] as number;
    if (!Number.isFinite(v)) continue; // alpha 0
    const t = Math.min(1, Math.max(0, (v - min) / span));
    for (let c = 0; c < 3; c++) {
      out[i * 4 + c] = (low[c] as number) + ((high[c] as number) - (low[c] as number)) * t;
    }
    out[i * 4 + 3] = 255;
  }
  return out;
}

/** The heatmap of a preview as a figure (a canvas and its legend), or null without one. */
export function renderHeatmap(
  data: PreviewData,
  themed: Element | null = null,
): HTMLElement | null {
  const heatmap = data.heatmap;
  if (!heatmap) return null;
  const [h = 0, w = 0] = heatmap.cells.shape;
  const [rows = 0, cols = 0] = heatmap.of;
  const figure = el("figure", "tdview-heatmap");
  const canvas = el("canvas", "tdview-heatmap-canvas");
  canvas.width = w;
  canvas.height = h;
  canvas.setAttribute("role", "img");
  const range =
    heatmap.min === null || heatmap.max === null
      ? "no finite value"
      : `${short(heatmap.min)} to ${short(heatmap.max)}`;
  canvas.setAttribute(
    "aria-label",
    `Heatmap of ${formatCount(rows)} x ${formatCount(cols)} values in ${h} x ${w} cells, ${range}`,
  );
  const low = themeColor(themed, LOW_COLOR);
  const high = themeColor(themed, HIGH_COLOR);
  const context = w > 0 && h > 0 ? canvas.getContext?.("2d") : null;
  if (context && heatmap.min !== null && heatmap.max !== null) {
    const pixels = heatmapPixels(
      heatmap.cells.data as ArrayLike<number>,
      heatmap.min,
      heatmap.max,
      low,
      high,
    );
    const image = context.createImageData(w, h);
    image.data.set(pixels);
    context.putImageData(image, 0, 0);
  }
  const legend = el("figcaption", "tdview-heatmap-legend");
  const ramp = el("span", "tdview-heatmap-ramp");
  ramp.style.background = `linear-gradient(to right, rgb(${low.join(",")}), rgb(${high.join(",")}))`;
  const blocks =
    rows > h || cols > w ? ` · means of blocks of ${formatCount(rows)} x ${formatCount(cols)}` : "";
  legend.append(
    el("span", "", short(heatmap.min)),
    ramp,
    el("span", "", short(heatmap.max)),
    el("span", "tdview-heatmap-size", `${h} x ${w} cells${blocks}`),
  );
  figure.append(canvas, legend);
  return figure;
}
