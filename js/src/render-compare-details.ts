/**
 * The compare view's details of the selected key: both sides' facts field by field (the
 * fields that differ marked), what the comparison found (fingerprint, value statistics,
 * a subtree's counts), buttons that compare the key again by bytes or values (the app
 * runs them: render-compare.ts), a side-by-side preview on demand with a histogram of
 * the difference over the values shown, and a load form for each side whose code line
 * names that side's checkpoint (the normal view's `LoadPanel`). The preview is drawn by
 * render-compare-preview.ts.
 *
 * Each `show(path)` aborts the fetch before it, so only the latest selection lands.
 */

import {
  CRC_EQUAL_TITLE,
  differencesBelow,
  FINGERPRINT_TEXT,
  factRows,
  markOf,
  rollupText,
  sameParts,
  scalarChange,
  showPath,
  spelledPaths,
  statsRows,
  verdict,
} from "./compare-format";
import type { CompareState, DiffFacts, DiffItem, DiffLevel, Side } from "./compare-protocol";
import type { CompareSource } from "./compare-source";
import { isCancelled } from "./data-source";
import { alertBox, button, el, errorText } from "./dom";
import { formatCount, humanBytes } from "./format";
import { NODE_KINDS, type NodeDetails, type NodeKind, type Options, type Path } from "./protocol";
import { baseName, renderDiffPreview } from "./render-compare-preview";
import { LoadPanel, type LoadSource } from "./render-load";

export interface CompareDetailsOptions {
  state: CompareState;
  options: Options;
  /** Rows of each side's preview (the kernel caps them at 100). */
  previewRows?: number;
  /** Compares the subtree at `path` again at `level` (the app's task bar runs it). */
  onRefine?: (path: Path, level: DiffLevel) => void;
}

/** Where a key of the diff is in one side's checkpoint (a renamed key's old path in a;
 * `layers.0.w` where that side spells `layers/0/w` so). */
export function sidePath(state: CompareState, item: DiffItem, side: Side): Path {
  const { summary } = state;
  return side === "a"
    ? [...summary.subpath_a, ...(item.path_a ?? item.renamed_from ?? item.path)]
    : [...summary.subpath_b, ...(item.path_b ?? item.path)];
}

const KINDS: ReadonlySet<string> = new Set(NODE_KINDS);

/** The node the load form of one side points at (what the diff knows of it). */
export function sideNode(state: CompareState, item: DiffItem, side: Side): NodeDetails | null {
  const facts: DiffFacts | null = item[side];
  if (!facts) return null;
  const path = sidePath(state, item, side);
  const kind = (KINDS.has(facts.kind) ? facts.kind : "tensordict") as NodeKind;
  const leaf = kind === "leaf";
  return {
    key: path[path.length - 1] ?? "",
    path,
    kind,
    class_name: facts.class,
    has_children: !leaf && item.has_children,
    n_children: 0,
    shape: facts.shape ?? null,
    dtype: facts.dtype ?? null,
    batch_size: facts.batch_size ?? null,
    stack_dim: null,
    bytes: leaf ? (facts.bytes ?? null) : null,
    numel: null,
    pickled: facts.pickled ?? false,
    problems: [],
    names: facts.names ?? null,
    device: null,
    subpath: path.join("/"),
    storage: null,
    value: facts.value ?? null,
    pickle: null,
    rollup: null,
    rows: null,
  };
}

/** Both sides' facts as a table; the rows whose sides differ are marked. */
function factsTable(item: DiffItem, state: CompareState): HTMLElement {
  const table = el("table", "tdview-compare-facts");
  const head = el("tr");
  head.append(
    el("th", "", ""),
    el("th", "tdview-compare-side-a", `a · ${baseName(state.source_a)}`),
    el("th", "tdview-compare-side-b", `b · ${baseName(state.source_b)}`),
  );
  const thead = el("thead");
  thead.append(head);
  const tbody = el("tbody");
  for (const [label, a, b] of factRows(item.a, item.b)) {
    const tr = el("tr");
    const differs = item.a !== null && item.b !== null && a !== b;
    if (differs) tr.classList.add("tdview-compare-differs");
    tr.append(el("th", "", label), el("td", "", a), el("td", "", b));
    tbody.append(tr);
  }
  table.append(thead, tbody);
  return table;
}

