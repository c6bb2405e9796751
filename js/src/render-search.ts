/**
 * The key search box and its list of matches. Picking a match calls `onPick(path, how)`;
 * the widget then reveals that path in the tree (a folder expanded with its children).
 *
 * Keys: Enter in the box picks the first match; ArrowDown goes into the list, where the
 * arrows, Home and End move, Enter picks, Escape (or ArrowUp on the first row) goes back
 * to the box, and typing goes on in the box. Each row is one line: its path cut in the
 * middle (`setMiddleCut`) to the width its size and shape leave, whole in its tooltip.
 * What the kernel did to read the pattern (a pasted key, a `module.` prefix dropped:
 * `notes`) is said under the count.
 */

import { type DataSource, isCancelled, ProtocolError } from "./data-source";
import { formatCount } from "./format";
import { measureFor } from "./middle-cut";
import type { NodeSummary, Path } from "./protocol";
import { fitMatchRow, matchRow } from "./search-rows";

/** What the box takes, as its placeholder says it and its tooltip spells it out. */
export const SEARCH_PLACEHOLDER = "Search: obs/pixels, linear1.weight, *.bias, **/exp_avg";
export const SEARCH_HINT =
  "A / subpath or its end (layers/0/norm1), a dotted state_dict key or its end " +
  "(linear1.weight), a substring of any key, or a glob (*.bias, layers/*/norm1/*, " +
  '**/exp_avg). A key pasted as a tuple ("a", "b") or from code (sd[\'a.b\']) is ' +
  "matched whole; module. and _orig_mod. prefixes are ignored. Enter picks the first " +
  "match, ↓ goes into the list.";

/** How a match was picked: `folder`, it has children (the tree shows them); `fromList`,
 * from the list of matches (the tree takes the focus), not by Enter in the box. */
export interface Pick {
  folder: boolean;
  fromList: boolean;
}

export interface SearchBoxOptions {
  debounceMs?: number;
  limit?: number;
  /** Offers "filter tree": called with the pattern on show while it is ticked, null when
   * it is unticked or the pattern cleared. */
  onFilter?: (pattern: string | null) => void;
  /** A match's inline text, as its tree row shows it (an optimizer state's parameter,
   * `→ encoder.0.weight`; "" while it is asked for: `refresh` shows it once known). */
  inlineValue?: (node: NodeSummary) => string;
}

/** A count of all matches: under way (`total` null) or known. */
interface Counting {
  pattern: string;
  abort: AbortController;
  total: number | null;
  /** Settles when the count is in (null: known without asking). */
  done: Promise<void> | null;
  failed?: string;
}

export class SearchBox {
  readonly element: HTMLElement;
  readonly input: HTMLInputElement;
  readonly #results: HTMLUListElement;
  readonly #status: HTMLElement;
  readonly #notes: HTMLElement;
  readonly #prev: HTMLButtonElement;
  readonly #next: HTMLButtonElement;
  readonly #filter: HTMLInputElement;
  readonly #onFilter: ((pattern: string | null) => void) | undefined;
  readonly #inlineValue: ((node: NodeSummary) => string) | undefined;
  readonly #source: DataSource;
  readonly #onPick: (path: Path, how: Pick) => void;
  readonly #debounceMs: number;
  readonly #limit: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #abort: AbortController | null = null;
  #matches: Path[] = [];
  #nodes: NodeSummary[] = [];
  /** Cuts each row's path to the list's width again when that width changes. */
  readonly #resize: ResizeObserver | null = null;
  /** The pattern whose matches are on show. */
  #shown = "";
  /** The first match of the page on show, and how many matches there are in all (a
   * lower bound, `#seen`, until the count comes). */
  #offset = 0;
  #total = 0;
  #seen = 0;
  /** The count of a pattern's matches: asked once per pattern, shared by its pages. */
  #count: Counting | null = null;

