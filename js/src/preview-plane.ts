/**
 * The plane of an n-d selection that a preview's table and heatmap show, and the
 * control that chooses it (H5Web's dimension mapper): one row per dim the selection
 * keeps, a radio button for rows and one for columns, and for each other dim a slider
 * for its position (its leaf index beside it). A conv weight `[64, 3, 7, 7]` so shows
 * the 7 x 7 kernel of filter 12, channel 1, and never columns labelled `0,0,1`.
 */

import type { PreviewData } from "./data-source";
import { el } from "./dom";
import { formatCount } from "./format";
import { dimSize } from "./preview-index";
import type { PlaneParams, PreviewDim } from "./protocol";

/** A slider's moves are sent this long after the last (arrow keys repeat). */
export const SLIDE_DELAY_MS = 150;

/** The leaf index of position `k` of a dim's selection. */
export const leafIndex = (dim: PreviewDim, k: number) => dim.start + k * dim.step;

/** The plane as an index of the leaf (`[12, 1, 0:7, 0:7]`): a slider's dim at its leaf
 * index, a shown dim as its selected range, a dim the index dropped at its position. */
export function planeIndex(data: PreviewData): string {
  const { rows, cols, at } = data.plane;
  const parts = data.selection.dims.map((dim, d) => {
    if (!dim.kept) return String(dim.start);
    if (d === rows || d === cols) {
      return `${dim.start}:${dim.stop}${dim.step === 1 ? "" : `:${dim.step}`}`;
    }
    return String(leafIndex(dim, at[d] ?? 0));
  });
  return `[${parts.join(", ")}]`;
}

/** Whether the plane shown is less than the selection (it keeps more than two dims). */
export function planeIsPart(data: PreviewData): boolean {
  return data.selection.dims.filter((d) => d.kept).length > 2;
}

let groups = 0;

/**
 * The dimension mapper of a preview whose selection keeps more than two dims, or null.
 * `onChange` gets the plane asked for (`live`: a slider moving; the caller may wait for
 * it to rest).
 */
export function planeMapper(
  data: PreviewData,
  onChange: (plane: PlaneParams, live: boolean) => void,
): HTMLElement | null {
  if (!planeIsPart(data)) return null;
  const { dims } = data.selection;
  const rows = data.plane.rows as number;
  const cols = data.plane.cols as number;
  const at = dims.map((_, d) => data.plane.at[d] ?? 0);
  const box = el("fieldset", "tdview-plane");
  box.append(el("legend", "tdview-field-label", "Dims shown"));
  const table = el("table", "tdview-plane-dims");
  const head = el("tr");
  for (const text of ["dim", "size", "rows", "columns", "position"])
    head.append(el("th", "", text));
  const thead = el("thead");
  thead.append(head);
  const tbody = el("tbody");
  const name = `tdview-plane-${++groups}`;
  const choose = (which: "rows" | "cols", d: number) => {
    let next = which === "rows" ? { rows: d, cols } : { rows, cols: d };
    if (next.rows === next.cols)
      next = which === "rows" ? { rows: d, cols: rows } : { rows: cols, cols: d };
    onChange({ ...next, at: [...at] }, false);
  };
  dims.forEach((dim, d) => {
    if (!dim.kept) return;
    const tr = el("tr", d === rows || d === cols ? "tdview-plane-shown" : "");
    tr.append(el("th", "", String(d)), el("td", "", formatCount(dimSize(dim))));
    for (const which of ["rows", "cols"] as const) {
      const cell = el("td");
      const radio = el("input", `tdview-plane-${which}`);
      radio.type = "radio";
      radio.name = `${name}-${which}`;
      radio.checked = (which === "rows" ? rows : cols) === d;
      radio.setAttribute("aria-label", `dim ${d} as ${which === "rows" ? "rows" : "columns"}`);
      radio.addEventListener("change", () => {
        if (radio.checked) choose(which, d);
      });
      cell.append(radio);
      tr.append(cell);
    }
    const place = el("span", "tdview-plane-position");
    if (d !== rows && d !== cols) place.append(...slider(dim, d, at, onChange, { rows, cols }));
    else place.append(el("span", "tdview-plane-as", d === rows ? "rows" : "columns"));
    const cell = el("td");
    cell.append(place);
    tr.append(cell);
    tbody.append(tr);
  });
  table.append(thead, tbody);
  box.append(table);
  return box;
}

/** A slider for the position of dim `d` (and its leaf index, as text). */
function slider(
  dim: PreviewDim,
  d: number,
  at: number[],
  onChange: (plane: PlaneParams, live: boolean) => void,
  shown: { rows: number; cols: number },
): HTMLElement[] {
  const input = el("input", "tdview-plane-slider");
  input.type = "range";
  input.min = "0";
  input.max = String(Math.max(0, dimSize(dim) - 1));
  input.value = String(at[d] ?? 0);
  input.setAttribute("aria-label", `position of dim ${d}`);
  const label = el("output", "tdview-plane-at", String(leafIndex(dim, at[d] ?? 0)));
  const send = (live: boolean) => {
    const next = [...at];
    next[d] = Number(input.value);
    onChange({ ...shown, at: next }, live);
  };
  input.addEventListener("input", () => {
    label.textContent = String(leafIndex(dim, Number(input.value)));
    send(true);
  });
  input.addEventListener("change", () => send(false));
  return [input, label];
}
