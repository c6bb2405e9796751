/**
 * The details panel: the `NodeDetails` of the selected node as a definition list.
 *
 * Each `show(path)` aborts the fetch before it, so only the latest selection lands.
 */

import { type DataSource, isCancelled, ProtocolError } from "./data-source";
import { formatCount, formatShape, humanBytes } from "./format";
import type { NodeDetails, Path } from "./protocol";

const MAX_VALUE_CHARS = 2000;

type Field = [label: string, value: string];

function valueText(value: unknown): string {
  let text: string;
  try {
    text = typeof value === "string" ? value : (JSON.stringify(value, null, 2) ?? String(value));
  } catch {
    text = String(value);
  }
  return text.length > MAX_VALUE_CHARS ? `${text.slice(0, MAX_VALUE_CHARS)}…` : text;
}

/** The rows of the list, in display order; empty values are left out. */
export function detailFields(d: NodeDetails): Field[] {
  const fields: Field[] = [
    ["Path", d.path.length ? d.path.join(" / ") : "(root)"],
    ["Kind", d.kind],
    ["Class", d.class_name],
    ["Shape", formatShape(d.shape)],
    ["Dtype", d.dtype ?? ""],
    ["Batch size", formatShape(d.batch_size)],
    ["Names", d.names ? d.names.map((n) => n ?? "None").join(", ") : ""],
    ["Stack dim", d.stack_dim === null ? "" : String(d.stack_dim)],
    ["Device", d.device ?? ""],
    ["Children", d.has_children ? formatCount(d.n_children) : ""],
    ["Elements", formatCount(d.numel)],
    ["Size", d.bytes === null ? "" : `${humanBytes(d.bytes)} (${formatCount(d.bytes)} B)`],
    ["File", d.subpath],
  ];
  const s = d.storage;
  if (s) {
    fields.push(
      ["Stored in", s.offset === null ? s.location : `${s.location} @ ${s.offset}`],
      ["Stored size", `${humanBytes(s.stored_bytes)} (${s.compression})`],
      ["CRC-32", s.crc32 === null ? "" : s.crc32.toString(16).padStart(8, "0")],
      ["Load cost", s.cost],
    );
  }
  const r = d.rollup;
  if (r) {
    const byDtype = Object.entries(r.by_dtype)
      .map(([dtype, bytes]) => `${dtype}: ${humanBytes(bytes)}`)
      .join(", ");
    fields.push(
      ["Subtree size", `${humanBytes(r.bytes)} in ${formatCount(r.leaves)} tensors`],
      ["Subtree elements", formatCount(r.numel)],
      ["By dtype", byDtype],
    );
  }
  if (d.pickle) {
    const globals = d.pickle.globals.map(([mod, name]) => `${mod}.${name}`).join(", ");
    fields.push(["Pickle", `${humanBytes(d.pickle.bytes)}; imports ${globals || "nothing"}`]);
  }
  if (d.value !== null && d.value !== undefined) fields.push(["Value", valueText(d.value)]);
  if (d.problems.length) fields.push(["Problems", d.problems.join("\n")]);
  return fields.filter(([, value]) => value !== "");
}

export class DetailsPanel {
  readonly element: HTMLElement;
  readonly #source: DataSource;
  #abort: AbortController | null = null;

  constructor(source: DataSource) {
    this.#source = source;
    this.element = document.createElement("section");
    this.element.className = "tdview-details";
    this.element.setAttribute("aria-label", "Details");
    this.element.setAttribute("aria-live", "polite");
  }

  /** Fetches and shows the node at `path`; null clears the panel. */
  async show(path: Path | null): Promise<void> {
    this.#abort?.abort();
    this.#abort = null;
    if (path === null) {
      this.element.replaceChildren();
      return;
    }
    const abort = new AbortController();
    this.#abort = abort;
    this.element.classList.add("tdview-loading");
    try {
      const details = await this.#source.node(path, { signal: abort.signal });
      if (!abort.signal.aborted) this.#renderDetails(details);
    } catch (error) {
      if (isCancelled(error) || abort.signal.aborted) return;
      this.#renderError(error);
    } finally {
      if (this.#abort === abort) this.element.classList.remove("tdview-loading");
    }
  }

  dispose(): void {
    this.#abort?.abort();
  }

  #renderDetails(details: NodeDetails): void {
    const list = document.createElement("dl");
    for (const [label, value] of detailFields(details)) {
      const dt = document.createElement("dt");
      dt.textContent = label;
      const dd = document.createElement("dd");
      dd.textContent = value;
      list.append(dt, dd);
    }
    this.element.replaceChildren(list);
  }

  #renderError(error: unknown): void {
    const box = document.createElement("div");
    box.className = "tdview-error";
    box.setAttribute("role", "alert");
    box.textContent =
      error instanceof ProtocolError ? `${error.type}: ${error.message}` : String(error);
    this.element.replaceChildren(box);
  }
}
