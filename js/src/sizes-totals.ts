/**
 * Beside the sizes treemap: the subtree's totals by section and by dtype, each a legend
 * of the colours the cells take, and the line that answers "why is my checkpoint 128 MB
 * when the model is 21 MB" (the optimizer's state beside the model's, the bytes stored
 * twice once duplicates are looked for).
 */

import { el } from "./dom";
import { formatCount, humanBytes } from "./format";
import type { SizesResult } from "./sizes-protocol";

export type ColourBy = "section" | "dtype";

/** The palette slots of the sections (fixed, so that a section keeps its colour). */
const SECTION_SLOTS: Record<string, string> = {
  model: "p0",
  optimizer: "p1",
  buffers: "p2",
  rest: "neutral",
  mixed: "mixed",
};
/** The common dtypes' slots; others take one from their name. */
const DTYPE_SLOTS: Record<string, string> = {
  float32: "p0",
  bfloat16: "p3",
  float16: "p4",
  int64: "p1",
  bool: "p2",
  uint8: "p5",
  mixed: "mixed",
  pickle: "neutral",
  files: "neutral",
};
const HASHED = ["p3", "p4", "p5", "p0", "p1", "p2"];

/** The palette slot (a CSS class suffix) of a section or dtype name. */
export function colourSlot(by: ColourBy, name: string | null): string {
  if (name === null) return "neutral";
  const fixed = (by === "section" ? SECTION_SLOTS : DTYPE_SLOTS)[name];
  if (fixed) return fixed;
  if (by === "section") return "neutral";
  let hash = 0;
  for (const c of name) hash = (hash * 31 + c.charCodeAt(0)) >>> 0;
  return HASHED[hash % HASHED.length] ?? "neutral";
}

/** "64%" (one decimal under 10%, "<0.1%" for a sliver). */
export function share(part: number, whole: number): string {
  if (whole <= 0) return "";
  const p = (100 * part) / whole;
  if (p > 0 && p < 0.1) return "<0.1%";
  return `${p < 10 ? p.toFixed(1) : Math.round(p)}%`;
}

/** What the optimizer's state weighs against the model ("2.0× the model"), or "". */
export function optimizerRatio(bySection: Record<string, number>): string {
  const model = bySection.model ?? 0;
  const optimizer = bySection.optimizer ?? 0;
  if (model <= 0 || optimizer <= 0) return "";
  return `The optimizer's state is ${(optimizer / model).toFixed(1)}× the model.`;
}

function table(
  title: string,
  by: ColourBy,
  totals: Record<string, number>,
  whole: number,
): HTMLElement {
  const box = el("div", "tdview-sizes-legend");
  box.dataset.by = by;
  const list = el("ul", "tdview-sizes-legend-list");
  list.setAttribute("aria-label", title);
  for (const [name, bytes] of Object.entries(totals)) {
    const row = el("li", "tdview-sizes-legend-row");
    const swatch = el("span", `tdview-sizes-swatch tdview-sizes-${colourSlot(by, name)}`);
    swatch.setAttribute("aria-hidden", "true");
    row.title = `${name}: ${formatCount(bytes)} B`;
    row.append(
      swatch,
      el("span", "tdview-sizes-legend-name", name),
      el("span", "tdview-sizes-legend-bytes", humanBytes(bytes)),
      el("span", "tdview-sizes-legend-share", share(bytes, whole)),
    );
    list.append(row);
  }
  box.append(el("div", "tdview-sizes-legend-title", title), list);
  return box;
}

/** The totals of a level: its size, by section and by dtype, and the notes; `find`
 * (the button that looks for duplicates) stands where their bytes go until known. */
export function totalsPanel(
  level: SizesResult,
  colourBy: ColourBy,
  find: HTMLElement | null = null,
): HTMLElement {
  const aside = el("aside", "tdview-sizes-totals");
  aside.setAttribute("aria-label", "Totals");
  const tensors = `${formatCount(level.leaves)} tensor${level.leaves === 1 ? "" : "s"}`;
  aside.append(el("div", "tdview-sizes-total", `${humanBytes(level.bytes)} in ${tensors}`));
  const sections = table("By section", "section", level.by_section, level.bytes);
  const dtypes = table("By dtype", "dtype", level.by_dtype, level.bytes);
  (colourBy === "section" ? sections : dtypes).classList.add("tdview-sizes-legend-active");
  aside.append(sections, dtypes);
  if (level.problems) {
    const nodes = `${formatCount(level.problems)} node${level.problems === 1 ? "" : "s"}`;
    const text = `⚠ ${nodes} below could not be read: not counted (Check says why)`;
    aside.append(el("p", "tdview-sizes-note tdview-sizes-problems", text));
  }
  const ratio = optimizerRatio(level.by_section);
  if (ratio) aside.append(el("p", "tdview-sizes-note", ratio));
  const dup = level.duplicates_bytes;
  if (dup !== null) {
    const text = dup > 0 ? `${humanBytes(dup)} in duplicates` : "No bytes stored twice";
    aside.append(el("p", "tdview-sizes-note tdview-sizes-duplicates", text));
  } else if (find) {
    aside.append(find);
  }
  return aside;
}
