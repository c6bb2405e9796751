/**
 * One row of the search box's list of matches: its path and what it is (shape, dtype,
 * size) on one line. The path wins: the annotations give way first, a form at a time
 * (the shape's trailing dims, the dtype, the shape, the size: `fitRow`, as the tree's
 * rows do), and a path that still does not fit is cut in the middle, its end kept and
 * whole in its tooltip: whole keys go first (`model/…layers/3/self_attn/in_proj_weight`:
 * matches differ near their end, so the layer's number stays), else `middleCut`. After
 * the path, the row's inline text as the tree's rows show it: an optimizer state's
 * parameter (`→ encoder.0.weight`, cut in the middle before the size gives way), a
 * non-tensor's value (`= 1200`).
 */

import { describeShape, humanBytes } from "./format";
import { ELLIPSIS, type Measure, middleCut, shapeForms } from "./middle-cut";
import type { NodeSummary, Path } from "./protocol";
import { inlinePart } from "./render-tree";
import { type FitPart, fitRow } from "./row-fit";

/** Gap between a row's path and its annotations, px (as search.css's `gap`). */
export const ROW_GAP = 8;
const SIZE_SEPARATOR = " · ";

/** A match's path as a row shows it: its subpath (`model/layers/0`, what the search
 * box and `subpath=` take, and the shortest), or its keys joined by " / " when a key
 * holds a "/" (the subpath would not say where the keys part). */
export function matchPath(path: Path): string {
  return path.join(path.some((key) => key.includes("/")) ? " / " : "/");
}

/** A match's shape and dtype (or batch size) and its size: "[64, 32] float32 · 8.19 KB". */
export function matchMeta(node: NodeSummary): string {
  return joinMeta([describeShape(node), "", humanBytes(node.bytes)]);
}

function joinMeta([shape = "", dtype = "", size = ""]: readonly string[]): string {
  const what = [shape, dtype].filter(Boolean).join(" ");
  return [what, size].filter(Boolean).join(SIZE_SEPARATOR);
}

/** The annotations of `node` with their forms, whole to shortest, and the order in
 * which they give way: the shape's dims, the dtype, the shape, the inline text's cuts,
 * the size (as the tree's rows). */
function annotations(
  node: NodeSummary,
  measure: Measure,
  inline: string,
): { parts: FitPart[]; steps: number[] } {
  const dims = node.kind === "leaf" ? node.shape : node.batch_size;
  const described = describeShape(node);
  let shape: string[] = [];
  if (dims === null || (node.kind !== "leaf" && dims.length === 0)) {
    shape = described && node.kind !== "leaf" ? [described] : [];
  } else {
    shape = shapeForms(dims).map((form) => (node.kind === "leaf" ? form : `batch ${form}`));
  }
  const parts: FitPart[] = [
    inlinePart(inline, measure),
    { forms: shape, measure },
    { forms: node.kind === "leaf" && node.dtype ? [node.dtype] : [], measure },
    // after " · " rather than a gap
    { forms: node.bytes === null ? [] : [humanBytes(node.bytes)], measure, pad: sizePad(measure) },
  ];
  const [INLINE, SHAPE, DTYPE, SIZE] = [0, 1, 2, 3];
  const shrinks = Array.from({ length: Math.max(0, shape.length - 1) }, () => SHAPE);
  const cuts = Array.from({ length: Math.max(1, parts[INLINE]?.forms.length ?? 0) }, () => INLINE);
  return { parts, steps: [...shrinks, DTYPE, SHAPE, ...cuts, SIZE] };
}

/** The size alone beside a whole `path` where it fits without the " · " that `fitRow`
 * kept room for (it comes only after a shape or dtype). */
function sizeAlone(node: NodeSummary | undefined, path: string, width: number, measure: Measure) {
  const size = node?.bytes == null ? "" : humanBytes(node.bytes);
  const fits = size !== "" && measure(path) + ROW_GAP + measure(size) <= width;
  return ["", "", fits ? size : ""];
}

function sizePad(measure: Measure): number {
  return Math.max(0, measure(SIZE_SEPARATOR) - ROW_GAP);
}

/**
 * `text` (a path) cut to `width`: its first key, `…`, and the longest end that starts a
 * key (after a "/" or a ".") that fits; else cut anywhere in the middle (`middleCut`).
 *
 * @example pathCut("model/decoder/layers/0/mlp", 24, (t) => t.length) === "model/…layers/0/mlp"
 */
export function pathCut(text: string, width: number, measure: Measure): string {
  if (measure(text) <= width) return text;
  const starts = [...text.matchAll(/[/.]/g)].map((m) => (m.index ?? 0) + 1);
  const head = text.slice(0, starts[0] ?? 0);
  for (const start of starts.slice(1)) {
    const cut = head + ELLIPSIS + text.slice(start);
    if (measure(cut) <= width) return cut;
  }
  return middleCut(text, width, measure);
}

/** A row's elements: the path, its inline text, then its annotations (filled by
 * `fitMatchRow`). */
export function matchRow(
  path: Path,
  node: NodeSummary | undefined,
  i: number,
  inline = "",
): HTMLElement {
  const item = document.createElement("li");
  const button = document.createElement("button");
  button.type = "button";
  button.className = "tdview-search-result";
  button.dataset.match = String(i);
  const text = document.createElement("span");
  text.className = "tdview-search-path";
  text.textContent = matchPath(path);
  const said = document.createElement("span");
  said.className = "tdview-search-inline tdview-inline-value";
  said.textContent = inline;
  const meta = document.createElement("span");
  meta.className = "tdview-search-meta";
  meta.textContent = node ? matchMeta(node) : "";
  button.append(text, said, meta);
  item.append(button);
  return item;
}

/** Fits a row made by `matchRow` to `width` px (its content box), in `measure`, with
 * `inline` after its path (`→ encoder.0.weight`: what the tree's row shows). */
export function fitMatchRow(
  button: HTMLElement,
  path: Path,
  node: NodeSummary | undefined,
  width: number,
  measure: Measure,
  inline = "",
): void {
  const text = button.querySelector<HTMLElement>(".tdview-search-path");
  const said = button.querySelector<HTMLElement>(".tdview-search-inline");
  const meta = button.querySelector<HTMLElement>(".tdview-search-meta");
  if (!text || !said || !meta) return;
  const whole = matchPath(path);
  const { parts, steps } = node ? annotations(node, measure, inline) : { parts: [], steps: [] };
  const fit = fitRow(whole, measure, parts, steps, width, ROW_GAP);
  // cut: every annotation has given way (all ""), the whole width is the path's
  if (fit.key !== whole) fit.key = pathCut(whole, width, measure);
  text.textContent = fit.key;
  if (fit.key !== whole) text.title = whole;
  else text.removeAttribute("title");
  const [shownInline = "", ...annotated] = fit.texts;
  said.textContent = shownInline;
  const shown = annotated.some(Boolean) || fit.key !== whole;
  meta.textContent = joinMeta(shown ? annotated : sizeAlone(node, whole, width, measure));
  // what gave way is in the row's tooltip
  const full = node ? matchMeta(node) : "";
  const fullInline = inline ? `${inline}\n` : "";
  if (meta.textContent !== full || shownInline !== inline) {
    button.title = `${whole}\n${fullInline}${full}`;
  } else {
    button.removeAttribute("title");
  }
}
