/**
 * Keyboard behaviour of an ARIA tree (WAI-ARIA APG "Tree View"), on a `TreeModel`.
 *
 * Up/Down move by one visible row, Home/End to the first/last row. Right expands a
 * closed node, or moves into an open one; Left collapses an open node, or moves to the
 * parent. Enter toggles a node and activates a leaf. A printable character starts or
 * extends a type-ahead: the next row whose key starts with the typed prefix (case
 * insensitive, wrapping) is selected; repeating one character cycles through matches.
 */

import type { Path } from "./protocol";
import type { TreeModel } from "./tree-model";

export interface KeyResult {
  handled: boolean;
  /** Set when Enter activated a row: the path of its node. */
  activated?: Path;
}

export interface KeyModifiers {
  ctrlKey?: boolean;
  metaKey?: boolean;
  altKey?: boolean;
}

export class TreeKeyboard {
  readonly #tree: TreeModel;
  readonly #timeoutMs: number;
  readonly #now: () => number;
  #typed = "";
  #lastTyped = Number.NEGATIVE_INFINITY;

  constructor(tree: TreeModel, options: { typeAheadMs?: number; now?: () => number } = {}) {
    this.#tree = tree;
    this.#timeoutMs = options.typeAheadMs ?? 500;
    this.#now = options.now ?? (() => Date.now());
  }

  handle(key: string, mods: KeyModifiers = {}): KeyResult {
    const tree = this.#tree;
    const current = tree.selectedIndex;
    const row = tree.row(current);
    const last = tree.rowCount - 1;
    switch (key) {
      case "ArrowDown":
        tree.selectIndex(Math.min(current + 1, last));
        return { handled: true };
      case "ArrowUp":
        tree.selectIndex(Math.max(current - 1, 0));
        return { handled: true };
      case "Home":
        tree.selectIndex(0);
        return { handled: true };
      case "End":
        tree.selectIndex(last);
        return { handled: true };
      case "ArrowRight":
        if (row?.expandable && !row.expanded) void tree.expand(current);
        else if (row?.expanded && tree.parentIndex(current + 1) === current) {
          tree.selectIndex(current + 1);
        }
        return { handled: true };
      case "ArrowLeft":
        if (row?.expanded) tree.collapse(current);
        else if (current > 0) tree.selectIndex(tree.parentIndex(current));
        return { handled: true };
      case "Enter":
        if (row?.expandable) void tree.toggle(current);
        return row?.node ? { handled: true, activated: row.node.path } : { handled: true };
      default:
        if (key.length !== 1 || mods.ctrlKey || mods.metaKey || mods.altKey) {
          return { handled: false };
        }
        if (key === " " && this.#typed === "") return { handled: false };
        this.#typeAhead(key.toLowerCase());
        return { handled: true };
    }
  }

  #typeAhead(char: string): void {
    const now = this.#now();
    if (now - this.#lastTyped > this.#timeoutMs) this.#typed = "";
    this.#lastTyped = now;
    this.#typed += char;
    const typed = this.#typed;
    const repeated = [...typed].every((c) => c === typed[0]);
    const prefix = repeated ? char : typed;
    const tree = this.#tree;
    const n = tree.rowCount;
    // A longer prefix may still match the current row; a new or repeated letter moves on.
    const start = repeated ? tree.selectedIndex + 1 : tree.selectedIndex;
    for (let k = 0; k < n; k++) {
      const index = (start + k) % n;
      const key = tree.row(index)?.node?.key;
      if (index > 0 && key?.toLowerCase().startsWith(prefix)) {
        tree.selectIndex(index);
        return;
      }
    }
  }
}
