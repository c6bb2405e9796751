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
import type { NodeDetails, Path, PreviewStats, RowsScope } from "./protocol";

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
  for (let i = 0; i < nRows; i++) {
    const tr = el("tr");
    tr.append(el("th", "tdview-index", slice.shape.length === 0 ? "" : String(i)));
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
  parts.push(
    rows < total
      ? `first ${formatCount(rows)} of ${formatCount(total)} ${noun}`
      : `${formatCount(rows)} ${noun}`,
  );
  if (slice.shape.length >= 2) {
    const cols = slice.shape[1] ?? 0;
    const width = shape.slice(1).reduce((a, b) => a * b, 1);
    if (cols < width) parts.push(`first ${formatCount(cols)} of ${formatCount(width)} columns`);
  }
  return parts.join(" · ");
}

/** The statistics as label/value pairs that wrap to the panel's width. */
export function statsTable(stats: PreviewStats): HTMLElement {
  const box = el("div", "tdview-stats");
  const entries: [string, string][] = [
    ["min", extremeText(stats.min)],
    ["max", extremeText(stats.max)],
    ["mean", statText(stats.mean)],
    ["std", statText(stats.std)],
    ["NaN", formatCount(stats.nan)],
    ["Inf", formatCount(stats.inf)],
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

/** Bars for `counts` over `edges` (one more edge than counts), as an SVG figure. */
export function histogram(edges: DecodedTensor, counts: DecodedTensor): HTMLElement {
  const n = counts.data.length;
  const count = (i: number) => Number(counts.data[i] ?? 0);
  const edge = (i: number) => Number(edges.data[i] ?? 0);
  let max = 0;
  for (let i = 0; i < n; i++) max = Math.max(max, count(i));
  const figure = el("figure", "tdview-histogram");
  const chart = svg("svg", {
    viewBox: `0 0 ${n} ${HIST_HEIGHT}`,
    preserveAspectRatio: "none",
    role: "img",
    "aria-label": `Histogram: ${n} bins from ${formatValue(edge(0), "float64")} to ${formatValue(edge(n), "float64")}`,
  });
  chart.append(
    svg("rect", { class: "tdview-histogram-bg", x: 0, y: 0, width: n, height: HIST_HEIGHT }),
  );
  for (let i = 0; i < n; i++) {
    const c = count(i);
    // Any non-empty bin stays visible, however small next to the tallest.
    const h = c === 0 ? 0 : Math.max(1.5, (c / max) * HIST_HEIGHT);
    const bar = svg("rect", {
      class: "tdview-histogram-bar",
      x: i + 0.08,
      y: HIST_HEIGHT - h,
      width: 0.84,
      height: h,
    });
    const title = svg("title");
    title.textContent = `[${formatValue(edge(i), "float64")}, ${formatValue(edge(i + 1), "float64")}): ${formatCount(c)}`;
    bar.append(title);
    chart.append(bar);
  }
  const axis = el("figcaption", "tdview-histogram-axis");
  axis.append(
    el("span", "", formatValue(edge(0), "float64")),
    el("span", "tdview-histogram-max", `${n} bins · tallest ${formatCount(max)}`),
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

/** The whole preview of one leaf. */
export function renderPreview(data: PreviewData): HTMLElement {
  const box = el("div", "tdview-preview-result");
  const note = dtypeNote(data);
  if (note) box.append(el("p", "tdview-note tdview-display-dtype", note));
  if (data.stats) box.append(statsTable(data.stats));
  if (data.histogram) box.append(histogram(data.histogram.edges, data.histogram.counts));
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
  readonly #body: HTMLElement;
  #path: Path | null = null;
  #abort: AbortController | null = null;
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
    this.#button = button("Preview", "tdview-preview-button", () => void this.run());
    this.#button.title = "Read this tensor and show its first values, statistics and histogram";
    this.#body = el("div", "tdview-preview-body");
    this.#body.setAttribute("aria-live", "polite");
    const head = el("div", "tdview-section-head");
    head.append(el("h3", "tdview-section-title", "Preview"), this.#button);
    this.element.append(head, this.#body);
    this.element.hidden = true;
  }

  /** Shows the button for a leaf (hides the section otherwise); drops any old preview. */
  setNode(node: NodeDetails | null): void {
    this.#abort?.abort();
    this.#abort = null;
    this.#body.replaceChildren();
    this.#path = node?.kind === "leaf" ? node.path : null;
    this.element.hidden = this.#path === null;
    this.#button.disabled = false;
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
    this.#body.replaceChildren(...(toggle ? [toggle, busy] : [busy]));
    try {
      const data = await this.#source.preview(path, this.#rows, {
        signal: abort.signal,
        rowsScope: this.#scope,
      });
      if (abort.signal.aborted) return;
      const rows = data.rows;
      const head = rows ? [rowsToggle(rows, (s) => this.#setScope(s))] : [];
      this.#body.replaceChildren(...head, renderPreview(data));
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

  #setScope(scope: RowsScope): void {
    this.#scope = scope;
    void this.run();
  }

  dispose(): void {
    this.#abort?.abort();
  }
}
