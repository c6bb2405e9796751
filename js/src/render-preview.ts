/**
 * Preview on demand: a "Preview" button on a leaf sends one `preview` request and shows
 * a bounded table of the first values, statistics and a histogram (plain SVG bars).
 * Nothing is read before the button is pressed; a new selection aborts the request.
 *
 * Below a torchrl replay-buffer storage the kernel previews the rows written; a toggle
 * ("written rows only (20,000 of 100,000)" / "all rows") asks again for the other scope,
 * and the choice holds for the next previews of this panel.
 */

import { type DataSource, type DecodedTensor, isCancelled, type PreviewData } from "./data-source";
import { alertBox, button, el, errorText, svg } from "./dom";
import { formatCount } from "./format";
import { indexText, parseIndex, selectIndex } from "./preview-index";
import type { NodeDetails, Path, PreviewDim, PreviewStats, RowsScope } from "./protocol";
import { renderHeatmap } from "./render-heatmap";
import { watchTheme } from "./theme-watch";

/** The cells a heatmap asks for: enough for the panel's width, well below the kernel's
 * cap of MAX_HEATMAP_CELLS a side. */
export const HEATMAP_CELLS = { rows: 128, cols: 256 } as const;

export interface PreviewSectionOptions {
  /** Rows of the table asked for (the kernel caps it at 100). */
  rows?: number;
}

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

/** Index of flat column `j` over `dims` (C order), e.g. "1,0" for j = 3 over [2, 3]. */
export function columnLabel(j: number, dims: readonly number[]): string {
  if (dims.length <= 1) return String(j);
  const index: number[] = [];
  let rest = j;
  for (let d = dims.length - 1; d >= 0; d--) {
    const size = dims[d] || 1;
    index.unshift(rest % size);
    rest = Math.floor(rest / size);
  }
  return index.join(",");
}

/** The table of the slice: rows are dim 0, columns the other dims flattened. */
export function previewTable(data: PreviewData): HTMLElement {
  const { slice, shape } = data;
  const dtype = data.display_dtype;
  const wrap = el("div", "tdview-preview-table");
  const table = el("table");
  const values = slice.data as ArrayLike<number | bigint>;
  const nRows = slice.shape.length === 0 ? 1 : (slice.shape[0] ?? 0);
  const nCols = slice.shape.length >= 2 ? (slice.shape[1] ?? 0) : 1;
  const head = el("tr");
  head.append(el("th", "tdview-index", slice.shape.length === 0 ? "" : "row"));
  for (let j = 0; j < nCols; j++) {
    const label = slice.shape.length >= 2 ? columnLabel(j, shape.slice(1)) : "value";
    head.append(el("th", "", label));
  }
  const thead = el("thead");
  thead.append(head);
  const tbody = el("tbody");
  const rowDim = tableRows(data)?.dim;
  for (let i = 0; i < nRows; i++) {
    const tr = el("tr");
    const at = rowDim ? rowDim.start + i * rowDim.step : i;
    tr.append(el("th", "tdview-index", slice.shape.length === 0 ? "" : String(at)));
    for (let j = 0; j < nCols; j++)
      tr.append(el("td", "", formatValue(values[i * nCols + j], dtype)));
    tbody.append(tr);
  }
  table.append(thead, tbody);
  wrap.append(table);
  return wrap;
}

/** "first 20 of 1,000 rows · 50 of 21,168 columns" ("… written rows" when the preview
 * covers the written rows of a torchrl storage), or "" when all is shown. */
export function tableCaption(data: PreviewData): string {
  const { slice, shape } = data;
  if (slice.shape.length === 0) return "";
  const parts: string[] = [];
  const rows = slice.shape[0] ?? 0;
  const written = data.rows?.scope === "written";
  const total = written && data.rows ? data.rows.written : (shape[0] ?? rows);
  const noun = written ? "written rows" : "rows";
  const shown = tableRows(data);
  if (shown && (shown.first > 0 || shown.dim.step !== 1 || shown.axis > 0)) {
    parts.push(rowsText(shown));
  } else {
    parts.push(
      rows < total
        ? `first ${formatCount(rows)} of ${formatCount(total)} ${noun}`
        : `${formatCount(rows)} ${noun}`,
    );
  }
  if (slice.shape.length >= 2) {
    const cols = slice.shape[1] ?? 0;
    const width = shape.slice(1).reduce((a, b) => a * b, 1);
    if (cols < width) parts.push(`first ${formatCount(cols)} of ${formatCount(width)} columns`);
  }
  return parts.join(" · ");
}

/** The rows the table shows: which dim of the leaf they are (the first the index keeps),
 * that dim's selection, the first row and how many, of how many rows in all. */
export interface TableRows {
  axis: number;
  dim: PreviewDim;
  first: number;
  shown: number;
  total: number;
}

