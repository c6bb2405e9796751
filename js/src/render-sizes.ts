/**
 * The details panel's "Sizes" view of the selected subtree: a squarified treemap
 * (treemap.ts) of where its bytes go, one level at a time (the `sizes` method), with
 * the totals by section and by dtype beside it (sizes-totals.ts).
 *
 * Area is bytes; colour is the section or the dtype (the toggle above the map). A click
 * or Enter on a cell with children zooms into it (the next level is asked for);
 * Escape or Backspace zooms out, the breadcrumbs back to any level above. The cells are
 * one tab stop: the arrow keys move between them by where they lie, Home and End to the
 * largest and the smallest. Small children come gathered in an "other" cell. A label
 * that does not fit its cell is hidden or cut with an ellipsis, never drawn past it;
 * each cell's title gives its whole path and size.
 */

import { isCancelled } from "./data-source";
import { alertBox, button, el, errorText } from "./dom";
import { formatCount, humanBytes } from "./format";
import type { NodeDetails, Path } from "./protocol";
import type { SizeChild, SizesOptions, SizesResult } from "./sizes-protocol";
import { type ColourBy, colourSlot, share, totalsPanel } from "./sizes-totals";
import { type Cell, type Direction, neighbour, squarify } from "./treemap";

/** What the view asks its sizes of (the `DataSource`'s `sizes`). */
export type SizesFetch = (path: Path, opts?: SizesOptions) => Promise<SizesResult>;

/** A cell shows its key from this size (px), its size below from MIN_SIZE_H. */
const MIN_LABEL_W = 34;
const MIN_LABEL_H = 16;
const MIN_SIZE_H = 32;

const KEYS: Record<string, Direction> = {
  ArrowLeft: "left",
  ArrowRight: "right",
  ArrowUp: "up",
  ArrowDown: "down",
};

/** A cell's item: a child, or the children gathered as "other". */
type Item = SizeChild | { other: true; count: number; bytes: number };

function isOther(item: Item): item is { other: true; count: number; bytes: number } {
  return "other" in item;
}

function bytesOf(item: Item): number {
  return item.bytes;
}

export class SizesView {
  readonly element: HTMLElement;
  /** The "Sizes" toggle of the details head. */
  readonly toggle: HTMLButtonElement;
  /** Called when the view starts or stops taking the panel (a subtree while on). */
  onActive: ((active: boolean) => void) | null = null;
  /** Called to select a cell's node in the tree (double-click, Shift+Enter). */
  onOpen: ((path: Path) => void) | null = null;
  readonly #fetch: SizesFetch | null;
  readonly #crumbs: HTMLElement;
  readonly #map: HTMLElement;
  readonly #aside: HTMLElement;
  readonly #colour: HTMLButtonElement;
  readonly #rootName: string;
  #on = false;
  #root: Path | null = null;
  #level: SizesResult | null = null;
  #cells: { cell: Cell<Item>; element: HTMLElement }[] = [];
  #focus = 0;
  #colourBy: ColourBy = "section";
  #abort: AbortController | null = null;
  #resize: ResizeObserver | null = null;
  #laidFor = "";
  /** Whether the level on show was asked with its duplicates. */
  #looked = false;