  constructor(
    source: DataSource,
    onPick: (path: Path, how: Pick) => void,
    options: SearchBoxOptions = {},
  ) {
    this.#source = source;
    this.#onPick = onPick;
    this.#debounceMs = options.debounceMs ?? 200;
    this.#limit = options.limit ?? 50;
    this.#inlineValue = options.inlineValue;
    this.element = document.createElement("div");
    this.element.className = "tdview-search";
    this.element.setAttribute("role", "search");
    this.input = document.createElement("input");
    this.input.type = "search";
    this.input.className = "tdview-search-input";
    this.input.placeholder = SEARCH_PLACEHOLDER;
    this.input.title = SEARCH_HINT;
    this.input.setAttribute("aria-label", "Search keys");
    this.#status = document.createElement("span");
    this.#status.className = "tdview-search-status";
    this.#status.setAttribute("aria-live", "polite");
    this.#notes = document.createElement("div");
    this.#notes.className = "tdview-search-notes";
    this.#notes.hidden = true;
    this.#results = document.createElement("ul");
    this.#results.className = "tdview-search-results";
    this.#results.setAttribute("aria-label", "Matches");
    this.#prev = this.#pageButton("tdview-search-prev", "Previous page of matches", "‹ Previous");
    this.#next = this.#pageButton("tdview-search-next", "Next page of matches", "Next ›");
    const pager = document.createElement("div");
    pager.className = "tdview-search-pager";
    pager.append(this.#prev, this.#next);
    this.#onFilter = options.onFilter;
    this.#filter = document.createElement("input");
    this.#filter.type = "checkbox";
    this.#filter.className = "tdview-search-filter";
    const filter = document.createElement("label");
    filter.className = "tdview-search-filter-label";
    filter.title = "Show only the matches and their ancestors in the tree";
    filter.append(this.#filter, " filter tree");
    filter.hidden = this.#onFilter === undefined;
    this.#filter.addEventListener("change", () => {
      this.#onFilter?.(this.#filter.checked && this.#shown !== "" ? this.#shown : null);
    });
    this.element.append(this.input, this.#status, pager, filter, this.#notes, this.#results);
    this.#prev.addEventListener("click", () => void this.page(-1));
    this.#next.addEventListener("click", () => void this.page(1));
    this.input.addEventListener("input", this.#onInput);
    this.input.addEventListener("keydown", this.#onKeyDown);
    this.#results.addEventListener("click", this.#onClick);
    this.#results.addEventListener("keydown", this.#onListKeyDown);
    if (typeof ResizeObserver !== "undefined") {
      let width = -1;
      this.#resize = new ResizeObserver(() => {
        if (this.#results.clientWidth === width) return;
        width = this.#results.clientWidth;
        this.#fitRows();
      });
      this.#resize.observe(this.#results);
    }
  }

  /** Runs a search now (the input debounces into this), for the page at `offset`;
   * settles once the page is on show and the count of all matches after it. */
  async search(pattern: string, offset = 0): Promise<void> {
    const counting = await this.#showPage(pattern, offset);
    await counting;
  }

  /** Shows the page as soon as the kernel has it (asked uncounted, so a fresh huge
   * checkpoint need not be walked first) and starts counting; returns the count. */
  async #showPage(pattern: string, offset: number): Promise<Promise<void> | undefined> {
    clearTimeout(this.#timer);
    this.#abort?.abort();
    this.#abort = null;
    if (this.#count?.pattern !== pattern || this.#count.failed !== undefined) {
      this.#count?.abort.abort(); // a newer query: its count is not wanted any more
      this.#count = null; // (or one that failed: asked again)
    }
    if (pattern === "") {
      this.#shown = "";
      this.#offset = 0;
      this.#total = 0;
      this.#show([], [], false, "");
      this.#showNotes([]);
      if (this.#filter.checked) this.#onFilter?.(null);
      return undefined;
    }
    const abort = new AbortController();
    this.#abort = abort;
    try {
      const result = await this.#source.search(pattern, this.#limit, {
        signal: abort.signal,
        offset,
        count: false,
      });
      if (abort.signal.aborted) return undefined;
      this.#shown = pattern;
      this.#offset = result.offset;
      if (result.counted && this.#count?.total == null) {
        this.#count?.abort.abort(); // the page's walk went to the end: counted already
        this.#count = { pattern, abort: new AbortController(), total: result.total, done: null };
      }
      const counting = this.#count ?? this.#startCount(pattern);
      this.#seen = result.total;
      this.#show(result.matches, result.nodes, result.truncated, "");
      this.#showNotes(result.notes);
      this.#showCount();
      if (this.#filter.checked && offset === 0) this.#onFilter?.(pattern);
      return counting.done ?? undefined;
    } catch (error) {
      if (isCancelled(error) || abort.signal.aborted) return undefined;
      const message = error instanceof ProtocolError ? error.message : String(error);
      this.#shown = ""; // no page on show: a count that comes later leaves the message
      this.#show([], [], false, `search failed: ${message}`);
      this.#showNotes([]);
      return undefined;
    }
  }

  /** Asks for the number of all matches (`limit: 0`), shown when it comes. */
  #startCount(pattern: string): Counting {
    const abort = new AbortController();
    const counting: Counting = { pattern, abort, total: null, done: null };
    counting.done = this.#source.search(pattern, 0, { signal: abort.signal }).then(
      (result) => {
        if (abort.signal.aborted) return;
        counting.total = result.total;
        this.#showCount();
      },
      (error: unknown) => {
        if (isCancelled(error) || abort.signal.aborted) return;
        counting.failed = error instanceof ProtocolError ? error.message : String(error);
        this.#showCount();
      },
    );
    this.#count = counting;
    return counting;
  }