export function tableRows(data: PreviewData): TableRows | null {
  if (data.slice.shape.length === 0) return null;
  const dims = data.selection?.dims ?? [];
  const axis = dims.findIndex((d) => d.kept);
  const dim = dims[axis];
  if (!dim) return null;
  const written = axis === 0 && data.rows?.scope === "written";
  const total = written && data.rows ? data.rows.written : (data.shape[axis] ?? 0);
  return { axis, dim, first: dim.start, shown: data.slice.shape[0] ?? 0, total };
}

/** "rows 50,000–50,020 of 100,000" (the rows shown, as a half-open range). */
export function rowsText(r: TableRows): string {
  const end = r.first + r.shown * r.dim.step;
  const step = r.dim.step === 1 ? "" : ` (every ${formatCount(r.dim.step)})`;
  return `rows ${formatCount(r.first)}–${formatCount(end)} of ${formatCount(r.total)}${step}`;
}

/** The index of the page of `rows` table rows before (-1) or after (1) the one shown,
 * or null past either end. */
export function pageIndex(data: PreviewData, rows: number, step: -1 | 1): string | null {
  const r = tableRows(data);
  if (!r) return null;
  const stride = r.dim.step;
  const start = step > 0 ? r.first + r.shown * stride : r.first - rows * stride;
  if (step > 0 ? start >= r.total : r.first <= 0) return null;
  const from = Math.max(0, start);
  const dims = data.selection.dims.map((d, i) =>
    i === r.axis ? { ...d, start: from, stop: Math.min(r.total, from + rows * stride) } : d,
  );
  return indexText(dims);
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

let scopeGroups = 0;

/**
 * Two radio buttons, "written rows only (20,000 of 100,000)" and "all rows": which rows of
 * a torchrl storage the preview covers. `onChange` gets the scope picked.
 */
export function rowsToggle(
  rows: NonNullable<PreviewData["rows"]>,
  onChange: (scope: RowsScope) => void,
): HTMLElement {
  const box = el("fieldset", "tdview-rows-scope");
  box.append(el("legend", "tdview-field-label", "Rows of the replay buffer"));
  const name = `tdview-rows-scope-${++scopeGroups}`;
  const written = `written rows only (${formatCount(rows.written)} of ${formatCount(rows.capacity)})`;
  const choices: [RowsScope, string, string][] = [
    ["written", written, "The rows the buffer's storage_metadata.json says were written"],
    ["all", "all rows", "Every row of the storage; unwritten rows hold zeros or old memory"],
  ];
  for (const [scope, text, title] of choices) {
    const input = el("input", "tdview-rows-scope-input");
    input.type = "radio";
    input.name = name;
    input.value = scope;
    input.checked = rows.scope === scope;
    input.addEventListener("change", () => {
      if (input.checked) onChange(scope);
    });
    const label = el("label", "tdview-rows-scope-option");
    label.title = title;
    label.append(input, el("span", "", text));
    box.append(label);
  }
  return box;
}

/** The whole preview of one leaf (`log`: the histogram's bars by log count). */
export function renderPreview(data: PreviewData, options: { log?: boolean } = {}): HTMLElement {
  const box = el("div", "tdview-preview-result");
  const note = dtypeNote(data);
  if (note) box.append(el("p", "tdview-note tdview-display-dtype", note));
  if (data.stats) box.append(statsTable(data.stats));
  if (data.histogram) {
    const { edges, counts, values } = data.histogram;
    box.append(histogram(edges, counts, { values, dtype: data.display_dtype, log: !!options.log }));
  }
  const caption = tableCaption(data);
  if (caption) box.append(el("p", "tdview-note tdview-preview-caption", caption));
  box.append(previewTable(data));
  return box;
}

export class PreviewSection {
  readonly element: HTMLElement;
  readonly #source: DataSource;
  readonly #rows: number;
  readonly #button: HTMLButtonElement;
  readonly #close: HTMLButtonElement;
  readonly #body: HTMLElement;
  readonly #controls: HTMLElement;
  readonly #indexInput: HTMLInputElement;
  readonly #indexError: HTMLElement;
  readonly #logInput: HTMLInputElement;
  readonly #heatmapInput: HTMLInputElement;
  readonly #heatmapLabel: HTMLElement;
  #path: Path | null = null;
  #shape: number[] | null = null;
  #abort: AbortController | null = null;
  /** Open: each leaf selected is previewed (until the button closes it again). */
  #open = false;
  /** The index asked for this leaf (undefined: the first rows). */
  #index: string | undefined;
  #data: PreviewData | null = null;
  /** The leaf the index belongs to. */
  #shownKey: string | null = null;
  /** Stops watching the theme: started by the first heatmap drawn (its colours are read
   * when drawn), stopped by `dispose`. */
  #unwatchTheme: (() => void) | null = null;

  /** Whether the preview stays open from leaf to leaf. */
  get open(): boolean {
    return this.#open;
  }
  /** Which rows of a torchrl storage to preview (kept across leaves). */
  #scope: RowsScope = "written";

  /** The rows scope the next preview asks for. */
  get rowsScope(): RowsScope {
    return this.#scope;
  }

  constructor(source: DataSource, options: PreviewSectionOptions = {}) {
    this.#source = source;
    this.#rows = options.rows ?? 20;
    this.element = el("section", "tdview-section tdview-preview");
    this.element.setAttribute("aria-label", "Preview");
    this.#button = button("Preview", "tdview-preview-button", () => this.#press());
    this.#button.title =
      "Read this tensor and show its values, statistics and histogram; it stays open " +
      "as you move from leaf to leaf (Enter or a double click on a leaf opens it too)";
    this.#close = button("Close", "tdview-preview-close", () => this.close());
    this.#close.title = "Close the preview: leaves are no longer read as they are selected";
    this.#close.hidden = true;
    this.#body = el("div", "tdview-preview-body");
    this.#body.setAttribute("aria-live", "polite");
    this.#indexInput = el("input", "tdview-preview-index");
    this.#indexInput.type = "text";
    this.#indexInput.placeholder = "[50000:50020, :8]";
    this.#indexInput.spellcheck = false;
    this.#indexInput.setAttribute("aria-label", "Index expression");
    this.#indexInput.title =
      "Which values the table shows: an integer or a start:stop:step slice per dim, " +
      "e.g. [50000:50020, :8]; Enter applies it, an empty index shows the first rows";
    this.#indexInput.addEventListener("keydown", (event) => {
      if (event.key !== "Enter") return;
      event.preventDefault();
      this.applyIndex(this.#indexInput.value);
    });
    this.#indexError = el("span", "tdview-preview-index-error");
    this.#indexError.setAttribute("aria-live", "assertive");
    this.#logInput = el("input", "tdview-preview-log");
    this.#logInput.type = "checkbox";
    this.#logInput.addEventListener("change", () => this.#redraw());
    const log = el("label", "tdview-preview-log-label");
    log.title = "Bar heights by log(1 + count), so that rare values stay visible";
    log.append(this.#logInput, el("span", "", "log counts"));
    this.#heatmapInput = el("input", "tdview-preview-heatmap");
    this.#heatmapInput.type = "checkbox";
    this.#heatmapInput.addEventListener("change", () => void this.run());
    this.#heatmapLabel = el("label", "tdview-preview-heatmap-label");
    this.#heatmapLabel.title = "Also draw the values shown as a heatmap (means of blocks)";
    this.#heatmapLabel.append(this.#heatmapInput, el("span", "", "heatmap"));
    this.#controls = el("div", "tdview-preview-controls");
    this.#controls.append(this.#indexInput, log, this.#heatmapLabel, this.#indexError);
    this.#controls.hidden = true;
    const head = el("div", "tdview-section-head");
    head.append(this.#button, this.#close);
    this.element.append(head, this.#controls, this.#body);
    this.element.hidden = true;
  }

  /** Opens the preview (and reads the leaf shown); a no-op when it is open already. */
  openPreview(): void {
    if (this.#open) return;
    this.#open = true;
    this.#syncOpen();
    void this.run();
  }

  /** Closes the preview: drops it and stops reading the leaves selected. */
  close(): void {
    this.#open = false;
    this.#abort?.abort();
    this.#abort = null;
    this.#data = null;
    this.#body.replaceChildren();
    this.#syncOpen();
  }

  /** Validates `text` against the leaf's shape and previews it, or says what is wrong. */
  applyIndex(text: string): boolean {
    const trimmed = text.trim();
    try {
      if (trimmed !== "" && this.#shape) selectIndex(parseIndex(trimmed), this.#shape);
    } catch (error) {
      this.#indexError.textContent = error instanceof Error ? error.message : String(error);
      this.#indexInput.setAttribute("aria-invalid", "true");
      return false;
    }
    this.#indexError.textContent = "";
    this.#indexInput.removeAttribute("aria-invalid");
    this.#index = trimmed === "" ? undefined : trimmed;
    this.#open = true;
    this.#syncOpen();
    void this.run();
    return true;
  }

  #wantsHeatmap(): boolean {
    return this.#heatmapInput.checked && (this.#shape?.length ?? 0) >= 2;
  }

  /** Opens the preview, or when it is open reads the leaf again. */
  #press(): void {
    if (this.#open) void this.run();
    else this.openPreview();
  }

  #syncOpen(): void {
    this.#close.hidden = !this.#open;
    this.#button.classList.toggle("tdview-active", this.#open);
    this.#controls.hidden = !this.#open;
  }

  #redraw(): void {
    const result = this.#body.querySelector(".tdview-preview-result");
    if (this.#data && result) result.replaceWith(this.#result(this.#data));
  }

  #result(data: PreviewData): HTMLElement {
    const box = renderPreview(data, { log: this.#logInput.checked });
    const heatmap = renderHeatmap(data, this.element);
    if (heatmap) box.append(heatmap);
    if (heatmap && !this.#unwatchTheme) this.#unwatchTheme = watchTheme(() => this.#redraw());
    const rows = tableRows(data);
    if (rows && rows.shown < rows.total) box.append(this.#pager(data, rows));
    return box;
  }

  #pager(data: PreviewData, rows: TableRows): HTMLElement {
    const pager = el("div", "tdview-preview-pager");
    const go = (step: -1 | 1) => {
      const index = pageIndex(data, this.#rows, step);
      if (index === null) return;
      this.#index = index;
      this.#indexInput.value = index;
      void this.run();
    };
    const prev = button("‹ Previous rows", "tdview-preview-prev", () => go(-1));
    const next = button("Next rows ›", "tdview-preview-next", () => go(1));
    prev.disabled = pageIndex(data, this.#rows, -1) === null;
    next.disabled = pageIndex(data, this.#rows, 1) === null;
    pager.append(prev, el("span", "tdview-preview-rows", rowsText(rows)), next);
    return pager;
  }

  /** Shows the button for a leaf (hides the section otherwise); drops any old preview,
   * and when the preview is open reads the new leaf's. */
  setNode(node: NodeDetails | null): void {
    this.#abort?.abort();
    this.#abort = null;
    this.#body.replaceChildren();
    this.#data = null;
    const path = node?.kind === "leaf" ? node.path : null;
    if (path === null || path.join("\u0000") !== this.#shownKey) {
      this.#index = undefined;
      this.#indexInput.value = "";
      this.#indexError.textContent = "";
      this.#indexInput.removeAttribute("aria-invalid");
    }
    this.#path = path;
    this.#shownKey = path === null ? null : path.join("\u0000");
    this.#shape = node?.shape ?? null;
    this.#heatmapLabel.hidden = (this.#shape?.length ?? 0) < 2;
    this.element.hidden = this.#path === null;
    this.#button.disabled = false;
    if (this.#open && this.#path !== null) void this.run();
  }

  /** While the next selection's details load: drops the preview, keeps the layout. */
  suspend(): void {
    this.#abort?.abort();
    this.#abort = null;
    this.#body.replaceChildren();
    this.#path = null;
    this.#button.disabled = true;
  }

  /** Asks for the preview of the current leaf and shows it. */
  async run(): Promise<void> {
    const path = this.#path;
    if (path === null) return;
    this.#abort?.abort();
    const abort = new AbortController();
    this.#abort = abort;
    this.#button.disabled = true;
    // a toggle being switched stays, disabled, while its rows are read
    const toggle = this.#body.querySelector<HTMLFieldSetElement>(".tdview-rows-scope");
    if (toggle) toggle.disabled = true;
    const busy = el("p", "tdview-note tdview-busy", "Reading…");
    const cancel = button("Cancel", "tdview-preview-cancel", () => this.cancel());
    this.#body.replaceChildren(...(toggle ? [toggle, busy, cancel] : [busy, cancel]));
    try {
      const data = await this.#source.preview(path, this.#rows, {
        signal: abort.signal,
        rowsScope: this.#scope,
        ...(this.#index === undefined ? {} : { index: this.#index }),
        ...(this.#wantsHeatmap() ? { heatmap: { ...HEATMAP_CELLS } } : {}),
      });
      if (abort.signal.aborted) return;
      this.#data = data;
      const rows = data.rows;
      const head = rows ? [rowsToggle(rows, (s) => this.#setScope(s))] : [];
      this.#body.replaceChildren(...head, this.#result(data));
    } catch (error) {
      if (isCancelled(error) || abort.signal.aborted) return;
      if (toggle) toggle.disabled = false; // the other scope can still be asked for
      this.#body.replaceChildren(...(toggle ? [toggle] : []), alertBox(errorText(error)));
    } finally {
      if (this.#abort === abort) {
        this.#abort = null;
        this.#button.disabled = false;
      }
    }
  }

  /** Stops the preview being read (it stays open for the next leaf). */
  cancel(): void {
    if (!this.#abort) return;
    this.#abort.abort();
    this.#abort = null;
    this.#button.disabled = false;
    this.#body.replaceChildren(el("p", "tdview-note", "Preview cancelled."));
  }

  #setScope(scope: RowsScope): void {
    this.#scope = scope;
    void this.run();
  }

  dispose(): void {
    this.#abort?.abort();
    this.#unwatchTheme?.();
    this.#unwatchTheme = null;
  }
}