  constructor(fetch: SizesFetch | null, rootName = "(root)") {
    this.#fetch = fetch;
    this.#rootName = rootName;
    this.toggle = button("▦ Sizes", "tdview-sizes-toggle", () => this.setOn(!this.#on));
    this.toggle.title =
      "Where the bytes of this subtree go: a treemap, totals by section and dtype";
    this.toggle.setAttribute("aria-pressed", "false");
    this.toggle.hidden = true;
    this.element = el("section", "tdview-sizes");
    this.element.setAttribute("aria-label", "Sizes");
    this.element.hidden = true;
    const bar = el("div", "tdview-sizes-bar");
    this.#crumbs = el("nav", "tdview-sizes-crumbs");
    this.#crumbs.setAttribute("aria-label", "Zoom levels");
    this.#colour = button("", "tdview-sizes-colour", () =>
      this.setColourBy(this.#colourBy === "section" ? "dtype" : "section"),
    );
    bar.append(this.#crumbs, this.#colour);
    const body = el("div", "tdview-sizes-body");
    this.#map = el("div", "tdview-sizes-map");
    this.#map.setAttribute("role", "group");
    this.#map.setAttribute("aria-roledescription", "treemap");
    this.#map.addEventListener("keydown", (e) => this.#onKey(e));
    this.#aside = el("div", "tdview-sizes-side");
    body.append(this.#map, this.#aside);
    this.element.append(bar, body);
    this.#syncColour();
    if (typeof ResizeObserver !== "undefined") {
      this.#resize = new ResizeObserver(() => this.#relayout());
      this.#resize.observe(this.#map);
    }
  }

  /** Whether the toggle is on (it holds from node to node). */
  get on(): boolean {
    return this.#on;
  }

  /** The level on show, null before one came. */
  get level(): SizesResult | null {
    return this.#level;
  }

  /** Whether the view takes the panel: on, and a node with children selected. */
  get active(): boolean {
    return this.#on && this.#root !== null;
  }

  setOn(on: boolean): void {
    this.#on = on;
    this.toggle.setAttribute("aria-pressed", String(on));
    this.#sync(true);
  }

  setColourBy(by: ColourBy): void {
    this.#colourBy = by;
    this.#syncColour();
    if (this.#level) this.#render(this.#level);
  }

  /** The selected node (null: none): a node with children can be measured. */
  setNode(details: NodeDetails | null): void {
    const root = details?.has_children && this.#fetch ? details.path : null;
    this.toggle.hidden = root === null;
    const same = root !== null && this.#root !== null && root.join("\0") === this.#root.join("\0");
    if (same) return;
    this.#root = root;
    this.#level = null;
    this.#sync(false);
  }

  /** Shows the level at `path` (below the selected node). */
  async zoom(path: Path, focus = false, duplicates = false): Promise<void> {
    const from = this.#level?.path ?? null;
    const fetch = this.#fetch;
    if (!fetch) return;
    this.#abort?.abort();
    const abort = new AbortController();
    this.#abort = abort;
    this.#map.classList.add("tdview-loading");
    if (!this.#level) this.#map.replaceChildren(el("p", "tdview-sizes-wait", "Measuring…"));
    try {
      const onProgress = duplicates ? this.#onProgress : undefined;
      const level = await fetch(path, { signal: abort.signal, duplicates, onProgress });
      this.#looked = duplicates;
      if (abort.signal.aborted) return;
      this.#level = level;
      // zoomed out: the cell it came from; zoomed in: the largest
      const back = from?.join("\0");
      const found = this.#cellsOf(level).findIndex((c) => c.path?.join("\0") === back);
      this.#focus = Math.max(found, 0);
      this.#render(level);
      if (focus) this.#cells[this.#focus]?.element.focus();
    } catch (error) {
      if (isCancelled(error) || abort.signal.aborted) return;
      this.#map.replaceChildren(alertBox(errorText(error)));
    } finally {
      if (this.#abort === abort) this.#map.classList.remove("tdview-loading");
    }
  }

  /** One level up, unless at the selected node; true when it zoomed. */
  zoomOut(focus = false): boolean {
    const level = this.#level;
    const root = this.#root;
    if (!level || !root || level.path.length <= root.length) return false;
    void this.zoom(level.path.slice(0, -1), focus);
    return true;
  }

  dispose(): void {
    this.#abort?.abort();
    this.#resize?.disconnect();
  }

  #sync(fetchNow: boolean): void {
    const active = this.active;
    this.element.hidden = !active;
    this.onActive?.(active);
    if (!active) {
      this.#abort?.abort();
      return;
    }
    if ((fetchNow || !this.#level) && this.#root) void this.zoom(this.#root);
  }

  #syncColour(): void {
    const by = this.#colourBy;
    this.#colour.textContent = `Colour: ${by}`;
    this.#colour.title = `Colour the cells by ${by === "section" ? "section" : "dtype"}; press for ${by === "section" ? "dtype" : "section"}`;
    this.#colour.setAttribute("aria-label", `Colour by ${by} (press for the other)`);
  }

  /** The items of a level in the order of their cells (largest first). */
  #cellsOf(level: SizesResult): { path: Path | null }[] {
    return this.#items(level)
      .filter((item) => item.bytes > 0)
      .sort((a, b) => b.bytes - a.bytes)
      .map((item) => ({ path: isOther(item) ? null : item.path }));
  }

  #items(level: SizesResult): Item[] {
    const items: Item[] = [...level.children];
    if (level.other.count) items.push({ other: true, ...level.other });
    return items;
  }

  #render(level: SizesResult): void {
    this.#renderCrumbs(level.path);
    const w = this.#map.clientWidth || 480;
    const h = this.#map.clientHeight || 280;
    this.#laidFor = `${w}x${h}`;
    const cells = squarify(this.#items(level), bytesOf, { x: 0, y: 0, w, h });
    this.#cells = cells.map((cell, i) => ({ cell, element: this.#cell(cell, level, w, h, i) }));
    this.#map.setAttribute("aria-label", `Sizes of ${this.#name(level.path)}`);
    if (!cells.length) {
      const empty = level.bytes ? "" : "No bytes: nothing here holds a tensor.";
      this.#map.replaceChildren(el("p", "tdview-sizes-wait", empty));
    } else {
      this.#map.replaceChildren(...this.#cells.map((c) => c.element));
    }
    this.#aside.replaceChildren(totalsPanel(level, this.#colourBy, this.#findButton(level)));
  }

  /** Where the bytes stored twice go before they are known: the button that looks for
   * them (reading payloads), or why there are none to look for. */
  #findButton(level: SizesResult): HTMLElement {
    if (this.#looked) {
      return el("p", "tdview-sizes-note", "Duplicates are looked for inside each checkpoint.");
    }
    const find = button("Find duplicates", "tdview-sizes-find", () => {
      find.disabled = true;
      find.textContent = "Looking for duplicates…";
      void this.zoom(level.path, this.#map.contains(document.activeElement), true);
    });
    find.title =
      "Look for leaves stored twice below: reads the payloads of leaves of one size and " +
      "dtype (an archive's CRC-32s first)";
    return find;
  }

  readonly #onProgress = (p: { done: number; total: number }): void => {
    const find = this.#aside.querySelector(".tdview-sizes-find");
    if (find && p.total > 0) {
      find.textContent = `Looking for duplicates… ${Math.floor((100 * p.done) / p.total)}%`;
    }
  };

  #relayout(): void {
    const size = `${this.#map.clientWidth}x${this.#map.clientHeight}`;
    if (this.#level && this.#map.clientWidth && size !== this.#laidFor) {
      const focused = this.#map.contains(document.activeElement);
      this.#render(this.#level);
      if (focused) this.#cells[this.#focus]?.element.focus();
    }
  }

  #cell(cell: Cell<Item>, level: SizesResult, w: number, h: number, i: number): HTMLElement {
    const item = cell.item;
    const other = isOther(item);
    const slot = other
      ? "other"
      : colourSlot(this.#colourBy, this.#colourBy === "section" ? item.section : item.dtype);
    const div = el("div", `tdview-sizes-cell tdview-sizes-${slot}`);
    Object.assign(div.style, {
      left: `${(100 * cell.x) / w}%`,
      top: `${(100 * cell.y) / h}%`,
      width: `${(100 * cell.w) / w}%`,
      height: `${(100 * cell.h) / h}%`,
    });
    div.setAttribute("role", "button");
    div.tabIndex = i === this.#focus ? 0 : -1;
    const name = other ? `other (${formatCount(item.count)})` : item.key;
    const size = `${humanBytes(item.bytes)}, ${share(item.bytes, level.bytes)}`;
    const what = other ? `${formatCount(item.count)} smaller keys` : describe(item);
    div.setAttribute("aria-label", `${name}: ${size}; ${what}`);
    const zoomable = !other && item.has_children;
    if (zoomable) div.dataset.zoom = "true";
    else div.setAttribute("aria-disabled", "true");
    const where = other ? `${this.#name(level.path)}: ${what}` : item.path.join(" / ");
    const lines = [
      where,
      `${humanBytes(item.bytes)} (${formatCount(item.bytes)} B) · ${share(item.bytes, level.bytes)} of ${humanBytes(level.bytes)}`,
    ];
    if (!other) lines[1] += ` · ${what}`;
    if (zoomable) lines.push("Click or Enter: zoom in");
    if (!other) lines.push("Double-click or Shift+Enter: select it in the tree");
    div.title = lines.join("\n");
    if (cell.w >= MIN_LABEL_W && cell.h >= MIN_LABEL_H) {
      div.append(el("span", "tdview-sizes-label", name));
      if (cell.h >= MIN_SIZE_H) div.append(el("span", "tdview-sizes-size", humanBytes(item.bytes)));
    }
    div.addEventListener("focus", () => {
      this.#focus = i;
      this.#roving();
    });
    if (!other) div.addEventListener("dblclick", () => this.onOpen?.(item.path));
    div.addEventListener("click", () => {
      this.#focus = i;
      this.#roving();
      if (zoomable) void this.zoom((item as SizeChild).path, true);
      else div.focus();
    });
    return div;
  }

  #renderCrumbs(path: Path): void {
    const root = this.#root ?? path;
    const parts: HTMLElement[] = [];
    for (let depth = root.length; depth <= path.length; depth++) {
      const at = path.slice(0, depth);
      const label = depth === root.length ? this.#name(root) : (path[depth - 1] ?? "");
      if (depth === path.length) {
        const here = el("span", "tdview-sizes-crumb tdview-sizes-crumb-here", label);
        here.setAttribute("aria-current", "location");
        parts.push(here);
      } else {
        const crumb = button(label, "tdview-sizes-crumb", () => void this.zoom(at, true));
        crumb.title = `Zoom out to ${at.join(" / ") || this.#rootName}`;
        parts.push(crumb, el("span", "tdview-sizes-crumb-sep", "›"));
      }
    }
    this.#crumbs.replaceChildren(...parts);
  }

  #name(path: Path): string {
    return path.length ? (path[path.length - 1] ?? "") : this.#rootName;
  }

  #roving(): void {
    this.#cells.forEach((c, i) => {
      c.element.tabIndex = i === this.#focus ? 0 : -1;
    });
  }

  #onKey(event: KeyboardEvent): void {
    const direction = KEYS[event.key];
    let next = -1;
    if (direction) {
      next = neighbour(
        this.#cells.map((c) => c.cell),
        this.#focus,
        direction,
      );
    } else if (event.key === "Home") next = 0;
    else if (event.key === "End") next = this.#cells.length - 1;
    else if (event.key === "Enter" && event.shiftKey) {
      const item = this.#cells[this.#focus]?.cell.item;
      if (item && !isOther(item)) this.onOpen?.(item.path);
    } else if (event.key === "Enter" || event.key === " ") {
      this.#cells[this.#focus]?.element.click();
    } else if (event.key === "Escape" || event.key === "Backspace") {
      if (!this.zoomOut(true)) return; // at the top: Escape is the host's
    } else return;
    event.preventDefault();
    event.stopPropagation();
    if (next >= 0) {
      this.#focus = next;
      this.#roving();
      this.#cells[next]?.element.focus();
    }
  }
}

/** "tensordict of 12 tensors · float32 · model" */
function describe(child: SizeChild): string {
  const what =
    child.kind === "leaf"
      ? "a tensor"
      : `${child.kind} of ${formatCount(child.leaves)} tensor${child.leaves === 1 ? "" : "s"}`;
  return [what, child.dtype ?? "", child.section].filter(Boolean).join(" · ");
}
