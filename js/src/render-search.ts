/**
 * The key search box and its list of matches. Picking a match calls `onPick(path)`;
 * the widget then reveals that path in the tree.
 */

import { type DataSource, isCancelled, ProtocolError } from "./data-source";
import type { Path } from "./protocol";

export interface SearchBoxOptions {
  debounceMs?: number;
  limit?: number;
}

export class SearchBox {
  readonly element: HTMLElement;
  readonly input: HTMLInputElement;
  readonly #results: HTMLUListElement;
  readonly #status: HTMLElement;
  readonly #source: DataSource;
  readonly #onPick: (path: Path) => void;
  readonly #debounceMs: number;
  readonly #limit: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #abort: AbortController | null = null;
  #matches: Path[] = [];
  /** The pattern whose matches are on show. */
  #shown = "";

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
    this.input.placeholder = "Search keys…";
    this.input.setAttribute("aria-label", "Search keys");
    this.#status = document.createElement("span");
    this.#status.className = "tdview-search-status";
    this.#status.setAttribute("aria-live", "polite");
    this.#results = document.createElement("ul");
    this.#results.className = "tdview-search-results";
    this.element.append(this.input, this.#status, this.#results);
    this.input.addEventListener("input", this.#onInput);
    this.input.addEventListener("keydown", this.#onKeyDown);
    this.#results.addEventListener("click", this.#onClick);
  }

  /** Runs a search now (the input debounces into this). */
  async search(pattern: string): Promise<void> {
    clearTimeout(this.#timer);
    this.#abort?.abort();
    this.#abort = null;
    if (pattern === "") {
      this.#shown = "";
      this.#show([], false, "");
      return;
    }
    const abort = new AbortController();
    this.#abort = abort;
    try {
      const result = await this.#source.search(pattern, this.#limit, { signal: abort.signal });
      if (abort.signal.aborted) return;
      this.#shown = pattern;
      const n = result.matches.length;
      const status =
        n === 0 ? "no match" : `${n}${result.truncated ? "+" : ""} match${n > 1 ? "es" : ""}`;
      this.#show(result.matches, result.truncated, status);
    } catch (error) {
      if (isCancelled(error) || abort.signal.aborted) return;
      const message = error instanceof ProtocolError ? error.message : String(error);
      this.#show([], false, `search failed: ${message}`);
    }
  }

  dispose(): void {
    clearTimeout(this.#timer);
    this.#abort?.abort();
  }

  #show(matches: Path[], truncated: boolean, status: string): void {
    this.#matches = matches;
    this.#status.textContent = status;
    this.#results.replaceChildren(
      ...matches.map((path, i) => {
        const item = document.createElement("li");
        const button = document.createElement("button");
        button.type = "button";
        button.className = "tdview-search-result";
        button.dataset.match = String(i);
        button.textContent = path.join(" / ");
        item.append(button);
        return item;
      }),
    );
    this.element.classList.toggle("tdview-truncated", truncated);
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
    if (this.input.value !== this.#shown) await this.search(this.input.value);
    const first = this.#matches[0];
    if (first) this.#onPick(first);
  }

  readonly #onClick = (event: MouseEvent): void => {
    const button = event.target instanceof Element ? event.target.closest("button") : null;
    const path = this.#matches[Number(button?.dataset.match)];
    if (path) this.#onPick(path);
  };
}
