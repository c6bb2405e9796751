/**
 * A virtualized ARIA tree drawn from a `TreeModel`.
 *
 * Rows have a fixed height and are absolutely positioned inside a spacer as tall as
 * all rows together; only the rows in the viewport (plus `overscan`) exist in the DOM.
 * Focus stays on the `role="tree"` element, which points at the selected row with
 * `aria-activedescendant` (the selected row is always scrolled into the DOM).
 */

import { describeShape, humanBytes, nodeLabel } from "./format";
import type { NodeSummary, Path } from "./protocol";
import { TreeKeyboard } from "./tree-keyboard";
import type { TreeModel, TreeRow } from "./tree-model";

export interface TreeViewOptions {
  /** Row height in px; must match `--tdview-row-height` in styles.css. */
  rowHeight?: number;
  /** Viewport height used while the element has no layout (e.g. not yet attached). */
  height?: number;
  overscan?: number;
  label?: string;
  /** Called when Enter or a double click activates a row. */
  onActivate?: (path: Path) => void;
  /** A short text shown after a row's key (`= 1200` for a non-tensor value, the root's
   * tensor count), or "" while it is not known; `refresh()` redraws once it is. */
  inlineValue?: (node: NodeSummary) => string;
  keyboard?: TreeKeyboard;
  /** Draws a row's content instead of the checkpoint row (the compare view's marks). */
  fillRow?: (el: HTMLElement, row: TreeRow) => void;
}

let nextViewId = 0;

function span(className: string, text: string): HTMLSpanElement {
  const el = document.createElement("span");
  el.className = className;
  el.textContent = text;
  return el;
}

/** What the row's content depends on: the element of an index is reused for other rows. */
function rowSignature(row: TreeRow): string {
  return JSON.stringify([row.label, row.expanded, row.expandable, row.error, row.node]);
}

function fillRow(el: HTMLElement, row: TreeRow): void {
  const parts: HTMLElement[] = [];
  const twisty = span("tdview-twisty", row.expandable ? (row.expanded ? "▾" : "▸") : "");
  twisty.setAttribute("aria-hidden", "true");
  parts.push(twisty);
  const node = row.node;
  if (!node) {
    parts.push(span("tdview-placeholder", row.error ? `⚠ ${row.error}` : "…"));
  } else {
    parts.push(span("tdview-key", row.label));
    parts.push(span(`tdview-badge tdview-kind-${node.kind}`, nodeLabel(node)));
    parts.push(span("tdview-shape", describeShape(node)));
    parts.push(span("tdview-bytes", humanBytes(node.bytes)));
    if (node.problems.length > 0) {
      const warn = span("tdview-problem", "⚠");
      warn.title = node.problems.join("\n");
      parts.push(warn);
    }
  }
  el.replaceChildren(...parts);
  el.title = node ? node.path.join(" / ") || row.label : "";
}

/** Text after the row's key: `= value` of a non-tensor, the root's tensor count. */
function appendInline(el: HTMLElement, text: string): void {
  const value = span("tdview-inline-value", text);
  const key = el.querySelector(".tdview-key");
  if (key) key.after(value);
  else el.append(value);
}

export class TreeView {
  readonly element: HTMLDivElement;
  readonly #tree: TreeModel;
  readonly #spacer: HTMLDivElement;
  readonly #rows = new Map<number, { el: HTMLElement; sig: string }>();
  readonly #keyboard: TreeKeyboard;
  readonly #idPrefix = `tdview-row-${++nextViewId}`;
  readonly #rowHeight: number;
  readonly #height: number;
  readonly #overscan: number;
  readonly #onActivate: ((path: Path) => void) | undefined;
  readonly #inlineValue: ((node: NodeSummary) => string) | undefined;
  readonly #fillRow: (el: HTMLElement, row: TreeRow) => void;
  readonly #unsubscribe: () => void;
  readonly #resize: ResizeObserver | null = null;

