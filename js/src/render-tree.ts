/**
 * A virtualized ARIA tree drawn from a `TreeModel`.
 *
 * Rows have a fixed height and are absolutely positioned inside a spacer as tall as
 * all rows together; only the rows in the viewport (plus `overscan`) exist in the DOM.
 * Focus stays on the `role="tree"` element, which points at the selected row with
 * `aria-activedescendant` (the selected row is always scrolled into the DOM).
 */

import { dotGroupOf } from "./dot-groups";
import { describeShape, formatCount, humanBytes, nodeLabel } from "./format";
import { estimateMeasure, type Measure, measureFor, middleCut, shapeForms } from "./middle-cut";
import type { NodeSummary, Path } from "./protocol";
import { type FitPart, fitRow } from "./row-fit";
import { type KeyResult, TreeKeyboard } from "./tree-keyboard";
import type { TreeModel, TreeRow } from "./tree-model";

export interface TreeViewOptions {
  /** Row height in px; must match `--tdview-row-height` in styles.css. */
  rowHeight?: number;
  /** Viewport height used while the element has no layout (e.g. not yet attached). */
  height?: number;
  /** Row width used while the element has no layout (default: nothing is cut). */
  width?: number;
  overscan?: number;
  label?: string;
  /** Called when Enter or a double click activates a row. */
  onActivate?: (path: Path) => void;
  /** A short text shown after a row's key (`= 1200` for a non-tensor value, the root's
   * tensor count), or "" while it is not known; `refresh()` redraws once it is. */
  inlineValue?: (node: NodeSummary) => string;
  keyboard?: TreeKeyboard;
  /** Draws a row's content instead of the checkpoint row (the compare view's marks), in
   * the room the row has (`rowWidth`). */
  fillRow?: (el: HTMLElement, row: TreeRow, room: RowRoom) => void;
  /** A row's tooltip ("" for its path); `refresh()` redraws once it changes. */
  rowTitle?: (node: NodeSummary) => string;
}

let nextViewId = 0;

function span(className: string, text: string): HTMLSpanElement {
  const el = document.createElement("span");
  el.className = className;
  el.textContent = text;
  return el;
}

/** The fonts a row is drawn in, and the width it has (null: not laid out, nothing cut). */
export interface RowRoom {
  width: number | null;
  code: Measure;
  badge: Measure;
  ui: Measure;
}

/** What a checkpoint row shows beside its node. */
interface RowExtras {
  inline: string;
  title: string;
  room: RowRoom;
}

/** px the row's padding, twisty and gaps take (styles.css, tree.css). */
const ROW_PAD_LEFT = 4;
const ROW_PAD_RIGHT = 8;
const INDENT = 16;
const TWISTY = 12;
const GAP = 6;
/** A badge's padding and border. */
const BADGE_PAD = 10;
/** The most px an inline value keeps before the key is cut (it cuts itself after). */
const INLINE_MAX = 96;
/** px an optimizer state's parameter name (`→ encoder.0.weight`) is cut to, in turn. */
const PARAM_WIDTHS = [240, 160, 96];
/** Rounding of measured text against the laid-out one. */
const SLACK = 2;

/** What the row's content depends on: the element of an index is reused for other rows. */
function rowSignature(row: TreeRow): string {
  return JSON.stringify([row.label, row.expanded, row.expandable, row.error, row.node]);
}

/** The forms of a row's inline text: a parameter's name cut in the middle, its end kept
 * (`weight` or `bias`), else the text whole (at most `INLINE_MAX` px: CSS cuts it). */
export function inlinePart(inline: string, code: Measure): FitPart {
  if (!inline.startsWith("→ ")) {
    return { forms: inline ? [inline] : [], measure: code, maxWidth: INLINE_MAX };
  }
  const cuts = PARAM_WIDTHS.map((width) => middleCut(inline, width, code));
  return { forms: [...new Set([inline, ...cuts])], measure: code };
}

/** The annotations of a node (badge, shape, dtype, inline value, size) with their forms,
 * and the order in which they give way to the key. */
