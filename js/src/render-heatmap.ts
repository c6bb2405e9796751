/**
 * The plane a preview shows as a heatmap: the kernel's block means (`PreviewData.heatmap`,
 * at most 1024 x 1024 cells) drawn on a canvas, one pixel per cell, scaled up without
 * smoothing.
 *
 * Colours come from JupyterLab's `--jp-*` variables (with fallbacks for other front
 * ends): signed data (a negative cell) gets a diverging map centred on 0, from the
 * brand blue through the theme's background to the error red, over a range symmetric
 * about 0; non-negative data a sequential map from the background to the brand blue. A
 * dark theme so gets a dark middle (or low end), a light theme a light one; cells with no
 * finite value are transparent.
 *
 * The canvas keeps the aspect ratio of the values (each cell as tall as the rows it
 * means and as wide as its columns) within a box of the panel's width and
 * `MAX_HEIGHT`; a plane too thin or too flat for that is stretched, and the caption
 * says so, as it says how many values each cell is the mean of.
 */

import type { PreviewData } from "./data-source";
import { el } from "./dom";
import { formatCount } from "./format";

const short = (v: number | null) => (v === null ? "—" : String(Number(v.toPrecision(4))));

export type Rgb = [number, number, number];

/** The colours of the scales: the CSS variable first, then its fallback. */
export const LOW_COLOR = ["--jp-layout-color1", "#ffffff"] as const;
export const HIGH_COLOR = ["--jp-brand-color1", "#1976d2"] as const;
export const NEGATIVE_COLOR = HIGH_COLOR;
export const POSITIVE_COLOR = ["--jp-error-color1", "#d32f2f"] as const;

/** The box the canvas is fitted in: the panel's width (this when unknown) and a height. */
export const FALLBACK_WIDTH = 560;
export const MAX_HEIGHT = 320;
/** Thinner or flatter than this, a plane is stretched (and says so). */
export const MIN_SIDE = 24;

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

/** A colour scale: `stops` evenly spread over [min, max]. */
export interface ColorScale {
  min: number;
  max: number;
  stops: Rgb[];
  /** Diverging: centred on 0. */
  diverging: boolean;
}

/** The scale of cells in [lo, hi]: diverging (symmetric about 0) when any is negative,
 * sequential otherwise. */
export function colorScale(lo: number, hi: number, themed: Element | null): ColorScale {
  const middle = themeColor(themed, LOW_COLOR);
  if (lo < 0) {
    const bound = Math.max(Math.abs(lo), Math.abs(hi));
    const stops = [themeColor(themed, NEGATIVE_COLOR), middle, themeColor(themed, POSITIVE_COLOR)];
    return { min: -bound, max: bound, stops, diverging: true };
  }
  return { min: lo, max: hi, stops: [middle, themeColor(themed, HIGH_COLOR)], diverging: false };
}

/** The colour of `t` in [0, 1] along `stops`. */
function mix(stops: readonly Rgb[], t: number): Rgb {
  const at = Math.min(1, Math.max(0, t)) * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(at));
  const f = at - i;
  const a = stops[i] as Rgb;
  const b = stops[i + 1] as Rgb;
  return [0, 1, 2].map((c) => (a[c] as number) + ((b[c] as number) - (a[c] as number)) * f) as Rgb;
}

/** RGBA pixels of `cells` (row-major), each cell's colour where it lies in the scale
 * (`low`/`high`: a two-colour scale over [min, max]); NaN cells transparent. */
export function heatmapPixels(
  cells: ArrayLike<number>,
  min: number,
  max: number,
  low: Rgb,
  high: Rgb,
): Uint8ClampedArray {
  return scalePixels(cells, { min, max, stops: [low, high], diverging: false });
}

