/**
 * The details panel of the selected node: a header with its name and a one-line summary
 * (tensor-summary.ts: its statistics once a preview computed them) and a toggle that
 * gives the panel the whole width; its facts as a definition list that folds away (with
 * its key copyable as a tuple and as an "a/b" subpath); a lock box for a pickled value,
 * then the preview of a leaf (render-preview.ts) and the load form (render-load.ts).
 *
 * Each `show(path)` aborts the fetch before it, so only the latest selection lands. The
 * folded facts and the whole width hold from node to node.
 */

import { CopyButton } from "./clipboard";
import { abortableDelay, type DataSource, isCancelled } from "./data-source";
import { DetailsHead, tapPreviews } from "./details-head";
import { alertBox, button, el, errorText, pathText } from "./dom";
import { metadataText } from "./file-metadata";
import {
  formatCount,
  formatShape,
  humanBytes,
  nodeLabel,
  rollupContents,
  schemaText,
} from "./format";
import {
  type NodeDetails,
  type NodeSummary,
  type Options,
  type Path,
  type PickleInfo,
  type StorageInfo,
  type StorageRows,
  UNLOADABLE_KINDS,
} from "./protocol";
import { keyTuple, subpathLiteral } from "./python-code";
import { CheckView } from "./render-check";
import { RelatedSection } from "./render-duplicates";
import { LoadPanel } from "./render-load";
import { PreviewSection } from "./render-preview";
import { SizesView } from "./render-sizes";

const MAX_VALUE_CHARS = 2000;

type Field = [label: string, value: string];

export interface DetailsPanelOptions {
  /** The checkpoint path as the user gave it (used in the load code). */
  source?: string;
  /** The widget's load defaults (the `options` trait). */
  options?: Options;
  /** Rows of a preview table. */
  previewRows?: number;
  /** Quiet time before a node's subtree totals are asked for; 500 ms by default. */
  totalsDelayMs?: number;
}

const DEFAULT_OPTIONS: Options = {
  device: "cpu",
  mode: "r",
  allow_pickle: false,
  robust_key: true,
};

function valueText(value: unknown): string {
  let text: string;
  try {
    text = typeof value === "string" ? value : (JSON.stringify(value, null, 2) ?? String(value));
  } catch {
    text = String(value);
  }
  return text.length > MAX_VALUE_CHARS ? `${text.slice(0, MAX_VALUE_CHARS)}…` : text;
}

/** An archive entry as "ckpt.tdz::a/b.memmap" (the archive is the header's source). */
export function shortLocation(location: string): string {
  const at = location.lastIndexOf("::");
  if (at < 0) return location;
  const archive = location.slice(0, at);
  return `${archive.slice(Math.max(archive.lastIndexOf("/"), archive.lastIndexOf("\\")) + 1)}${location.slice(at)}`;
}

/** What loading a leaf costs: "zero-copy map, reads 32.0 KB as used", … */
export function costText(storage: StorageInfo, bytes: number | null): string {
  const stored = humanBytes(storage.stored_bytes);
  switch (storage.cost) {
    case "map":
      return `zero-copy map; reads ${stored} as used`;
    case "copy":
      return `copy; reads ${stored}`;
    case "decompress":
      return `decompression; reads ${stored}${bytes === null ? "" : ` into ${humanBytes(bytes)}`}`;
    case "none":
      return "none; nothing to read";
  }
}

/** A torchrl storage's rows: "20,000 of 100,000 rows written". */
export function rowsText(rows: StorageRows): string {
  return `${formatCount(rows.written)} of ${formatCount(rows.capacity)} rows written`;
}

/** A node's keys in the checkpoint that holds it: inside a member of a collection, the
 * keys after the member's (what its load line names), else its whole path. */
function ownKeys(d: NodeDetails): Path {
  return d.member ? d.path.slice(d.member.depth) : d.path;
}

/** The fields that hold a path, subpath, key or file: they wrap at its separators only
 * (a file at its "/", never inside a folder's name). */
const PATH_FIELDS = new Set(["Path", "Checkpoint", "Key", "Subpath", "Stored in"]);