function annotations(node: NodeSummary, inline: string, room: RowRoom) {
  const { code, badge, ui } = room;
  const group = dotGroupOf(node);
  if (group) {
    // a group of keys: how many keys it holds, and their size
    const parts: FitPart[] = [
      { forms: [], measure: code },
      { forms: [], measure: badge },
      { forms: [`${formatCount(group.keys)} keys`], measure: code },
      { forms: [], measure: code },
      { forms: node.bytes === null ? [] : [humanBytes(node.bytes)], measure: ui },
    ];
    return { parts, steps: [2, 4] };
  }
  const dims = node.kind === "leaf" ? node.shape : node.batch_size;
  const described = describeShape(node);
  const shapeText =
    dims === null || (node.kind !== "leaf" && dims.length === 0)
      ? described && node.kind !== "leaf"
        ? [described]
        : []
      : shapeForms(dims) // `[…]` alone says nothing: the shape hides before it
          .slice(0, dims.length === 0 ? 1 : -1)
          .map((f) => (node.kind === "leaf" ? f : `batch ${f}`));
  const parts: FitPart[] = [
    inlinePart(inline, code),
    { forms: [nodeLabel(node)], measure: badge, pad: BADGE_PAD },
    { forms: shapeText, measure: code },
    { forms: node.kind === "leaf" && node.dtype ? [node.dtype] : [], measure: code },
    { forms: node.bytes === null ? [] : [humanBytes(node.bytes)], measure: ui },
  ];
  const [INLINE, BADGE, SHAPE, DTYPE, BYTES] = [0, 1, 2, 3, 4];
  const shrinks = Array.from({ length: Math.max(0, shapeText.length - 1) }, () => SHAPE);
  const cuts = Array.from({ length: Math.max(1, parts[INLINE]?.forms.length ?? 0) }, () => INLINE);
  const steps = [BADGE, ...shrinks, DTYPE, SHAPE, ...cuts, BYTES];
  return { parts, steps };
}

/** px a row has for its key and annotations: its width less the indent, padding and
 * twisty, and `taken` px of what else it draws; infinite while it has no layout. */
export function rowWidth(row: TreeRow, room: RowRoom, taken = 0): number {
  if (room.width === null) return Number.POSITIVE_INFINITY;
  const frame = (row.depth - 1) * INDENT + ROW_PAD_LEFT + ROW_PAD_RIGHT + TWISTY + GAP;
  return room.width - frame - taken - SLACK;
}

function fillNodeRow(el: HTMLElement, row: TreeRow, node: NodeSummary, extras: RowExtras): void {
  const { room } = extras;
  const { parts, steps } = annotations(node, extras.inline, room);
  const problem = node.problems.length > 0;
  const width = rowWidth(row, room, problem ? room.ui("⚠") + GAP : 0);
  const fit = fitRow(row.label, room.code, parts, steps, width, GAP);
  const [inline = "", badge = "", shape = "", dtype = "", bytes = ""] = fit.texts;
  const key = span("tdview-key", fit.key);
  key.classList.toggle("tdview-key-cut", fit.key !== row.label);
  const out: HTMLElement[] = [key];
  if (inline) out.push(span("tdview-inline-value", inline));
  if (badge) out.push(span(`tdview-badge tdview-kind-${node.kind}`, badge));
  // always there, empty when hidden (tree.css hides it then): rows read alike
  out.push(span("tdview-shape", [shape, dtype].filter(Boolean).join(" ")));
  if (bytes) out.push(span("tdview-bytes", bytes));
  if (problem) {
    const warn = span("tdview-problem", "⚠");
    warn.title = node.problems.join("\n");
    out.push(warn);
  }
  el.append(...out);
}

function fillRow(el: HTMLElement, row: TreeRow, extras: RowExtras): void {
  const twisty = span("tdview-twisty", row.expandable ? (row.expanded ? "▾" : "▸") : "");
  twisty.setAttribute("aria-hidden", "true");
  el.replaceChildren(twisty);
  const node = row.node;
  if (!node) {
    el.append(span("tdview-placeholder", row.error ? `⚠ ${row.error}` : "…"));
    el.title = "";
    return;
  }
  fillNodeRow(el, row, node, extras);
  const group = dotGroupOf(node);
  el.classList.toggle("tdview-group-row", group !== undefined);
  el.title = group
    ? `${group.prefix}… (${formatCount(group.keys)} keys: a group, not a key)`
    : extras.title || node.path.join(" / ") || row.label;
}