/** What the comparison found of the key, as a definition list. */
function findings(item: DiffItem, level: string): HTMLElement {
  const list = el("dl", "tdview-compare-findings");
  const add = (label: string, value: string, title = "") => {
    const dd = el("dd", "", value);
    if (title) dd.title = title;
    list.append(el("dt", "", label), dd);
  };
  const both = item.a !== null && item.b !== null;
  const leaf = !item.has_children;
  if (item.renamed_from) add("Renamed from", item.renamed_from.join(" / "));
  for (const [side, real] of spelledPaths(item)) add(`Key in ${side}`, real.join(" / "));
  if (item.changes.length) add("Changed", item.changes.join(", "));
  if (leaf && both) {
    if (item.fingerprint) {
      const title = item.fingerprint === "crc_equal" ? CRC_EQUAL_TITLE : "";
      add("Fingerprint", FINGERPRINT_TEXT[item.fingerprint], title);
    } else if (!item.values && item.value_equal === null) {
      add("Fingerprint", level === "metadata" ? "not compared (metadata only)" : "not compared");
    }
    if (item.values) for (const [label, value] of statsRows(item.values)) add(label, value);
    if (item.value_equal !== null) add("Values", item.value_equal ? "equal" : "differ");
  }
  const r = item.rollup;
  if (r && item.has_children) {
    add("Below", rollupText(r));
    const same = sameParts(r);
    if (!same.length) add("Same", "0");
    for (const [n, words, title] of same) {
      if (words === "same") add("Same", formatCount(n), title);
      else if (words === "CRC equal") add("CRC equal", formatCount(n), title);
      else add("Not compared", `${formatCount(n)} ${words}`, title);
    }
    const bytes: string[] = [];
    if (r.bytes_changed) bytes.push(`${humanBytes(r.bytes_changed)} changed`);
    if (r.bytes_added) bytes.push(`${humanBytes(r.bytes_added)} added`);
    if (r.bytes_removed) bytes.push(`${humanBytes(r.bytes_removed)} removed`);
    if (bytes.length) add("Bytes", bytes.join(", "));
    if (r.elements_changed) add("Elements", `${formatCount(r.elements_changed)} differ`);
  }
  if (item.note) add("Note", item.note);
  if (item.problem) add("Problem", item.problem);
  return list;
}

/** A load form for one side, titled with its checkpoint. */
class SideLoad {
  readonly element: HTMLElement;
  readonly panel: LoadPanel;
  readonly #title: HTMLElement;

  constructor(side: Side, data: LoadSource, state: CompareState, options: Options) {
    const source = side === "a" ? state.source_a : state.source_b;
    this.element = el("section", `tdview-section tdview-compare-load tdview-compare-load-${side}`);
    this.element.setAttribute("aria-label", `Load from ${side}`);
    this.#title = el("h4", "tdview-compare-side-title", `${side} · ${source}`);
    this.#title.title = source;
    this.panel = new LoadPanel(data, { source, options });
    this.element.append(this.#title, this.panel.element);
  }

  setNode(node: NodeDetails | null): void {
    this.panel.setNode(node);
    // a subtree's size needs its side's totals, which a diff does not sum: not shown
    this.element.classList.toggle("tdview-compare-load-node", node?.kind !== "leaf");
    this.element.hidden = node === null && !this.panel.isRunning;
  }
}

export class CompareDetails {
  readonly element: HTMLElement;
  readonly loads: Record<Side, SideLoad>;
  readonly #source: CompareSource;
  readonly #info: HTMLElement;
  readonly #actions: HTMLElement;
  readonly #preview: HTMLElement;
  readonly #previewBody: HTMLElement;
  readonly #previewButton: HTMLButtonElement;
  readonly #previewCancel: HTMLButtonElement;
  readonly #rows: number;
  readonly #onRefine: ((path: Path, level: DiffLevel) => void) | undefined;
  #state: CompareState;
  #abort: AbortController | null = null;
  #previewAbort: AbortController | null = null;
  #item: DiffItem | null = null;
  #busy = false;