/** The rows of the list, in display order; empty values are left out. */
export function detailFields(d: NodeDetails): Field[] {
  // a folder or a side file of a collection has no key in any checkpoint
  const unloadable = UNLOADABLE_KINDS.has(d.kind);
  const member = d.member;
  const fields: Field[] = [
    ["Path", d.path.length ? d.path.join(" / ") : "(root)"],
    ["Checkpoint", member ? `${member.source} (${member.container})` : ""],
    ["Key", unloadable ? "" : keyTuple(ownKeys(d))],
    ["Subpath", unloadable ? "" : d.subpath],
    ["Kind", d.kind === "checkpoint" || d.kind === "collection" ? nodeLabel(d) : d.kind],
    ["Class", d.class_name],
    ["Shape", formatShape(d.shape)],
    ["Dtype", d.dtype ?? ""],
    ["Batch size", formatShape(d.batch_size)],
    ["Replay buffer", d.rows ? rowsText(d.rows) : ""],
    ["Names", d.names ? d.names.map((n) => n ?? "None").join(", ") : ""],
    ["Stack dim", d.stack_dim === null ? "" : String(d.stack_dim)],
    ["Device", d.device ?? ""],
    ["Children", d.has_children ? formatCount(d.n_children) : ""],
  ];
  const r = d.rollup;
  // A node's size is its subtree's: one row each, with the tensor count.
  const bytes = r ? r.bytes : d.bytes;
  const tensors = r ? ` in ${rollupContents(r)}` : "";
  fields.push(
    ["Elements", formatCount(r ? r.numel : d.numel)],
    ["Size", bytes === null ? "" : `${humanBytes(bytes)} (${formatCount(bytes)} B)${tensors}`],
  );
  const s = d.storage;
  if (s) {
    fields.push(
      [
        "Stored in",
        s.offset === null
          ? shortLocation(s.location)
          : `${shortLocation(s.location)} @ ${s.offset}`,
      ],
      ["Stored size", `${humanBytes(s.stored_bytes)} (${s.compression})`],
      ["CRC-32", s.crc32 === null ? "" : s.crc32.toString(16).padStart(8, "0")],
      ["Load cost", unloadable ? "" : costText(s, d.bytes)],
    );
  }
  if (r) {
    const byDtype = Object.entries(r.by_dtype)
      .map(([dtype, n]) => `${dtype}: ${humanBytes(n)}`)
      .join(", ");
    fields.push(["By dtype", byDtype]);
  }
  if (d.schema) fields.push(["Schema", schemaText(d.schema)]);
  if (d.value !== null && d.value !== undefined) fields.push(["Value", valueText(d.value)]);
  if (d.metadata) fields.push(["Metadata", metadataText(d.metadata)]);
  if (d.problems.length) fields.push(["Problems", d.problems.join("\n")]);
  return fields.filter(([, value]) => value !== "");
}

/** The text copied by a field's copy button, or null when the field has none. */
function copyTextOf(label: string, d: NodeDetails): string | null {
  if (label === "Key") return keyTuple(ownKeys(d));
  if (label === "Subpath") return subpathLiteral(ownKeys(d));
  return null;
}

/** When a pickled value is unpickled, as `tdview tree` and the kernel's problems say it. */
export const PICKLE_POLICY =
  "unpickled only on load with allow_pickle=True, or None with a warning";

/** The globals a pickle imports, as its lock box lists them. */
function importsList(pickle: PickleInfo | null): HTMLElement {
  const globals = el("div", "tdview-lock-globals");
  const names = pickle?.globals ?? [];
  globals.append(el("span", "tdview-field-label", "Imports: "));
  if (pickle?.stopped) {
    // the scan stopped: what it found (if anything) is not all it imports
    globals.append(el("span", "", pickle.stopped));
  }
  if (names.length === 0) {
    if (!pickle?.stopped) globals.append(el("span", "", "no module (builtins only)"));
  } else {
    const list = el("ul", "tdview-globals");
    for (const [module, name] of names) list.append(el("li", "", `${module}.${name}`));
    globals.append(list);
  }
  return globals;
}

/** The box of a pickle file beside a collection's checkpoints: never unpickled, no unlock. */
function sidePickleBox(d: NodeDetails): HTMLElement {
  const box = el("div", "tdview-lock tdview-lock-closed tdview-side-pickle");
  box.dataset.locked = "true";
  const head = el("div", "tdview-lock-head");
  head.append(
    el("span", "tdview-lock-badge", "Never unpickled"),
    el("span", "", "Pickle file: not loaded"),
  );
  const size = d.pickle ? ` (${humanBytes(d.pickle.bytes)})` : "";
  const text = el(
    "p",
    "tdview-lock-text",
    `A pickle file beside the checkpoints${size}. tdview never unpickles it: unpickling ` +
      "can run arbitrary code, so it only lists the globals the file would import.",
  );
  box.append(head, text, importsList(d.pickle));
  return box;
}

