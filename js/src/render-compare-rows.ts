/**
 * The rows of the compare view's tree (a `TreeView` row painter, `fillCompareRow`) and its
 * keyboard: the normal tree's keys, and `]` / `[` (or Alt+↓ / Alt+↑) for the next and the
 * previous difference.
 */

import {
  factsText,
  markOf,
  rollupCounts,
  rollupText,
  rowVerdict,
  scalarChange,
  verdict,
} from "./compare-format";
import { type CompareNode, isCompareNode } from "./compare-model";
import { el } from "./dom";
import { formatCount } from "./format";
import { type KeyModifiers, type KeyResult, TreeKeyboard } from "./tree-keyboard";
import type { TreeModel, TreeRow } from "./tree-model";

/** The keys of next / previous difference, as the toolbar and the hint say them. */
export const NEXT_KEYS = "]";
export const PREVIOUS_KEYS = "[";
export const KEYS_HINT =
  "Keys: ] next difference · [ previous difference (or Alt+↓ / Alt+↑) · ↑ ↓ move · → ← open, close";

/** A span of text with a class. */
export function span(className: string, text: string): HTMLSpanElement {
  return el("span", className, text);
}

/** The counts of a subtree as small chips: "~3 +1 -1". */
function countChips(node: CompareNode): HTMLElement | null {
  const r = node.diff.rollup;
  if (!r || !node.diff.has_children) return null;
  const own = node.diff.status === "same" ? null : node.diff.status;
  const box = span("tdview-compare-counts", "");
  for (const [mark, n, word] of rollupCounts(r)) {
    // a node added or removed whole: its own count says it, the chips count what is below
    const count = own && word === own ? n - 1 : n;
    if (count <= 0) continue;
    const chip = span(
      `tdview-count tdview-count-${word.replace(" ", "-")}`,
      `${mark}${formatCount(count)}`,
    );
    chip.title = `${formatCount(count)} ${word} below`;
    box.append(chip);
  }
  box.title = rollupText(r);
  return box.childElementCount ? box : null;
}

/** What a compare row shows of its two sides' facts: "float32 [4, 3]", or "a → b". */
function factsShort(node: CompareNode): string {
  const { a, b } = node.diff;
  const text = (f: typeof a) => (f ? factsText(f).replace(/ · .*$/, "") : "");
  const ta = text(a);
  const tb = text(b);
  if (a && b && ta !== tb) return `${ta} → ${tb}`;
  return tb || ta;
}

/** Draws a compare row (see `TreeViewOptions.fillRow`). */
export function fillCompareRow(el: HTMLElement, row: TreeRow): void {
  const parts: HTMLElement[] = [];
  const twisty = span("tdview-twisty", row.expandable ? (row.expanded ? "▾" : "▸") : "");
  twisty.setAttribute("aria-hidden", "true");
  parts.push(twisty);
  const node = row.node;
  if (!isCompareNode(node)) {
    el.dataset.status = "";
    parts.push(span("tdview-placeholder", row.error ? `⚠ ${row.error}` : "…"));
    el.replaceChildren(...parts);
    el.title = "";
    el.removeAttribute("aria-label");
    return;
  }
  const item = node.diff;
  const status = item.problem ? "problem" : item.status;
  el.dataset.status = status;
  const mark = span(`tdview-mark tdview-mark-${status}`, markOf(item));
  mark.setAttribute("aria-hidden", "true");
  parts.push(mark, span("tdview-key", row.label));
  const scalar = row.index > 0 ? scalarChange(item) : "";
  if (scalar) parts.push(span(`tdview-compare-scalar tdview-verdict-${status}`, scalar));
  if (item.renamed_from) {
    parts.push(span("tdview-compare-from", `← ${item.renamed_from[item.renamed_from.length - 1]}`));
  }
  if (!item.has_children) parts.push(span("tdview-shape", factsShort(node)));
  else if (item.b ?? item.a) parts.push(span("tdview-shape", (item.b ?? item.a)?.class ?? ""));
  const said = verdict(item);
  const short = rowVerdict(item);
  if (short && row.index > 0) {
    const words = span(`tdview-verdict tdview-verdict-${status}`, short);
    if (item.unverified) words.classList.add("tdview-verdict-unverified");
    parts.push(words);
  }
  const chips = countChips(node);
  if (chips) parts.push(chips);
  el.replaceChildren(...parts);
  const where = node.path.join(" / ") || row.label;
  const told = [scalar, said].filter(Boolean).join(", ");
  el.title = told ? `${where}: ${told}` : where;
  // what a screen reader hears for the mark
  el.setAttribute("aria-label", `${row.label}${told ? `, ${told}` : ""}`);
}

/** The tree keyboard, and `]` / `[` (or Alt+↓ / Alt+↑) for the next / previous difference. */
export class CompareKeyboard extends TreeKeyboard {
  readonly #step: (direction: 1 | -1) => void;

  constructor(tree: TreeModel, step: (direction: 1 | -1) => void) {
    super(tree);
    this.#step = step;
  }

  override handle(key: string, mods: KeyModifiers = {}): KeyResult {
    const plain = !mods.ctrlKey && !mods.metaKey;
    if (plain && (key === NEXT_KEYS || (key === "ArrowDown" && mods.altKey))) {
      this.#step(1);
      return { handled: true };
    }
    if (plain && (key === PREVIOUS_KEYS || (key === "ArrowUp" && mods.altKey))) {
      this.#step(-1);
      return { handled: true };
    }
    return super.handle(key, mods);
  }
}
