/**
 * Preview on demand: a "Preview" button on a leaf sends one `preview` request and shows
 * what its index selects (the whole leaf by default): the statistics and histogram (plain
 * SVG bars) of that selection, saying which it is, a table of the plane shown (two dims;
 * an n-d selection gets a dimension mapper, `preview-plane.ts`) paged by the buttons
 * beside it, and on demand a heatmap of that plane. The index field's placeholder is an
 * index that fits the leaf, and an index it cannot take is answered beside the field.
 * Nothing is read before the button is pressed; a new selection aborts the request.
 *
 * Below a torchrl replay-buffer storage the kernel previews the rows written; a toggle
 * ("written rows only (20,000 of 100,000)" / "all rows") asks again for the other scope,
 * and the choice holds for the next previews of this panel.
 */

import { type DataSource, isCancelled, type PreviewData } from "./data-source";
import { alertBox, button, el, errorText } from "./dom";
import { formatCount } from "./format";
import { exampleIndex, parseIndex, selectIndex } from "./preview-index";
import { planeIndex, planeIsPart, planeMapper, SLIDE_DELAY_MS } from "./preview-plane";
import { dtypeNote, histogram, statsScope, statsTable } from "./preview-stats";
import {
  pageColumns,
  pageOffset,
  previewTable,
  rowsText,
  type TableRows,
  tableCaption,
  tableRows,
} from "./preview-table";
import type { NodeDetails, Path, PlaneParams, RowsScope } from "./protocol";
import { renderHeatmap } from "./render-heatmap";
import { watchTheme } from "./theme-watch";

/** The cells a heatmap asks for: enough for the panel's width, well below the kernel's
 * cap of MAX_HEATMAP_CELLS a side. */
export const HEATMAP_CELLS = { rows: 128, cols: 256 } as const;

const INDEX_HELP =
  "Which values the preview describes (statistics, histogram, heatmap and table): an " +
  "integer (negative: from the end) or a start:stop:step slice per dim, and '...' for " +
  "the dims between; Enter applies it, an empty index takes the whole tensor";

export interface PreviewSectionOptions {
  /** Rows of the table asked for (the kernel caps it at 100). */
  rows?: number;
}

// the parts of a preview, for those who draw one (the compare view) and for tests
export {
  dtypeNote,
  formatValue,
  type HistogramOptions,
  histogram,
  statsScope,
  statsTable,
} from "./preview-stats";
export {
  pageOffset,
  previewTable,
  rowsText,
  type TableRows,
  tableCaption,
  tableRows,
} from "./preview-table";

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

export interface RenderOptions {
  /** The histogram's bars by log count. */
  log?: boolean;
  /** The dims shown (an n-d selection), put above the table. */
  mapper?: HTMLElement | null;
  /** The pager, put beside the table's caption. */
  pager?: HTMLElement | null;
  /** The pager says the rows shown: the caption does not. */
  rowsPaged?: boolean;
  /** The heatmap, put after the table. */
  heatmap?: HTMLElement | null;
}

/** The whole preview of one leaf: what it describes, its statistics and histogram, the
 * dims shown, the table (its caption and pager above it) and the heatmap. */