/** The lock box of a pickled value: its size, the globals it imports, and the unlock. */
function lockBox(
  d: NodeDetails,
  unlocked: boolean,
  setUnlocked: (on: boolean) => void,
): HTMLElement {
  const pickle = d.pickle;
  const box = el("div", `tdview-lock ${unlocked ? "tdview-lock-open" : "tdview-lock-closed"}`);
  box.dataset.locked = String(!unlocked);
  const head = el("div", "tdview-lock-head");
  head.append(
    el("span", "tdview-lock-badge", unlocked ? "Unlocked" : "Locked"),
    el(
      "span",
      "",
      unlocked ? "Pickled value: unlocked for this load" : "Pickled value: not loaded",
    ),
  );
  const size = pickle ? `${humanBytes(pickle.bytes)} of pickle` : "a pickle";
  const text = el(
    "p",
    "tdview-lock-text",
    `Loading it unpickles ${size}, which can run arbitrary code. It is ${PICKLE_POLICY} ` +
      "(load_memmap's default); allow_pickle=False refuses it. Unlock it (allow_pickle=True) " +
      "only if you trust this file.",
  );
  const globals = importsList(pickle);
  const action = unlocked
    ? button("Lock again", "tdview-lock-button", () => setUnlocked(false))
    : button("Unlock for this load", "tdview-lock-button tdview-unlock-button", () =>
        setUnlocked(true),
      );
  box.append(head, text, globals, action);
  return box;
}

let nextFactsId = 0;

export class DetailsPanel {
  readonly element: HTMLElement;
  readonly head: DetailsHead;
  readonly preview: PreviewSection;
  readonly loader: LoadPanel;
  /** The "Check" action (its button is in the head) and its panel. */
  readonly check: CheckView;
  /** "Same bytes as …" and an optimizer state's parameter (render-duplicates.ts). */
  readonly related: RelatedSection;
  /** The "Sizes" view of a subtree (its toggle is in the head). */
  readonly sizes: SizesView;
  readonly #info: HTMLElement;
  readonly #factsToggle: HTMLButtonElement;
  readonly #factsId = `tdview-facts-${++nextFactsId}`;
  #folded = false;
  readonly #source: DataSource;
  readonly #copies: CopyButton[] = [];
  #abort: AbortController | null = null;
  #details: NodeDetails | null = null;
  #lock: HTMLElement | null = null;
  /** Called with each node's details as they are shown (the app reads the root's totals). */
  onDetails: ((details: NodeDetails) => void) | null = null;

  /** Quiet time before a node's subtree totals are asked for (see `show`). */
  readonly totalsDelayMs: number;
  /** The root's details with its totals, when the app has asked for them already (at
   * first paint): shown for the root instead of asking again. */
  rootTotals: Promise<NodeDetails> | null = null;

