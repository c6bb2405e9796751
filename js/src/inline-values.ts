/**
 * The short values shown in the rows of non-tensor nodes (`run_name = "tiny-demo"`,
 * `step = 1200`, `config = {lr: 0.001, …}`): asked for with `node` the first time a row
 * shows, a few at a time, and kept. The full value stays in the details.
 */

import type { DataSource } from "./data-source";
import { mayHaveParam } from "./duplicates-protocol";
import type { NodeSummary } from "./protocol";

/** The kinds whose value a row shows. */
const VALUE_KINDS = new Set(["non_tensor", "json"]);

/** The longest inline text, in characters (longer ends in "…"). */
export const MAX_INLINE_CHARS = 60;

/** A value as a short line: strings quoted, objects as `{key: value, …}`. */
export function inlineText(value: unknown, limit = MAX_INLINE_CHARS): string {
  const text = shortJson(value, 0);
  return text.length > limit ? `${text.slice(0, limit - 1)}…` : text;
}

function shortJson(value: unknown, depth: number): string {
  if (value === null || value === undefined) return "None";
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value !== "object") return String(value);
  if (depth >= 2) return Array.isArray(value) ? "[…]" : "{…}";
  if (Array.isArray(value)) return `[${value.map((v) => shortJson(v, depth + 1)).join(", ")}]`;
  const entries = Object.entries(value as Record<string, unknown>);
  return `{${entries.map(([k, v]) => `${k}: ${shortJson(v, depth + 1)}`).join(", ")}}`;
}

export class InlineValues {
  readonly #source: DataSource;
  readonly #onChange: () => void;
  readonly #concurrency: number;
  readonly #texts = new Map<string, string>();
  readonly #queue: NodeSummary[] = [];
  readonly #abort = new AbortController();
  #running = 0;

  constructor(source: DataSource, onChange: () => void, concurrency = 4) {
    this.#source = source;
    this.#onChange = onChange;
    this.#concurrency = concurrency;
  }

  /** The row's text (`= 1200`), or "" (then it is asked for, once). */
  textOf = (node: NodeSummary): string => {
    const valued = VALUE_KINDS.has(node.kind) && !node.pickled;
    if (!valued && !mayHaveParam(node)) return ""; // an optimizer state: its parameter
    const key = JSON.stringify(node.path);
    const known = this.#texts.get(key);
    if (known !== undefined) return known;
    this.#texts.set(key, "");
    this.#queue.push(node);
    this.#pump();
    return "";
  };

  dispose(): void {
    this.#abort.abort();
    this.#queue.length = 0;
  }

  #pump(): void {
    while (this.#running < this.#concurrency && this.#queue.length > 0) {
      const node = this.#queue.shift() as NodeSummary;
      this.#running++;
      void this.#fetch(node).finally(() => {
        this.#running--;
        this.#pump();
      });
    }
  }

  async #fetch(node: NodeSummary): Promise<void> {
    try {
      const details = await this.#source.node(node.path, {
        signal: this.#abort.signal,
        totals: false,
      });
      const name = details.param?.name;
      const value = details.value === null ? "" : `= ${inlineText(details.value)}`;
      const text = name ? `→ ${name}` : value;
      if (this.#abort.signal.aborted || !text) return;
      this.#texts.set(JSON.stringify(node.path), text);
      this.#onChange();
    } catch {
      // a value that cannot be read shows none here: its details say why
    }
  }
}