  constructor(tree: TreeModel, options: TreeViewOptions = {}) {
    this.#tree = tree;
    this.#rowHeight = options.rowHeight ?? 24;
    this.#height = options.height ?? 360;
    this.#overscan = options.overscan ?? 8;
    this.#onActivate = options.onActivate;
    this.#inlineValue = options.inlineValue;
    this.#fillRow = options.fillRow ?? fillRow;
    this.#keyboard = options.keyboard ?? new TreeKeyboard(tree);
    this.element = document.createElement("div");
    this.element.className = "tdview-tree";
    this.element.setAttribute("role", "tree");
    this.element.setAttribute("aria-label", options.label ?? "Checkpoint contents");
    this.element.tabIndex = 0;
    this.#spacer = document.createElement("div");
    this.#spacer.className = "tdview-tree-spacer";
    this.#spacer.setAttribute("role", "none");
    this.element.append(this.#spacer);
    this.element.addEventListener("scroll", this.#onScroll);
    this.element.addEventListener("keydown", this.#onKeyDown);
    this.element.addEventListener("click", this.#onClick);
    this.element.addEventListener("dblclick", this.#onDoubleClick);
    this.#unsubscribe = tree.subscribe((change) => {
      if (change.selection) this.scrollToIndex(tree.selectedIndex);
      this.render();
    });
    if (typeof ResizeObserver !== "undefined") {
      this.#resize = new ResizeObserver(() => this.render());
      this.#resize.observe(this.element);
    }
    this.render();
  }

  /** Redraws the rows on show (an inline value arrived). */
  refresh(): void {
    for (const entry of this.#rows.values()) entry.sig = "";
    this.render();
  }

  /** Number of row elements in the DOM. */
  get renderedRowCount(): number {
    return this.#rows.size;
  }

  dispose(): void {
    this.#unsubscribe();
    this.#resize?.disconnect();
    this.element.removeEventListener("scroll", this.#onScroll);
    this.element.removeEventListener("keydown", this.#onKeyDown);
    this.element.removeEventListener("click", this.#onClick);
    this.element.removeEventListener("dblclick", this.#onDoubleClick);
  }

  /** Scrolls just enough for row `index` to be fully visible. */
  scrollToIndex(index: number): void {
    const top = index * this.#rowHeight;
    const height = this.#viewportHeight();
    const el = this.element;
    if (top < el.scrollTop) el.scrollTop = top;
    else if (top + this.#rowHeight > el.scrollTop + height) {
      el.scrollTop = top + this.#rowHeight - height;
    }
  }

  render(): void {
    const tree = this.#tree;
    const count = tree.rowCount;
    this.#spacer.style.height = `${count * this.#rowHeight}px`;
    const first = Math.floor(this.element.scrollTop / this.#rowHeight);
    const visible = Math.ceil(this.#viewportHeight() / this.#rowHeight);
    const start = Math.max(0, first - this.#overscan);
    const end = Math.min(count, first + visible + this.#overscan);
    for (const [index, { el }] of this.#rows) {
      if (index < start || index >= end) {
        el.remove();
        this.#rows.delete(index);
      }
    }
    for (let i = start; i < end; i++) {
      const row = tree.row(i);
      if (row) this.#renderRow(row);
    }
    const selected = tree.selectedIndex;
    if (this.#rows.has(selected)) {
      this.element.setAttribute("aria-activedescendant", `${this.#idPrefix}-${selected}`);
    } else {
      this.element.removeAttribute("aria-activedescendant");
    }
    tree.ensureRange(start, end);
  }

  #renderRow(row: TreeRow): void {
    let entry = this.#rows.get(row.index);
    if (!entry) {
      const el = document.createElement("div");
      el.className = "tdview-row";
      el.setAttribute("role", "treeitem");
      el.id = `${this.#idPrefix}-${row.index}`;
      el.dataset.index = String(row.index);
      el.style.transform = `translateY(${row.index * this.#rowHeight}px)`;
      this.#spacer.append(el);
      entry = { el, sig: "" };
      this.#rows.set(row.index, entry);
    }
    const { el } = entry;
    el.setAttribute("aria-level", String(row.depth));
    el.setAttribute("aria-setsize", String(row.setSize));
    el.setAttribute("aria-posinset", String(row.posInSet));
    el.setAttribute("aria-selected", String(row.selected));
    if (row.expandable) el.setAttribute("aria-expanded", String(row.expanded));
    else el.removeAttribute("aria-expanded");
    if (row.node) el.removeAttribute("aria-busy");
    else el.setAttribute("aria-busy", "true");
    el.classList.toggle("tdview-selected", row.selected);
    el.style.setProperty("--tdview-depth", String(row.depth - 1));
    const inline = row.node ? (this.#inlineValue?.(row.node) ?? "") : "";
    const sig = rowSignature(row) + inline;
    if (sig !== entry.sig) {
      this.#fillRow(el, row);
      if (inline) appendInline(el, inline);
      entry.sig = sig;
    }
  }

  #viewportHeight(): number {
    return this.element.clientHeight || this.#height;
  }

  #rowIndexOf(target: EventTarget | null): number {
    const el = target instanceof Element ? target.closest<HTMLElement>(".tdview-row") : null;
    return el?.dataset.index === undefined ? -1 : Number(el.dataset.index);
  }

  readonly #onScroll = (): void => this.render();

  readonly #onKeyDown = (event: KeyboardEvent): void => {
    const result = this.#keyboard.handle(event.key, event);
    if (!result.handled) return;
    // JupyterLab skips its shortcuts for a keydown whose default was prevented, so typing
    // "d d" to find a key does not delete the cell.
    event.preventDefault();
    event.stopPropagation();
    this.scrollToIndex(this.#tree.selectedIndex);
    this.render();
    if (result.activated) this.#onActivate?.(result.activated);
  };

  readonly #onClick = (event: MouseEvent): void => {
    const index = this.#rowIndexOf(event.target);
    if (index < 0) return;
    this.element.focus();
    const onTwisty = event.target instanceof Element && event.target.closest(".tdview-twisty");
    if (onTwisty) void this.#tree.toggle(index);
    this.#tree.selectIndex(index);
  };

  readonly #onDoubleClick = (event: MouseEvent): void => {
    const index = this.#rowIndexOf(event.target);
    const row = this.#tree.row(index);
    if (!row?.node) return;
    if (row.expandable) void this.#tree.toggle(index);
    else this.#onActivate?.(row.node.path);
  };
}