  constructor(source: CompareSource, options: CompareDetailsOptions) {
    this.#source = source;
    this.#state = options.state;
    this.#rows = options.previewRows ?? 20;
    this.#onRefine = options.onRefine;
    this.element = el("section", "tdview-details tdview-compare-details");
    this.element.setAttribute("aria-label", "Details");
    this.#info = el("div", "tdview-details-info");
    this.#info.setAttribute("aria-live", "polite");
    this.#actions = el("div", "tdview-actions tdview-compare-actions");
    this.#preview = el("section", "tdview-section tdview-preview tdview-compare-preview");
    this.#preview.setAttribute("aria-label", "Preview of both sides");
    this.#previewButton = button("Preview both sides", "tdview-preview-button", () => {
      void this.preview();
    });
    this.#previewButton.title =
      "Read the leaf on each side: statistics and histograms, and the difference of the first rows";
    this.#previewCancel = button("Cancel", "tdview-cancel-button", () =>
      this.#previewAbort?.abort(),
    );
    this.#previewCancel.hidden = true;
    this.#previewBody = el("div", "tdview-preview-body");
    this.#previewBody.setAttribute("aria-live", "polite");
    const head = el("div", "tdview-section-head");
    head.append(
      el("h3", "tdview-section-title", "Preview"),
      this.#previewButton,
      this.#previewCancel,
    );
    this.#preview.append(head, this.#previewBody);
    const load = (side: Side) => ({
      devices: (opts?: Parameters<LoadSource["devices"]>[0]) => source.devices(opts),
      load: (...args: Parameters<LoadSource["load"]>) => source.load(side, ...args),
    });
    this.loads = {
      a: new SideLoad("a", load("a"), this.#state, options.options),
      b: new SideLoad("b", load("b"), this.#state, options.options),
    };
    this.element.append(
      this.#info,
      this.#actions,
      this.#preview,
      this.loads.a.element,
      this.loads.b.element,
    );
    this.#hide();
  }

  /** The item on show, null while none is. */
  get item(): DiffItem | null {
    return this.#item;
  }

  /** New sources or subpaths (the `compare` trait after a refine). */
  setState(state: CompareState): void {
    this.#state = state;
  }

  /** While a refine runs, the compare buttons wait. */
  setBusy(busy: boolean): void {
    this.#busy = busy;
    for (const b of this.#actions.querySelectorAll("button")) b.disabled = busy;
  }

  setDefaults(options: Options): void {
    this.loads.a.panel.setDefaults(options);
    this.loads.b.panel.setDefaults(options);
  }

  /** Fetches and shows the key at `path`; null clears the panel. */
  async show(path: Path | null): Promise<void> {
    this.#abort?.abort();
    this.#abort = null;
    this.#item = null;
    this.#previewAbort?.abort();
    if (path === null) {
      this.#info.replaceChildren();
      this.#hide();
      return;
    }
    const abort = new AbortController();
    this.#abort = abort;
    this.#info.classList.add("tdview-loading");
    try {
      const item = await this.#source.node(path, { signal: abort.signal });
      if (abort.signal.aborted) return;
      this.#render(item);
    } catch (error) {
      if (isCancelled(error) || abort.signal.aborted) return;
      this.#info.replaceChildren(alertBox(errorText(error)));
      this.#hide();
    } finally {
      if (this.#abort === abort) this.#info.classList.remove("tdview-loading");
    }
  }

  /** Reads both sides of the leaf on show and shows them side by side. */
  async preview(): Promise<void> {
    const item = this.#item;
    if (!item || item.has_children) return;
    this.#previewAbort?.abort();
    const abort = new AbortController();
    this.#previewAbort = abort;
    this.#previewButton.disabled = true;
    this.#previewCancel.hidden = false;
    this.#previewBody.replaceChildren(el("p", "tdview-note tdview-busy", "Reading both sides…"));
    try {
      const data = await this.#source.preview(item.path, this.#rows, { signal: abort.signal });
      if (abort.signal.aborted) return;
      this.#previewBody.replaceChildren(renderDiffPreview(data, this.#state));
    } catch (error) {
      if (isCancelled(error) || abort.signal.aborted) {
        if (this.#item === item) {
          this.#previewBody.replaceChildren(el("p", "tdview-note", "Preview cancelled."));
        }
        return;
      }
      this.#previewBody.replaceChildren(alertBox(errorText(error)));
    } finally {
      if (this.#previewAbort === abort) {
        this.#previewAbort = null;
        this.#previewButton.disabled = false;
        this.#previewCancel.hidden = true;
      }
    }
  }

  dispose(): void {
    this.#abort?.abort();
    this.#previewAbort?.abort();
    this.loads.a.panel.dispose();
    this.loads.b.panel.dispose();
  }

  #hide(): void {
    this.#actions.replaceChildren();
    this.#preview.hidden = true;
    this.#previewBody.replaceChildren();
    this.loads.a.setNode(null);
    this.loads.b.setNode(null);
  }

  #render(item: DiffItem): void {
    this.#item = item;
    const title = el("h3", "tdview-compare-title");
    const mark = markOf(item);
    title.append(
      el("span", `tdview-mark tdview-mark-${item.problem ? "problem" : item.status}`, mark),
      el("span", "tdview-compare-path", showPath(item.path)),
    );
    const said = verdict(item);
    const status = el("p", "tdview-compare-verdict", said || "no own difference");
    const scalar = scalarChange(item);
    if (scalar) status.prepend(el("span", "tdview-compare-scalar", scalar), " · ");
    if (item.unverified) status.classList.add("tdview-compare-unverified");
    if (item.fingerprint === "crc_equal" && item.status === "same") status.title = CRC_EQUAL_TITLE;
    const below = differencesBelow(item);
    if (item.has_children && below) status.append(` · ${formatCount(below)} below`);
    this.#info.replaceChildren(
      title,
      status,
      factsTable(item, this.#state),
      findings(item, this.#state.summary.level),
    );
    this.#renderActions(item);
    this.#preview.hidden = item.has_children || (item.a === null && item.b === null);
    this.#previewBody.replaceChildren();
    this.#previewButton.disabled = false;
    this.#previewCancel.hidden = true;
    this.loads.a.setNode(sideNode(this.#state, item, "a"));
    this.loads.b.setNode(sideNode(this.#state, item, "b"));
  }

  #renderActions(item: DiffItem): void {
    this.#actions.replaceChildren();
    if (item.a === null || item.b === null || !this.#onRefine) return;
    const refine = this.#onRefine;
    const leaf = !item.has_children;
    const bytes = button("Compare bytes", "tdview-compare-bytes", () =>
      refine(item.path, "fingerprint"),
    );
    bytes.title = "Size and CRC-32 of archive entries (no byte read), or the files' bytes compared";
    const values = button(
      leaf ? "Compute value statistics" : "Compare values",
      "tdview-primary tdview-compare-values",
      () => refine(item.path, "values"),
    );
    values.title = "Read both sides and compare them element by element (float64)";
    this.#actions.append(bytes, values);
    this.setBusy(this.#busy);
  }
}