  /** The status and pager of the page on show, with the true count once it is known. */
  #showCount(): void {
    const counting = this.#count;
    if (counting === null || counting.pattern !== this.#shown) return;
    const page = { offset: this.#offset, matches: this.#matches };
    if (counting.total === null) {
      this.#total = this.#seen;
      const note = counting.failed === undefined ? "counting…" : `count failed: ${counting.failed}`;
      this.#status.textContent = searchStatus({ ...page, total: this.#seen, counted: false }, note);
    } else {
      this.#total = counting.total;
      this.#status.textContent = searchStatus({ ...page, total: counting.total });
    }
    this.#showPager(this.#offset + this.#matches.length < this.#total);
  }

  /** Shows the previous (-1) or next (1) page of the matches on show. */
  async page(step: -1 | 1): Promise<void> {
    if (this.#shown === "") return;
    const offset = this.#offset + step * this.#limit;
    if (offset < 0 || offset >= this.#total) return;
    await this.search(this.#shown, offset);
  }

  #pageButton(className: string, label: string, text: string): HTMLButtonElement {
    const button = document.createElement("button");
    button.type = "button";
    button.className = `tdview-search-page ${className}`;
    button.setAttribute("aria-label", label);
    button.textContent = text;
    button.hidden = true;
    return button;
  }

  dispose(): void {
    this.#resize?.disconnect();
    clearTimeout(this.#timer);
    this.#abort?.abort();
    this.#count?.abort.abort();
  }

  #show(matches: Path[], nodes: NodeSummary[], truncated: boolean, status: string): void {
    this.#matches = matches;
    this.#nodes = nodes;
    this.#status.textContent = status;
    this.#results.replaceChildren(
      ...matches.map((path, i) => matchRow(path, nodes[i], i, this.#inlineOf(nodes[i]))),
    );
    this.#fitRows();
    this.#showPager(truncated);
  }

  /** Shows the inline texts that became known since the rows were drawn. */
  refresh(): void {
    for (const button of this.#results.querySelectorAll<HTMLElement>(".tdview-search-result")) {
      const said = button.querySelector(".tdview-search-inline");
      if (said) said.textContent = this.#inlineOf(this.#nodes[Number(button.dataset.match)]);
    }
    this.#fitRows();
  }

  #inlineOf(node: NodeSummary | undefined): string {
    return node && this.#inlineValue ? this.#inlineValue(node) : "";
  }

  /** Fits each row to the list's width (`fitMatchRow`); before layout (no width yet)
   * the rows stay whole and CSS keeps each on one line. */
  #fitRows(): void {
    const buttons = this.#results.querySelectorAll<HTMLButtonElement>(".tdview-search-result");
    const first = buttons[0];
    if (!first || first.clientWidth <= 0) return;
    const style = getComputedStyle(first);
    const padding =
      Number.parseFloat(style.paddingLeft) + Number.parseFloat(style.paddingRight) || 0;
    const width = first.clientWidth - padding;
    const measure = measureFor(first);
    for (const button of buttons) {
      const i = Number(button.dataset.match);
      const path = this.#matches[i];
      const node = this.#nodes[i];
      if (path) fitMatchRow(button, path, node, width, measure, this.#inlineOf(node));
    }
  }

  /** What reading the pattern did, under the count ("" hides it). */
  #showNotes(notes: readonly string[]): void {
    this.#notes.textContent = notes.join("; ");
    this.#notes.hidden = notes.length === 0;
  }

  #resultButton(i: number): HTMLButtonElement | null {
    return this.#results.querySelector<HTMLButtonElement>(`[data-match="${i}"]`);
  }

  #showPager(truncated: boolean): void {
    this.element.classList.toggle("tdview-truncated", truncated);
    const paged = this.#total > this.#matches.length;
    this.#prev.hidden = !paged;
    this.#next.hidden = !paged;
    this.#prev.disabled = this.#offset <= 0;
    this.#next.disabled = !truncated;
  }

