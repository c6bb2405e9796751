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
  spelledPaths,
  verdict,
} from "./compare-format";
import { type CompareNode, isCompareNode } from "./compare-model";
import type { DiffFacts, DiffItem } from "./compare-protocol";
import { el } from "./dom";
import { formatCount } from "./format";
import { shapeForms } from "./middle-cut";
import { type RowRoom, rowWidth } from "./render-tree";
import { type FitPart, type FitResult, fitRow } from "./row-fit";
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

/** The forms of what a compare row shows of its two sides' facts, from whole to
 * shortest: "float32 [8, 32]", "float32 [8, …]", …; "a → b" when they differ (whole or
 * not at all). */
function factsForms(item: DiffItem): string[] {
  const { a, b } = item;
  if (item.has_children) {
    const name = (b ?? a)?.class ?? "";
    return name ? [name] : [];
  }
  const text = (f: DiffFacts | null) => (f ? factsText(f).replace(/ · .*$/, "") : "");
  const ta = text(a);
  const tb = text(b);
  if (a && b && ta !== tb) return [`${ta} → ${tb}`];
  const facts = b ?? a;
  if (!facts) return [];
  if (facts.kind !== "leaf" || !facts.shape) return [tb || ta];
  const prefix = `${facts.dtype ?? "?"} ${facts.nested ? "nested " : ""}`;
  // `[…]` alone says nothing: the dtype stands alone before it all gives way
  const forms = shapeForms(facts.shape).slice(0, facts.shape.length === 0 ? 1 : -1);
  return [...forms.map((form) => prefix + form), facts.dtype ?? ""];
}

/** px a mark takes (1.2em, styles.css) with its gap. */
const MARK_PX = 16 + 6;
const GAP = 6;

/** Draws a compare row (see `TreeViewOptions.fillRow`): the key whole, its annotations
 * giving way first (the shape's trailing dims, the verdict, the facts, the renamed-from,
 * the scalar); a key longer than the row is cut in the middle. */
export function fillCompareRow(el: HTMLElement, row: TreeRow, room?: RowRoom): void {
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
  const scalar = row.index > 0 ? scalarChange(item) : "";
  const spelled = spelledPaths(item).map(([side, real]) => `${side}: ${real[real.length - 1]}`);
  const from = item.renamed_from
    ? `← ${item.renamed_from[item.renamed_from.length - 1]}`
    : spelled.join(" ");
  const said = verdict(item);
  const short = row.index > 0 ? rowVerdict(item) : "";
  const chips = countChips(node);
  const fit = fitCompare(row, room, chips, [scalar, from, short], factsForms(item));
  const [scalarShown = "", fromShown = "", facts = "", verdictShown = ""] = fit.texts;
  const key = span("tdview-key", fit.key);
  key.classList.toggle("tdview-key-cut", fit.key !== row.label);
  parts.push(mark, key);
  if (scalarShown) parts.push(span(`tdview-compare-scalar tdview-verdict-${status}`, scalarShown));
  if (fromShown) parts.push(span("tdview-compare-from", fromShown));
  parts.push(span("tdview-shape", facts));
  if (verdictShown) {
    const words = span(`tdview-verdict tdview-verdict-${status}`, verdictShown);
    if (item.unverified) words.classList.add("tdview-verdict-unverified");
    parts.push(words);
  }
  if (chips) parts.push(chips);
  el.replaceChildren(...parts);
  const where = node.path.join(" / ") || row.label;
  const told = [scalar, said].filter(Boolean).join(", ");
  el.title = told ? `${where}: ${told}` : where;
  // what a screen reader hears for the mark
  el.setAttribute("aria-label", `${row.label}${told ? `, ${told}` : ""}`);
}

/** The key and the forms shown of [scalar, renamed-from, facts, verdict] in the room. */
function fitCompare(
  row: TreeRow,
  room: RowRoom | undefined,
  chips: HTMLElement | null,
  [scalar, from, short]: string[],
  facts: string[],
): FitResult {
  const texts = [scalar ?? "", from ?? "", facts[0] ?? "", short ?? ""];
  if (!room || room.width === null) return { key: row.label, texts };
  const chipsPx = chips
    ? [...chips.children].reduce((sum, c) => sum + room.code(c.textContent ?? "") + GAP, 0)
    : 0;
  const parts: FitPart[] = [
    { forms: scalar ? [scalar] : [], measure: room.code },
    { forms: from ? [from] : [], measure: room.code },
    { forms: facts, measure: room.code },
    { forms: short ? [short] : [], measure: room.ui },
  ];
  const [SCALAR, FROM, FACTS, VERDICT] = [0, 1, 2, 3];
  const shrinks = Array.from({ length: Math.max(0, facts.length - 1) }, () => FACTS);
  const steps = [VERDICT, ...shrinks, FACTS, FROM, SCALAR];
  const width = rowWidth(row, room, MARK_PX + chipsPx);
  return fitRow(row.label, room.code, parts, steps, width, GAP);
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
