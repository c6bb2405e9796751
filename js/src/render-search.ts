/**
 * The key search box and its list of matches. Picking a match calls `onPick(path)`;
 * the widget then reveals that path in the tree.
 */

import { type DataSource, isCancelled, ProtocolError } from "./data-source";
import { pathText } from "./dom";
import { describeShape, formatCount, humanBytes } from "./format";
import type { NodeSummary, Path } from "./protocol";

/** What the box takes, as its placeholder says it and its tooltip spells it out. */
export const SEARCH_PLACEHOLDER = "Search: obs/pixels, linear1.weight, *.bias, **/exp_avg";
export const SEARCH_HINT =
  "A / subpath or its end (layers/0/norm1), a dotted state_dict key or its end " +
  "(linear1.weight), a substring of any key, or a glob (*.bias, layers/*/norm1/*, " +
  "**/exp_avg). Enter picks the first match.";

export interface SearchBoxOptions {
  debounceMs?: number;
  limit?: number;
  /** Offers "filter tree": called with the pattern on show while it is ticked, null when
   * it is unticked or the pattern cleared. */
  onFilter?: (pattern: string | null) => void;
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
  readonly #prev: HTMLButtonElement;
  readonly #next: HTMLButtonElement;
  readonly #filter: HTMLInputElement;
  readonly #onFilter: ((pattern: string | null) => void) | undefined;
  readonly #source: DataSource;
  readonly #onPick: (path: Path) => void;
  readonly #debounceMs: number;
  readonly #limit: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #abort: AbortController | null = null;
  #matches: Path[] = [];
  /** The pattern whose matches are on show. */
  #shown = "";
  /** The first match of the page on show, and how many matches there are in all (a
   * lower bound, `#seen`, until the count comes). */
  #offset = 0;
  #total = 0;
  #seen = 0;
  /** The count of a pattern's matches: asked once per pattern, shared by its pages. */
  #count: Counting | null = null;

  constructor(source: DataSource, onPick: (path: Path) => void, options: SearchBoxOptions = {}) {
    this.#source = source;
    this.#onPick = onPick;
    this.#debounceMs = options.debounceMs ?? 200;
    this.#limit = options.limit ?? 50;
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
    this.#results = document.createElement("ul");
    this.#results.className = "tdview-search-results";
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
    this.element.append(this.input, this.#status, pager, filter, this.#results);
    this.#prev.addEventListener("click", () => void this.page(-1));
    this.#next.addEventListener("click", () => void this.page(1));
    this.input.addEventListener("input", this.#onInput);
    this.input.addEventListener("keydown", this.#onKeyDown);
    this.#results.addEventListener("click", this.#onClick);
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
      this.#showCount();
      if (this.#filter.checked && offset === 0) this.#onFilter?.(pattern);
      return counting.done ?? undefined;
    } catch (error) {
      if (isCancelled(error) || abort.signal.aborted) return undefined;
      const message = error instanceof ProtocolError ? error.message : String(error);
      this.#shown = ""; // no page on show: a count that comes later leaves the message
      this.#show([], [], false, `search failed: ${message}`);
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
    clearTimeout(this.#timer);
    this.#abort?.abort();
    this.#count?.abort.abort();
  }

  #show(matches: Path[], nodes: NodeSummary[], truncated: boolean, status: string): void {
    this.#matches = matches;
    this.#status.textContent = status;
    this.#results.replaceChildren(
      ...matches.map((path, i) => {
        const item = document.createElement("li");
        const button = document.createElement("button");
        button.type = "button";
        button.className = "tdview-search-result";
        button.dataset.match = String(i);
        button.append(pathText(path.join(" / "), "tdview-search-path"));
        const node = nodes[i];
        const meta = node ? matchMeta(node) : "";
        if (meta) {
          const span = document.createElement("span");
          span.className = "tdview-search-meta";
          span.textContent = meta;
          button.append(span);
        }
        item.append(button);
        return item;
      }),
    );
    this.#showPager(truncated);
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
    } else if (event.key === "Escape" && this.input.value !== "") {
      event.preventDefault();
      this.input.value = "";
      void this.search("");
    }
  };

  async #pickFirst(): Promise<void> {
    // the page only: Enter does not wait for the count
    if (this.input.value !== this.#shown) await this.#showPage(this.input.value, 0);
    const first = this.#matches[0];
    if (first) this.#onPick(first);
  }

  readonly #onClick = (event: MouseEvent): void => {
    const button = event.target instanceof Element ? event.target.closest("button") : null;
    const path = this.#matches[Number(button?.dataset.match)];
    if (path) this.#onPick(path);
  };
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

/** A match's shape and dtype (or batch size) and its size: "[64, 32] float32 · 8.19 KB". */
export function matchMeta(node: NodeSummary): string {
  return [describeShape(node), humanBytes(node.bytes)].filter((s) => s !== "").join(" · ");
}