/** RGBA pixels of `cells` in `scale`; NaN cells transparent. */
export function scalePixels(cells: ArrayLike<number>, scale: ColorScale): Uint8ClampedArray {
  const out = new Uint8ClampedArray(cells.length * 4);
  const span = scale.max > scale.min ? scale.max - scale.min : 1;
  for (let i = 0; i < cells.length; i++) {
    const v = cells[i] as number;
    if (!Number.isFinite(v)) continue; // alpha 0
    const rgb = mix(scale.stops, (v - scale.min) / span);
    out.set([...rgb, 255], i * 4);
  }
  return out;
}

/** How many values a cell is the mean of, rows by columns: "one value", "2×1 values",
 * "about 781×1 values" where blocks differ by one. */
export function cellText(rows: number, cols: number, h: number, w: number): string {
  if (rows <= h && cols <= w) return "each cell: one value";
  const side = (n: number, k: number) =>
    n % k === 0 ? String(n / k) : `${Math.floor(n / k)}–${Math.ceil(n / k)}`;
  return `each cell: mean of ${side(rows, h)}×${side(cols, w)} values`;
}

/** The canvas's CSS size for a plane of `rows` x `cols` values in a box `width` wide:
 * the values' aspect ratio kept (`kept`) unless a side would fall below `MIN_SIDE`. */
export function canvasSize(rows: number, cols: number, width: number) {
  const scale = Math.min(width / cols, MAX_HEIGHT / rows);
  let w = cols * scale;
  let h = rows * scale;
  const kept = w >= MIN_SIDE && h >= MIN_SIDE;
  if (!kept) {
    w = Math.max(w, Math.min(width, MIN_SIDE * 4));
    h = Math.max(h, MIN_SIDE);
  }
  return { width: Math.round(w), height: Math.round(h), kept };
}

/** The legend: the scale's ends (and 0 in the middle of a diverging one) and a ramp. */
function legend(scale: ColorScale): HTMLElement[] {
  const ramp = el("span", "tdview-heatmap-ramp");
  const colours = scale.stops.map((c) => `rgb(${c.join(",")})`).join(", ");
  ramp.style.background = `linear-gradient(to right, ${colours})`;
  if (!scale.diverging)
    return [el("span", "", short(scale.min)), ramp, el("span", "", short(scale.max))];
  const wrap = el("span", "tdview-heatmap-ramp-wrap");
  wrap.append(ramp, el("span", "tdview-heatmap-zero", "0"));
  return [el("span", "", short(scale.min)), wrap, el("span", "", short(scale.max))];
}

/** The heatmap of a preview as a figure (a caption, a canvas and its legend), or null
 * without one. `what` names what it shows ("the selection", "the plane [0, 0, :, :]"). */
export function renderHeatmap(
  data: PreviewData,
  themed: Element | null = null,
  what = "the selection",
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
  const box = themed instanceof HTMLElement && themed.clientWidth > 0 ? themed.clientWidth - 16 : 0;
  const size = canvasSize(rows, cols, box || FALLBACK_WIDTH);
  // the width, and the height from it: a narrower panel (max-width) keeps the shape
  canvas.style.width = `${size.width}px`;
  canvas.style.aspectRatio = `${size.width} / ${size.height}`;
  const scale = colorScale(heatmap.min ?? 0, heatmap.max ?? 0, themed);
  const context = w > 0 && h > 0 ? canvas.getContext?.("2d") : null;
  if (context && heatmap.min !== null && heatmap.max !== null) {
    const image = context.createImageData(w, h);
    image.data.set(scalePixels(heatmap.cells.data as ArrayLike<number>, scale));
    context.putImageData(image, 0, 0);
  }
  const caption = el("figcaption", "tdview-heatmap-caption");
  const aspect = size.kept ? "" : " · stretched: not to scale";
  caption.textContent =
    `Heatmap of ${what}: ${formatCount(rows)} × ${formatCount(cols)} values, ` +
    `${cellText(rows, cols, h, w)}${aspect}`;
  const key = el("div", "tdview-heatmap-legend");
  key.append(
    ...legend(scale),
    el("span", "tdview-heatmap-size", scale.diverging ? "signed: centred on 0" : "non-negative"),
  );
  figure.append(caption, canvas, key);
  return figure;
}
