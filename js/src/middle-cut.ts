/**
 * Text that fits a width without losing what identifies it.
 *
 * - `middleCut(text, width, measure)`: a name cut in the middle, its end kept
 *   (`decoder.layers.0.…in_proj_weight`): the cut snaps to a `.` or `/` when that costs
 *   little, so both sides read as whole parts of the key.
 * - `fitShape(shape, width, measure)`: a shape that never cuts inside a number; whole
 *   trailing dims give way to `…` (`[768, …]`, then `[…]`); `shapeForms` lists them.
 * - `measureFor(el)`: a `Measure` in the font an element has (a canvas where there is
 *   one, else an estimate from the font size: tests, a host without layout).
 *
 * The functions are pure given a `Measure`; `estimateMeasure` makes one for tests.
 */

/** Width of a text in px, in the font it is drawn in. */
export type Measure = (text: string) => number;

export const ELLIPSIS = "…";

/** A part boundary that a cut prefers to land on. */
const SEPARATORS = new Set([".", "/"]);
/** Share of the kept characters that goes to the start (the rest keeps the end). */
const HEAD_SHARE = 0.4;
/** A snap to a separator may drop at most this share of the end, or of the start. */
const SNAP_TAIL = 1 / 3;
const SNAP_HEAD = 1 / 2;

/**
 * A measure of `charEm` em a character (0.6 em: a monospace font's advance), for tests
 * and for a host with no canvas.
 */
export function estimateMeasure(fontSizePx = 12, charEm = 0.6): Measure {
  return (text) => [...text].length * fontSizePx * charEm;
}

/** A canvas measure in `font` (a CSS font shorthand), or null where there is no canvas. */
export function canvasMeasure(font: string): Measure | null {
  if (typeof OffscreenCanvas === "undefined") return null;
  const context = new OffscreenCanvas(1, 1).getContext("2d");
  if (!context) return null;
  context.font = font;
  const cache = new Map<string, number>();
  return (text) => {
    let width = cache.get(text);
    if (width === undefined) {
      width = context.measureText(text).width;
      if (cache.size > 5000) cache.clear();
      cache.set(text, width);
    }
    return width;
  };
}

/** A measure in the font `el` is drawn in (its computed style). */
export function measureFor(el: Element): Measure {
  const style = getComputedStyle(el);
  const size = Number.parseFloat(style.fontSize) || 12;
  const font = `${style.fontStyle} ${style.fontWeight} ${size}px ${style.fontFamily || "monospace"}`;
  return canvasMeasure(font) ?? estimateMeasure(size);
}

/**
 * `text` if it fits `width`, else its start and its end around `…`, the end kept longer
 * (it names the tensor: `…in_proj_weight`). `…` alone when nothing more fits, "" for "".
 *
 * @example middleCut("decoder.layers.0.self_attn.in_proj_weight", 32, (t) => t.length)
 *   === "decoder.layers.0.…in_proj_weight"
 */
export function middleCut(text: string, width: number, measure: Measure): string {
  if (text === "" || measure(text) <= width) return text;
  const chars = [...text];
  const n = chars.length;
  const cut = (head: number, tail: number) =>
    chars.slice(0, head).join("") + ELLIPSIS + chars.slice(n - tail).join("");
  const fits = (head: number, tail: number) => measure(cut(head, tail)) <= width;
  const split = (kept: number): [number, number] => {
    const head = Math.floor(kept * HEAD_SHARE);
    return [head, kept - head];
  };
  // the most characters kept (each one more only widens the text: a binary search)
  let lo = 0;
  let hi = n - 1;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (fits(...split(mid))) lo = mid;
    else hi = mid - 1;
  }
  let [head, tail] = split(lo);
  tail = snapTail(chars, tail);
  while (head + tail + 1 < n && fits(head + 1, tail)) head++;
  head = snapHead(chars, head);
  // the room the snap freed: whole parts more of the end, where they fit
  for (let more = partBefore(chars, head, tail); more !== null && fits(head, more); ) {
    tail = more;
    more = partBefore(chars, head, tail);
  }
  return cut(head, tail);
}

/** The kept end starts after a separator when one is near its start. */
function snapTail(chars: string[], tail: number): number {
  const n = chars.length;
  const start = n - tail;
  if (tail === 0 || SEPARATORS.has(chars[start - 1] ?? "")) return tail;
  const limit = Math.min(n - 1, start + Math.floor(tail * SNAP_TAIL));
  for (let i = start; i < limit; i++) {
    if (SEPARATORS.has(chars[i] ?? "")) return n - i - 1;
  }
  return tail;
}

/** The kept start ends with a separator when one is near its end. */
function snapHead(chars: string[], head: number): number {
  const atEdge = SEPARATORS.has(chars[head - 1] ?? "") || SEPARATORS.has(chars[head] ?? "");
  if (head === 0 || atEdge) return head;
  const limit = head - Math.floor(head * SNAP_HEAD);
  for (let i = head - 2; i >= Math.max(0, limit - 1); i--) {
    if (SEPARATORS.has(chars[i] ?? "")) return i + 1;
  }
  return head;
}

/** The kept end with the whole part before it (up to a separator after the start), or
 * null when there is none. */
function partBefore(chars: string[], head: number, tail: number): number | null {
  const start = chars.length - tail;
  if (!SEPARATORS.has(chars[start - 1] ?? "")) return null;
  for (let i = start - 2; i >= head; i--) {
    if (SEPARATORS.has(chars[i] ?? "")) return chars.length - i - 1;
  }
  return null;
}

/**
 * The forms of a shape from whole to shortest: `[768, 256]`, `[768, …]`, `[…]`.
 */
export function shapeForms(shape: readonly number[]): string[] {
  const forms: string[] = [];
  for (let kept = shape.length; kept >= 0; kept--) {
    const dims = shape.slice(0, kept).map(String);
    if (kept < shape.length) dims.push(ELLIPSIS);
    forms.push(`[${dims.join(", ")}]`);
  }
  return forms;
}

/**
 * The longest form of the shape that fits (`shapeForms`), else "": a number is never cut.
 *
 * @example fitShape([768, 256], 8, (t) => t.length) === "[768, …]"
 */
export function fitShape(shape: readonly number[], width: number, measure: Measure): string {
  return shapeForms(shape).find((text) => measure(text) <= width) ?? "";
}

/**
 * Puts `text` in `el` cut in the middle to `width` px (in `el`'s font, or `measure`),
 * the whole text as its tooltip when it was cut. Returns the text shown.
 */
export function setMiddleCut(
  el: HTMLElement,
  text: string,
  width: number,
  measure: Measure = measureFor(el),
): string {
  const shown = middleCut(text, width, measure);
  el.textContent = shown;
  if (shown !== text) el.title = text;
  else el.removeAttribute("title");
  return shown;
}