export function renderPreview(data: PreviewData, options: RenderOptions = {}): HTMLElement {
  const box = el("div", "tdview-preview-result");
  const note = dtypeNote(data);
  if (note) box.append(el("p", "tdview-note tdview-display-dtype", note));
  if (data.stats) {
    box.append(el("p", "tdview-note tdview-preview-scope", statsScope(data)));
    box.append(statsTable(data.stats));
  }
  if (data.histogram) {
    const { edges, counts, values } = data.histogram;
    box.append(histogram(edges, counts, { values, dtype: data.display_dtype, log: !!options.log }));
  }
  if (options.mapper) box.append(options.mapper);
  const head = el("div", "tdview-preview-table-head");
  const caption = tableCaption(data, !!options.rowsPaged);
  const shown = planeIsPart(data) ? `${planeIndex(data)}${caption ? " · " : ""}` : "";
  if (shown || caption)
    head.append(el("span", "tdview-note tdview-preview-caption", `${shown}${caption}`));
  if (options.pager) head.append(options.pager);
  if (head.childElementCount) box.append(head);
  box.append(previewTable(data));
  if (options.heatmap) box.append(options.heatmap);
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
  /** The index asked for this leaf (undefined: all of it). */
  #index: string | undefined;
  /** The plane asked for (undefined: the default) and the table's first row in it. */
  #plane: PlaneParams | undefined;
  #offset = 0;
  #colOffset = 0;
  /** The index and plane of the preview shown (an answer in place goes back to them). */
  #shownView: { index: string | undefined; plane: PlaneParams | undefined } = {
    index: undefined,
    plane: undefined,
  };
  /** A slider's move waiting to be sent. */
  #slide: ReturnType<typeof setTimeout> | null = null;
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
    this.#indexInput.placeholder = "";
    this.#indexInput.spellcheck = false;
    this.#indexInput.setAttribute("aria-label", "Index expression");
    this.#indexInput.title = INDEX_HELP;
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
    this.#plane = undefined;
    this.#offset = 0;
    this.#colOffset = 0;
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
    const what = planeIsPart(data) ? `the plane ${planeIndex(data)}` : "the selection";
    const heatmap = renderHeatmap(data, this.element, what);
    if (heatmap && !this.#unwatchTheme) this.#unwatchTheme = watchTheme(() => this.#redraw());
    const rows = tableRows(data);
    const pagedRows = rows !== null && rows.shown < rows.count ? rows : null;
    const pagedCols = pageColumns(data, 1) !== null || pageColumns(data, -1) !== null;
    return renderPreview(data, {
      log: this.#logInput.checked,
      heatmap,
      mapper: planeMapper(data, (plane, live) => this.#setPlane(plane, live)),
      pager: pagedRows || pagedCols ? this.#pager(data, pagedRows, pagedCols) : null,
      rowsPaged: pagedRows !== null,
    });
  }

  /** Shows another plane: at once, or once a moving slider rests. */
  #setPlane(plane: PlaneParams, live: boolean): void {
    this.#plane = plane;
    this.#offset = 0;
    this.#colOffset = 0;
    if (this.#slide !== null) clearTimeout(this.#slide);
    this.#slide = null;
    if (!live) {
      void this.run();
      return;
    }
    this.#slide = setTimeout(() => {
      this.#slide = null;
      void this.run();
    }, SLIDE_DELAY_MS);
  }

  /** Buttons for the rows before and after (with the rows shown), and for the columns
   * when not all are shown: pages of the table, the selection unchanged. */
  #pager(data: PreviewData, rows: TableRows | null, cols: boolean): HTMLElement {
    const pager = el("div", "tdview-preview-pager");
    const go = (step: -1 | 1) => {
      const offset = pageOffset(data, this.#rows, step);
      if (offset === null) return;
      this.#offset = offset;
      void this.run();
    };
    if (rows) {
      const prev = button("‹ Previous", "tdview-preview-prev", () => go(-1));
      const next = button("Next ›", "tdview-preview-next", () => go(1));
      prev.title = `The ${this.#rows} rows before`;
      next.title = `The next ${this.#rows} rows`;
      prev.disabled = pageOffset(data, this.#rows, -1) === null;
      next.disabled = pageOffset(data, this.#rows, 1) === null;
      const group = el("span", "tdview-preview-pager-group");
      group.append(prev, el("span", "tdview-preview-rows", rowsText(rows)), next);
      pager.append(group);
    }
    if (cols) {
      const side = (step: -1 | 1) => {
        const at = pageColumns(data, step);
        if (at === null) return;
        this.#colOffset = at;
        void this.run();
      };
      const left = button("‹ Columns", "tdview-preview-cols-prev", () => side(-1));
      const right = button("Columns ›", "tdview-preview-cols-next", () => side(1));
      left.title = "The columns before";
      right.title = "The next columns";
      left.disabled = pageColumns(data, -1) === null;
      right.disabled = pageColumns(data, 1) === null;
      const group = el("span", "tdview-preview-pager-group");
      group.append(left, right);
      pager.append(group);
    }
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
      this.#plane = undefined;
      this.#offset = 0;
      this.#colOffset = 0;
      this.#shownView = { index: undefined, plane: undefined };
      this.#indexInput.value = "";
      this.#indexError.textContent = "";
      this.#indexInput.removeAttribute("aria-invalid");
    }
    this.#path = path;
    this.#shownKey = path === null ? null : path.join("\u0000");
    this.#shape = node?.shape ?? null;
    const example = this.#shape ? exampleIndex(this.#shape) : "";
    this.#indexInput.placeholder = example ? `e.g. ${example}` : "a scalar: nothing to index";
    this.#indexInput.title = this.#shape
      ? `${INDEX_HELP}. The shape of this tensor is [${this.#shape.join(", ")}].`
      : INDEX_HELP;
    this.#indexInput.disabled = this.#shape !== null && this.#shape.length === 0;
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
        ...(this.#plane === undefined ? {} : { plane: this.#plane }),
        ...(this.#offset ? { offset: this.#offset } : {}),
        ...(this.#colOffset ? { colOffset: this.#colOffset } : {}),
        ...(this.#wantsHeatmap() ? { heatmap: { ...HEATMAP_CELLS } } : {}),
      });
      if (abort.signal.aborted) return;
      this.#data = data;
      this.#shownView = { index: this.#index, plane: this.#plane };
      this.#indexError.textContent = "";
      this.#indexInput.removeAttribute("aria-invalid");
      const rows = data.rows;
      const head = rows ? [rowsToggle(rows, (s) => this.#setScope(s))] : [];
      this.#body.replaceChildren(...head, this.#result(data));
    } catch (error) {
      if (isCancelled(error) || abort.signal.aborted) return;
      if (this.#answeredInPlace(error)) return;
      if (toggle) toggle.disabled = false; // the other scope can still be asked for
      this.#body.replaceChildren(...(toggle ? [toggle] : []), alertBox(errorText(error)));
    } finally {
      if (this.#abort === abort) {
        this.#abort = null;
        this.#button.disabled = false;
      }
    }
  }

  /** An index (or plane) the leaf cannot take, said beside the index field: the last
   * preview stays shown. */
  #answeredInPlace(error: unknown): boolean {
    const type = (error as { type?: unknown } | null)?.type;
    if (type !== "PreviewIndexError" && type !== "RequestError") return false;
    this.#indexError.textContent = error instanceof Error ? error.message : String(error);
    this.#indexInput.setAttribute("aria-invalid", "true");
    ({ index: this.#index, plane: this.#plane } = this.#shownView);
    if (this.#data) {
      this.#body.replaceChildren(this.#result(this.#data));
    } else {
      this.#body.replaceChildren();
    }
    return true;
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
    this.#offset = 0; // the other scope may have fewer rows
    void this.run();
  }

  dispose(): void {
    if (this.#slide !== null) clearTimeout(this.#slide);
    this.#abort?.abort();
    this.#unwatchTheme?.();
    this.#unwatchTheme = null;
  }
}