  constructor(source: DataSource, options: DetailsPanelOptions = {}) {
    this.#source = source;
    this.totalsDelayMs = options.totalsDelayMs ?? 500;
    this.element = el("section", "tdview-details");
    this.element.setAttribute("aria-label", "Details");
    this.#info = el("div", "tdview-details-info");
    this.#info.setAttribute("aria-live", "polite");
    // the root is called by the checkpoint's file name, as the tree's root row is
    const rootName = (options.source ?? "").split(/[\\/]/).filter(Boolean).pop();
    this.check = new CheckView(source.check?.bind(source) ?? null, rootName || "(root)");
    this.#factsToggle = button("Facts", "tdview-facts-toggle", () =>
      this.setFactsFolded(!this.#folded),
    );
    this.sizes = new SizesView(source.sizes?.bind(source) ?? null, rootName || "(root)");
    this.sizes.onActive = (on) => this.element.classList.toggle("tdview-sizes-on", on);
    this.head = new DetailsHead(
      rootName || "(root)",
      [this.#factsToggle],
      [this.check.toggle, this.sizes.toggle],
    );
    this.head.onMaximize = (on) => this.element.classList.toggle("tdview-maximized", on);
    this.#factsToggle.setAttribute("aria-controls", this.#factsId);
    this.#syncFolded(0);
    // the head reads the statistics of each preview for the summary
    const previews = tapPreviews(source, (data) => this.head.noteStats(data));
    this.preview = new PreviewSection(previews, { rows: options.previewRows ?? 20 });
    this.loader = new LoadPanel(source, {
      source: options.source ?? "",
      options: options.options ?? DEFAULT_OPTIONS,
    });
    this.related = new RelatedSection(source);
    this.loader.onPickleChange = () => this.#renderLock();
    this.element.append(
      this.head.element,
      this.#info,
      this.sizes.element,
      this.preview.element,
      this.loader.element,
    );
    this.loader.element.hidden = true;
    this.head.element.after(this.check.element);
    this.#info.after(this.related.element);
  }

  /** Whether the facts are folded away (it holds from node to node). */
  get factsFolded(): boolean {
    return this.#folded;
  }

  setFactsFolded(on: boolean): void {
    this.#folded = on;
    const list = this.#info.querySelector<HTMLElement>(`#${this.#factsId}`);
    if (list) list.hidden = on;
    this.#syncFolded(list?.childElementCount ? list.childElementCount / 2 : 0);
  }

  /** A tree row's tooltip: its path and its summary once a preview computed its
   * statistics, else "" (the row's own: its path). */
  rowTitle(node: NodeSummary): string {
    const summary = this.head.summaryOf(node);
    return summary && `${node.path.join(" / ")}\n${summary}`;
  }

  #syncFolded(rows: number): void {
    const toggle = this.#factsToggle;
    toggle.setAttribute("aria-expanded", String(!this.#folded));
    toggle.textContent = this.#folded ? `▸ Facts (${rows} rows)` : "▾ Facts";
    toggle.title = this.#folded ? "Show the facts of the node" : "Fold the facts away";
  }

  /** The details on show, null while none are. */
  get details(): NodeDetails | null {
    return this.#details;
  }

  /** Fetches and shows the node at `path`; null clears the panel. */
  async show(path: Path | null): Promise<void> {
    this.#abort?.abort();
    this.#abort = null;
    this.#details = null;
    this.preview.suspend();
    this.loader.setNode(null);
    this.related.setNode(null);
    this.#info.classList.remove("tdview-loading"); // of a show() this one supersedes
    if (path === null) {
      this.#info.replaceChildren();
      this.head.show(null);
      this.check.setNode(null);
      this.sizes.setNode(null);
      this.#hideActions();
      return;
    }
    const abort = new AbortController();
    this.#abort = abort;
    this.#info.classList.add("tdview-loading");
    try {
      // Without subtree totals first (summing a large subtree takes the kernel a while),
      // then, after a quiet time, with them.
      const details = await this.#source.node(path, { signal: abort.signal, totals: false });
      if (abort.signal.aborted) return;
      this.#renderDetails(details);
      if (details.bytes !== null || !details.has_children) return;
      const asked = path.length === 0 ? this.rootTotals : null;
      if (!asked) await abortableDelay(this.totalsDelayMs, abort.signal);
      const full = await (asked ?? this.#source.node(path, { signal: abort.signal }));
      if (!abort.signal.aborted) this.#renderDetails(full);
    } catch (error) {
      if (isCancelled(error) || abort.signal.aborted) return;
      this.#info.replaceChildren(alertBox(errorText(error)));
      this.head.show(null);
      this.#hideActions();
    } finally {
      if (this.#abort === abort) this.#info.classList.remove("tdview-loading");
    }
  }

  dispose(): void {
    this.#abort?.abort();
    this.preview.dispose();
    this.loader.dispose();
    this.check.dispose();
    this.related.dispose();
    this.sizes.dispose();
    for (const copy of this.#copies) copy.dispose();
  }

  /** Hides the preview, and the load form unless a load is running. */
  #hideActions(): void {
    this.preview.setNode(null);
    this.loader.element.hidden = !this.loader.isRunning;
  }

  #renderDetails(details: NodeDetails): void {
    for (const copy of this.#copies.splice(0)) copy.dispose();
    const list = el("dl", "tdview-facts");
    list.id = this.#factsId;
    list.hidden = this.#folded;
    for (const [label, value] of detailFields(details)) {
      const dd = el("dd", "", value);
      if (PATH_FIELDS.has(label)) dd.replaceChildren(pathText(value));
      const copied = copyTextOf(label, details);
      if (copied !== null) {
        const what = label === "Key" ? "nested key" : "subpath";
        const copy = new CopyButton("Copy", () => copied, { title: `Copy the ${what} ${copied}` });
        copy.element.classList.add(`tdview-copy-${label.toLowerCase()}`);
        this.#copies.push(copy);
        dd.classList.add("tdview-copyable");
        dd.replaceChildren(pathText(value, "tdview-copy-text"), copy.element);
      }
      list.append(el("dt", "", label), dd);
    }
    this.#lock = el("div", "tdview-lock-slot");
    this.#info.replaceChildren(list, this.#lock);
    this.#syncFolded(list.childElementCount / 2);
    this.head.show(details);
    this.check.setNode(details);
    this.sizes.setNode(details);
    this.#details = details;
    this.related.setNode(details);
    this.onDetails?.(details);
    this.preview.setNode(details);
    this.loader.setNode(details);
    this.loader.element.hidden = false;
    this.#renderLock();
  }

  #renderLock(): void {
    const slot = this.#lock;
    const d = this.#details;
    if (!slot) return;
    if (!d || !(d.pickled || d.pickle)) {
      slot.replaceChildren();
      return;
    }
    if (d.kind === "pickle") {
      slot.replaceChildren(sidePickleBox(d));
      return;
    }
    const setUnlocked = (on: boolean) => {
      if (on) this.loader.unlockPickles();
      else this.loader.lockPickles();
    };
    slot.replaceChildren(lockBox(d, this.loader.allowPickle, setUnlocked));
  }
}