  readonly #onInput = (): void => {
    clearTimeout(this.#timer);
    const pattern = this.input.value;
    this.#timer = setTimeout(() => void this.search(pattern), this.#debounceMs);
  };

  readonly #onKeyDown = (event: KeyboardEvent): void => {
    if (event.key === "Enter") {
      event.preventDefault();
      void this.#pickFirst();
    } else if (event.key === "ArrowDown" && this.#matches.length > 0) {
      event.preventDefault();
      this.#resultButton(0)?.focus();
    } else if (event.key === "Escape" && this.input.value !== "") {
      event.preventDefault();
      this.input.value = "";
      void this.search("");
    }
  };

  async #pickFirst(): Promise<void> {
    // the page only: Enter does not wait for the count
    if (this.input.value !== this.#shown) await this.#showPage(this.input.value, 0);
    this.#pick(0, false);
  }

  #pick(i: number, fromList: boolean): void {
    const path = this.#matches[i];
    if (path) this.#onPick(path, { folder: this.#nodes[i]?.has_children === true, fromList });
  }

  readonly #onClick = (event: MouseEvent): void => {
    const button = event.target instanceof Element ? event.target.closest("button") : null;
    if (button?.dataset.match !== undefined) this.#pick(Number(button.dataset.match), true);
  };

  /** The arrows move through the rows (and up from the first back to the box), Enter
   * picks, Escape goes back to the box, and typing goes on in the box. Handled keys
   * are not seen by JupyterLab (no cell moves or is deleted). */
  readonly #onListKeyDown = (event: KeyboardEvent): void => {
    const button = event.target instanceof Element ? event.target.closest("button") : null;
    const at = Number(button?.dataset.match);
    if (button?.dataset.match === undefined || Number.isNaN(at)) return;
    const last = this.#matches.length - 1;
    const moves: Record<string, number> = {
      ArrowDown: Math.min(at + 1, last),
      ArrowUp: at - 1,
      Home: 0,
      End: last,
      PageDown: Math.min(at + 10, last),
      PageUp: Math.max(at - 10, 0),
    };
    const to = moves[event.key];
    if (to !== undefined) {
      if (to < 0) this.input.focus();
      else this.#resultButton(to)?.focus();
    } else if (event.key === "Enter") {
      this.#pick(at, true);
    } else if (event.key === "Escape") {
      this.input.focus();
    } else if (event.key.length === 1 && !event.ctrlKey && !event.metaKey && !event.altKey) {
      this.input.focus();
      this.#typeInto(event.key);
    } else if (event.key === "Backspace") {
      this.input.focus();
      this.#typeInto(null);
    } else {
      return;
    }
    event.preventDefault();
    event.stopPropagation();
  };

  /** A character typed in the list goes to the end of the box (null: one erased). */
  #typeInto(char: string | null): void {
    const value = this.input.value;
    this.input.value = char === null ? [...value].slice(0, -1).join("") : value + char;
    this.input.dispatchEvent(new Event("input"));
  }
}

/** "1,234 matches", or with pages "matches 51–100 of 1,234"; not counted yet (a lower
 * bound): "50+ matches, counting…", "matches 51–100 of 100+, counting…". */
export function searchStatus(
  r: { offset: number; total: number; matches: unknown[]; counted?: boolean },
  note = "counting…",
): string {
  const first = formatCount(r.offset + 1);
  const last = formatCount(r.offset + r.matches.length);
  if (r.counted === false) {
    const seen = `${last}+`;
    if (r.offset === 0) return `${seen} matches, ${note}`;
    return `matches ${first}–${last} of ${seen}, ${note}`;
  }
  if (r.total === 0) return "no match";
  const all = `${formatCount(r.total)} match${r.total === 1 ? "" : "es"}`;
  if (r.matches.length >= r.total) return all;
  if (r.matches.length === 0) return `${all} (none from ${formatCount(r.offset + 1)})`;
  return `matches ${first}–${last} of ${formatCount(r.total)}`;
}
