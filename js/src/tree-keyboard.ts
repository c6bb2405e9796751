/**
 * Keyboard behaviour of an ARIA tree (WAI-ARIA APG "Tree View"), on a `TreeModel`.
 *
 * Up/Down move by one visible row, Home/End to the first/last row. Right expands a
 * closed node, or moves into an open one; Left collapses an open node, or moves to the
 * parent. Enter toggles a node and activates a leaf. A printable character starts or
 * extends a type-ahead: the next row whose key starts with the typed prefix (case
 * insensitive, wrapping) is selected; repeating one character cycles through matches.
 *
 * A key pressed while the tree is settling (an expand waits for its first page, the
 * selected row is still a placeholder) waits, and so does every key after it: they are
 * applied in order once the rows have loaded, so a walk at key-repeat speed ends where
 * the same keys pressed slowly end. Their results reach `onLateResult`.
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

/** The most keys that wait for a level to load (more are dropped). */
export const MAX_WAITING_KEYS = 256;

interface WaitingKey {
  key: string;
  at: number;
}

const NAV_KEYS = new Set([
  "ArrowDown",
  "ArrowUp",
  "Home",
  "End",
  "ArrowRight",
  "ArrowLeft",
  "Enter",
]);

export class TreeKeyboard {
  readonly #tree: TreeModel;
  readonly #timeoutMs: number;
  readonly #now: () => number;
  #typed = "";
  #lastTyped = Number.NEGATIVE_INFINITY;
  readonly #waiting: WaitingKey[] = [];
  #draining = false;
  /** Gets the result of each key that waited, once it is applied. */
  onLateResult: ((result: KeyResult) => void) | null = null;

  constructor(tree: TreeModel, options: { typeAheadMs?: number; now?: () => number } = {}) {
    this.#tree = tree;
    this.#timeoutMs = options.typeAheadMs ?? 500;
    this.#now = options.now ?? (() => Date.now());
  }

  /** Keys pressed and not applied yet. */
  get waiting(): number {
    return this.#waiting.length;
  }

  handle(key: string, mods: KeyModifiers = {}): KeyResult {
    if (!this.#accepts(key, mods)) return { handled: false };
    const at = this.#now();
    if (this.#waiting.length === 0 && !this.#tree.settling) return this.#apply(key, at);
    if (this.#waiting.length < MAX_WAITING_KEYS) this.#waiting.push({ key, at });
    void this.#drain();
    return { handled: true };
  }

  #accepts(key: string, mods: KeyModifiers): boolean {
    if (key.length !== 1) return NAV_KEYS.has(key);
    if (mods.ctrlKey || mods.metaKey || mods.altKey) return false;
    // a space extends a type-ahead under way (or one still waiting), else it is not ours
    return key !== " " || this.#typed !== "" || this.#waiting.length > 0;
  }

  async #drain(): Promise<void> {
    if (this.#draining) return;
    this.#draining = true;
    try {
      for (let next = this.#waiting[0]; next; next = this.#waiting[0]) {
        await this.#tree.whenSettled();
        this.#waiting.shift();
        this.onLateResult?.(this.#apply(next.key, next.at));
      }
    } finally {
      this.#draining = false;
    }
  }

  #apply(key: string, at: number): KeyResult {
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
      case "Enter": {
        if (row?.expandable) void tree.toggle(current);
        const path = tree.selectedPath; // null on a group of keys: it is no node
        return path ? { handled: true, activated: path } : { handled: true };
      }
      default:
        this.#typeAhead(key.toLowerCase(), at);
        return { handled: true };
    }
  }

  #typeAhead(char: string, now: number): void {
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
      const row = tree.row(index);
      const key = row?.node ? row.label : undefined;
      if (index > 0 && key?.toLowerCase().startsWith(prefix)) {
        tree.selectIndex(index);
        return;
      }
    }
  }
}
