/**
 * The table of a preview: the plane shown (its rows and columns labelled with the
 * leaf's indices of its two dims), its caption, and the rows of a page of it.
 */

import type { PreviewData } from "./data-source";
import { el } from "./dom";
import { formatCount } from "./format";
import { dimSize } from "./preview-index";
import { leafIndex } from "./preview-plane";
import { formatValue } from "./preview-stats";
import type { PreviewDim } from "./protocol";

function cornerText(data: PreviewData): string {
  const { rows, cols } = data.plane;
  if (rows === null) return "";
  if (cols === null) return data.shape.length > 1 ? `d${rows}` : "row";
  return data.shape.length === 2 && rows === 0 ? "row" : `d${rows} \\ d${cols}`;
}

/** The table of the slice: the plane's rows (leaf indices of its rows dim) by its
 * columns (leaf indices of its columns dim). */
export function previewTable(data: PreviewData): HTMLElement {
  const { slice } = data;
  const dtype = data.display_dtype;
  const wrap = el("div", "tdview-preview-table");
  const table = el("table");
  const values = slice.data as ArrayLike<number | bigint>;
  const nRows = slice.shape.length === 0 ? 1 : (slice.shape[0] ?? 0);
  const nCols = slice.shape.length >= 2 ? (slice.shape[1] ?? 0) : 1;
  const colDim = data.plane.cols === null ? null : data.selection.dims[data.plane.cols];
  const head = el("tr");
  const corner = el("th", "tdview-index", cornerText(data));
  if (data.plane.cols !== null)
    corner.title = `rows: dim ${data.plane.rows}, columns: dim ${data.plane.cols}`;
  head.append(corner);
  for (let j = 0; j < nCols; j++) {
    const at = data.plane.col_offset + j;
    const label = slice.shape.length >= 2 && colDim ? String(leafIndex(colDim, at)) : "value";
    head.append(el("th", "", label));
  }
  const thead = el("thead");
  thead.append(head);
  const tbody = el("tbody");
  const rowDim = tableRows(data)?.dim;
  for (let i = 0; i < nRows; i++) {
    const tr = el("tr");
    const at = rowDim ? leafIndex(rowDim, data.plane.offset + i) : i;
    tr.append(el("th", "tdview-index", slice.shape.length === 0 ? "" : String(at)));
    for (let j = 0; j < nCols; j++)
      tr.append(el("td", "", formatValue(values[i * nCols + j], dtype)));
    tbody.append(tr);
  }
  table.append(thead, tbody);
  wrap.append(table);
  return wrap;
}

/** "first 20 of 1,000 rows · 50 of 64 columns" ("… written rows" when the preview
 * covers the written rows of a torchrl storage), or "" when all is shown; without the
 * rows (`columnsOnly`) where a pager beside it says them. */
export function tableCaption(data: PreviewData, columnsOnly = false): string {
  const { slice } = data;
  if (slice.shape.length === 0) return "";
  const parts: string[] = [];
  const rows = slice.shape[0] ?? 0;
  const written = data.rows?.scope === "written" && data.plane.rows === 0;
  const axis = data.plane.rows ?? 0;
  const noun = `${written ? "written rows" : "rows"}${axis > 0 ? ` (dim ${axis})` : ""}`;
  const shown = tableRows(data);
  if (shown && (shown.first > 0 || shown.dim.step !== 1)) {
    parts.push(rowsText(shown));
  } else {
    const total = shown?.total ?? rows;
    parts.push(
      rows < total
        ? `first ${formatCount(rows)} of ${formatCount(total)} ${noun}`
        : `${formatCount(rows)} ${noun}`,
    );
  }
  const colDim = data.plane.cols === null ? null : data.selection.dims[data.plane.cols];
  if (slice.shape.length >= 2 && colDim) {
    const cols = slice.shape[1] ?? 0;
    const from = data.plane.col_offset;
    const all = formatCount(dimSize(colDim));
    if (from > 0) {
      const [a, b] = [leafIndex(colDim, from), leafIndex(colDim, from + cols)];
      parts.push(`columns ${formatCount(a)}–${formatCount(b)} of ${all}`);
    } else if (cols < dimSize(colDim)) {
      parts.push(`first ${formatCount(cols)} of ${all} columns`);
    }
  }
  return (columnsOnly ? parts.slice(1) : parts).join(" · ");
}

/** The rows the table shows: which dim of the leaf they are (the plane's rows), that
 * dim's selection, the table's first row in the selection (`offset`), its leaf index,
 * how many are shown, of how many selected and how many the leaf has (written). */
export interface TableRows {
  axis: number;
  dim: PreviewDim;
  offset: number;
  first: number;
  shown: number;
  count: number;
  total: number;
}

export function tableRows(data: PreviewData): TableRows | null {
  const axis = data.plane?.rows ?? null;
  if (data.slice.shape.length === 0 || axis === null) return null;
  const dim = data.selection.dims[axis];
  if (!dim) return null;
  const written = axis === 0 && data.rows?.scope === "written";
  const total = written && data.rows ? data.rows.written : (data.shape[axis] ?? 0);
  const offset = data.plane.offset;
  const shown = data.slice.shape[0] ?? 0;
  return { axis, dim, offset, first: leafIndex(dim, offset), shown, count: dimSize(dim), total };
}

/** "rows 50,000–50,020 of 100,000" (the rows shown, as a half-open range of the leaf's
 * indices of the plane's rows dim). */
export function rowsText(r: TableRows): string {
  const end = r.first + r.shown * r.dim.step;
  const step = r.dim.step === 1 ? "" : ` (every ${formatCount(r.dim.step)})`;
  const dim = r.axis > 0 ? ` (dim ${r.axis})` : "";
  return `rows ${formatCount(r.first)}–${formatCount(end)} of ${formatCount(r.total)}${step}${dim}`;
}

/** The table's first column of the columns before (-1) or after (1) the ones shown, or
 * null past either end (or for a table of one column). */
export function pageColumns(data: PreviewData, step: -1 | 1): number | null {
  const { cols, col_offset: from } = data.plane;
  const dim = cols === null ? undefined : data.selection.dims[cols];
  if (!dim || data.slice.shape.length < 2) return null;
  const shown = data.slice.shape[1] ?? 0;
  if (step > 0) return from + shown < dimSize(dim) ? from + shown : null;
  return from > 0 ? Math.max(0, from - shown) : null;
}

/** The table's first row (`offset` in the selection) of the page of `rows` rows before
 * (-1) or after (1) the one shown, or null past either end. */
export function pageOffset(data: PreviewData, rows: number, step: -1 | 1): number | null {
  const r = tableRows(data);
  if (!r) return null;
  if (step > 0) return r.offset + r.shown < r.count ? r.offset + r.shown : null;
  return r.offset > 0 ? Math.max(0, r.offset - rows) : null;
}

/** What the statistics, histogram and heatmap describe: "Statistics of all 16,384
 * values" or "Statistics of [5, 0:64]: 64 of 16,384 values". */