/** Text after the row's key: `= value` of a non-tensor, the root's tensor count (a
 * row drawn by the `fillRow` option). */
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
  readonly #fillRow: TreeViewOptions["fillRow"];
  readonly #rowTitle: ((node: NodeSummary) => string) | undefined;
  readonly #width: number | undefined;
  #measures: Omit<RowRoom, "width"> | null = null;
  readonly #unsubscribe: () => void;
  readonly #resize: ResizeObserver | null = null;

  constructor(tree: TreeModel, options: TreeViewOptions = {}) {
    this.#tree = tree;
    this.#rowHeight = options.rowHeight ?? 24;
    this.#height = options.height ?? 360;
    this.#overscan = options.overscan ?? 8;
    this.#onActivate = options.onActivate;
    this.#inlineValue = options.inlineValue;
    this.#fillRow = options.fillRow;
    this.#rowTitle = options.rowTitle;
    this.#width = options.width;
    this.#keyboard = options.keyboard ?? new TreeKeyboard(tree);
    // a key that waited for a level to load lands later: shown as one handled at once
    this.#keyboard.onLateResult = (result) => this.#keyApplied(result);
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
      this.#resize = new ResizeObserver(() => {
        this.#measures = null; // a theme or zoom may change the fonts with the size
        this.render();
      });
      this.#resize.observe(this.element);
    }
    this.render();
  }

  /** Redraws the rows on show (an inline value or a title arrived, the fonts changed). */
  refresh(): void {
    this.#measures = null;
    for (const entry of this.#rows.values()) entry.sig = "";
    this.render();
  }

  /** Number of row elements in the DOM. */
  get renderedRowCount(): number {
    return this.#rows.size;
  }

  dispose(): void {
    this.#unsubscribe();
    this.#keyboard.onLateResult = null;
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
    const room = this.#room();
    for (let i = start; i < end; i++) {
      const row = tree.row(i);
      if (row) this.#renderRow(row, room);
    }
    const selected = tree.selectedIndex;
    if (this.#rows.has(selected)) {
      this.element.setAttribute("aria-activedescendant", `${this.#idPrefix}-${selected}`);
    } else {
      this.element.removeAttribute("aria-activedescendant");
    }
    tree.ensureRange(start, end);
  }

  #renderRow(row: TreeRow, room: RowRoom | null): void {
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
    const node = row.node;
    const inline = node ? (this.#inlineValue?.(node) ?? "") : "";
    if (this.#fillRow || !room) {
      const sig = rowSignature(row) + inline + room?.width;
      if (sig === entry.sig) return;
      if (room) this.#fillRow?.(el, row, room);
      if (inline) appendInline(el, inline);
      entry.sig = sig;
      return;
    }
    const title = node ? (this.#rowTitle?.(node) ?? "") : "";
    const sig = JSON.stringify([rowSignature(row), inline, title, room.width]);
    if (sig === entry.sig) return;
    fillRow(el, row, { inline, title, room });
    entry.sig = sig;
  }

  /** The row's width and fonts, measured once per size (see the ResizeObserver). */
  #room(): RowRoom {
    const laid = this.element.clientWidth;
    const width = laid > 0 ? laid : (this.#width ?? null);
    if (!this.#measures) {
      if (laid > 0) {
        // probes in the row's own classes: the fonts the stylesheet gives them
        const probe = document.createElement("div");
        probe.className = "tdview-row tdview-row-probe";
        probe.setAttribute("aria-hidden", "true");
        const [key, badge, bytes] = ["tdview-key", "tdview-badge", "tdview-bytes"].map((c) =>
          span(c, ""),
        ) as [HTMLElement, HTMLElement, HTMLElement];
        probe.append(key, badge, bytes);
        this.#spacer.append(probe);
        this.#measures = { code: measureFor(key), badge: measureFor(badge), ui: measureFor(bytes) };
        probe.remove();
      } else {
        this.#measures = {
          code: estimateMeasure(12),
          badge: estimateMeasure(11),
          ui: estimateMeasure(13),
        };
      }
    }
    return { width, ...this.#measures };
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
    this.#keyApplied(result);
  };

  #keyApplied(result: KeyResult): void {
    this.scrollToIndex(this.#tree.selectedIndex);
    this.render();
    if (result.activated) this.#onActivate?.(result.activated);
  }

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
