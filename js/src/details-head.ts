/**
 * The head of the details panel: the node's name, its one-line summary (a tensor's in
 * the lovely-tensors style, tensor-summary.ts, with its statistics once a preview
 * computed them) and the toggle that gives the panel the whole width of the view.
 * It keeps the statistics of the leaves previewed, so that a tree row can show its
 * summary as its tooltip (`summaryOf`).
 */

import type { DataSource, PreviewData } from "./data-source";
import { button, el } from "./dom";
import { formatShape, humanBytes, nodeLabel, rollupContents } from "./format";
import type { NodeDetails, NodeSummary, Path, PreviewStats } from "./protocol";
import { tensorSummary } from "./tensor-summary";

/** The header's line: a tensor's summary (with its statistics once a preview computed
 * them), else the node's kind and size ("TensorDict · batch [3] · 43.4 MB in 142
 * tensors", the size once it is known). */
export function headerSummary(d: NodeDetails, stats: PreviewStats | null = null): string {
  if (d.kind === "leaf" && d.dtype !== null && d.shape !== null) {
    return tensorSummary({ dtype: d.dtype, shape: d.shape, bytes: d.bytes, stats });
  }
  const named = d.kind === "checkpoint" || d.kind === "collection" || !d.class_name;
  const parts = [named ? nodeLabel(d) : d.class_name];
  if (d.batch_size?.length) parts.push(`batch ${formatShape(d.batch_size)}`);
  const r = d.rollup;
  if (r) parts.push(`${humanBytes(r.bytes)} in ${rollupContents(r)}`);
  else if (d.bytes !== null) parts.push(humanBytes(d.bytes));
  return parts.join(" · ");
}

/** The statistics of a preview when they describe the whole tensor (not a slice, not
 * the written rows of a storage, not the magnitudes of complex values), else null. */
export function wholeStats(data: PreviewData): PreviewStats | null {
  const numel = data.shape.reduce((a, b) => a * b, 1);
  const stats = data.stats;
  if (!stats || stats.count !== numel || data.dtype.startsWith("complex")) return null;
  return stats;
}

/** `source`, with each preview's data also handed to `onData` (the summary reads the
 * statistics there, without reaching into the preview). */
export function tapPreviews(source: DataSource, onData: (data: PreviewData) => void): DataSource {
  return {
    children: (...args) => source.children(...args),
    node: (...args) => source.node(...args),
    search: (...args) => source.search(...args),
    devices: (...args) => source.devices(...args),
    load: (...args) => source.load(...args),
    preview: async (...args) => {
      const data = await source.preview(...args);
      onData(data);
      return data;
    },
  };
}

/** Statistics kept for the tooltips of the rows (the latest leaves previewed). */
const MAX_KEPT_STATS = 2000;

const WIDEN = "⤢ Wide";
const SPLIT = "⤡ Split";

function pathKey(path: Path): string {
  return path.join("\u0000");
}

export class DetailsHead {
  readonly element: HTMLElement;
  readonly #name: HTMLElement;
  readonly #summary: HTMLElement;
  readonly #widen: HTMLButtonElement;
  readonly #rootName: string;
  readonly #stats = new Map<string, PreviewStats>();
  #details: NodeDetails | null = null;
  #maximized = false;
  /** Called when the whole width is turned on or off (the panel lays itself out). */
  onMaximize: ((on: boolean) => void) | null = null;
  /** Called when a leaf's statistics are first known (its row's tooltip changed). */
  onStats: ((path: Path) => void) | null = null;

  /** `rootName`: what the root is called (the checkpoint's file name); `after`: what
   * follows the summary on its line (the panel's facts toggle); `actions`: buttons that
   * float right beside the Wide toggle (Sizes, Check), so they never take a line. */
  constructor(rootName = "(root)", after: HTMLElement[] = [], actions: HTMLElement[] = []) {
    this.#rootName = rootName;
    this.element = el("div", "tdview-details-head");
    this.#name = el("span", "tdview-details-name");
    this.#summary = el("code", "tdview-summary");
    this.#widen = button(WIDEN, "tdview-maximize", () => this.setMaximized(!this.#maximized));
    this.#widen.title =
      "Give the details and the preview the whole width of the view (the tree hides " +
      "until you press it again)";
    this.#widen.setAttribute("aria-label", "Full width");
    this.#widen.setAttribute("aria-pressed", "false");
    // the toggles float to the right of the first line; the rest flows as text
    this.element.append(this.#widen, ...actions, this.#name, " ", this.#summary, " ", ...after);
    this.element.hidden = true;
  }

  /** Whether the panel takes the whole width. */
  get maximized(): boolean {
    return this.#maximized;
  }

  setMaximized(on: boolean): void {
    this.#maximized = on;
    this.#widen.textContent = on ? SPLIT : WIDEN;
    this.#widen.setAttribute("aria-pressed", String(on));
    this.onMaximize?.(on);
  }

  /** Shows the head of `details` (null: hides it). */
  show(details: NodeDetails | null): void {
    this.#details = details;
    this.element.hidden = details === null;
    if (!details) return;
    const name = details.path.length ? (details.path[details.path.length - 1] ?? "") : "";
    this.#name.textContent = name || this.#rootName;
    this.#name.title = details.path.join(" / ") || this.#rootName;
    const summary = headerSummary(details, this.#stats.get(pathKey(details.path)) ?? null);
    // a line breaks between the parts, never inside one ("x∈[-0.125, 0.125]")
    const parts = summary.match(/x∈\[[^\]]*\]|\S+/g) ?? [];
    this.#summary.replaceChildren(
      ...parts.flatMap((part, i) => [i ? " " : "", el("span", "tdview-summary-part", part)]),
    );
  }

  /** The statistics of a preview, kept when they describe the whole tensor. */
  noteStats(data: PreviewData): void {
    const stats = wholeStats(data);
    if (!stats) return;
    const key = pathKey(data.path);
    const known = this.#stats.has(key);
    this.#stats.delete(key); // the newest last: the oldest go first
    this.#stats.set(key, stats);
    if (this.#stats.size > MAX_KEPT_STATS) {
      const oldest = this.#stats.keys().next().value;
      if (oldest !== undefined) this.#stats.delete(oldest);
    }
    const shown = this.#details;
    if (shown && pathKey(shown.path) === key) this.show(shown);
    if (!known) this.onStats?.(data.path);
  }

  /** A tree row's summary once its statistics are known, else "". */
  summaryOf(node: NodeSummary): string {
    const stats = this.#stats.get(pathKey(node.path));
    if (!stats || node.dtype === null || node.shape === null) return "";
    return tensorSummary({ dtype: node.dtype, shape: node.shape, bytes: node.bytes, stats });
  }
}
