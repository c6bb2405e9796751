/**
 * What a node's details say of its relations to other keys: "Same bytes as …" for a leaf
 * stored twice (tied weights, copies), and "Parameter …" for an optimizer's `state/<i>`.
 *
 * Browsing reads no payload: a leaf asks `duplicates` with `read: false`, which an
 * archive answers from the CRC-32s it records. A directory's leaf whose size and dtype
 * others share is read only when the user asks ("Find the same bytes"), with progress
 * and Cancel. Each key named is a link that selects it in the tree (`onOpen`).
 */

import type { DataSource, ProgressInfo } from "./data-source";
import { isCancelled } from "./data-source";
import { button, el, errorText } from "./dom";
import type { DuplicatesResult, ParamLabel } from "./duplicates-protocol";
import { humanBytes } from "./format";
import type { NodeDetails, Path } from "./protocol";

/** Keys named at most; the rest are counted ("and 3 more"). */
export const MAX_SAME = 8;

/** A link to a key: `path` joined by "/", selecting it when clicked. */
function keyLink(path: Path, onOpen: (path: Path) => void): HTMLButtonElement {
  const link = button(path.join("/"), "tdview-link tdview-related-key", () => onOpen(path));
  link.title = `Select ${path.join(" / ")}`;
  return link;
}

/** "Same bytes as a, b (and 3 more)" with links; what it rests on when not confirmed. */
export function sameBytesLine(result: DuplicatesResult, onOpen: (path: Path) => void): HTMLElement {
  const line = el("div", "tdview-related-line tdview-same-bytes");
  const label = el("span", "tdview-related-label", "Same bytes as");
  line.append(label, " ");
  const shown = result.same.slice(0, MAX_SAME);
  shown.forEach((path, i) => {
    if (i > 0) line.append(", ");
    line.append(keyLink(path, onOpen));
  });
  const more = result.same.length - shown.length;
  if (more > 0) line.append(` and ${more} more`);
  const why = result.confirmed ? "compared byte by byte" : "same size and CRC-32 in the archive";
  line.append(el("span", "tdview-related-note", ` (${humanBytes(result.bytes)} each; ${why})`));
  return line;
}

/** "Parameter embed.weight" (a link to its leaf), or "Parameter unknown: why". */
export function paramLine(param: ParamLabel, onOpen: (path: Path) => void): HTMLElement {
  const line = el("div", "tdview-related-line tdview-param");
  line.append(el("span", "tdview-related-label", "Parameter"), " ");
  if (param.name !== null && param.path !== null) {
    const link = keyLink(param.path, onOpen);
    link.textContent = param.name;
    line.append(link);
  } else {
    line.append(el("span", "tdview-related-note", `not known: ${param.reason ?? ""}`));
  }
  return line;
}

export class RelatedSection {
  readonly element: HTMLElement;
  /** Selects a key named here (set by the app: it reveals it in the tree). */
  onOpen: (path: Path) => void = () => {};
  readonly #source: DataSource;
  #abort: AbortController | null = null;

  constructor(source: DataSource) {
    this.#source = source;
    this.element = el("div", "tdview-related");
    this.element.setAttribute("aria-live", "polite");
    this.element.hidden = true;
  }

  /** Shows what is known of `details`' relations (null: nothing). */
  setNode(details: NodeDetails | null): void {
    this.#abort?.abort();
    this.#abort = null;
    this.element.replaceChildren();
    this.element.hidden = true;
    if (!details) return;
    if (details.param) this.#show(paramLine(details.param, (p) => this.onOpen(p)));
    const sized = details.kind === "leaf" && (details.bytes ?? 0) > 0;
    if (sized && this.#source.duplicates) void this.#ask(details.path, false);
  }

  dispose(): void {
    this.#abort?.abort();
  }

  #show(...nodes: HTMLElement[]): void {
    this.element.append(...nodes);
    this.element.hidden = this.element.childElementCount === 0;
  }

  async #ask(path: Path, read: boolean): Promise<void> {
    const ask = this.#source.duplicates;
    if (!ask) return;
    const abort = new AbortController();
    this.#abort = abort;
    const slot = el("div", "tdview-related-line tdview-same-bytes-slot");
    if (read) {
      this.#reading(slot, abort);
      this.#show(slot); // browsing shows nothing until there is something to say
    }
    try {
      const onProgress = (p: ProgressInfo) => this.#progress(slot, p);
      const result = await ask.call(this.#source, path, read, onProgress, {
        signal: abort.signal,
      });
      if (abort.signal.aborted) return;
      const answer = this.#answer(result, path, read);
      slot.replaceChildren(...answer);
      if (answer.length > 0 && !slot.isConnected) this.#show(slot);
      if (answer.length === 0) slot.remove();
      this.element.hidden = this.element.childElementCount === 0;
    } catch (error) {
      if (abort.signal.aborted && !read) return; // another node, or a read asked for
      if (abort.signal.aborted && !slot.isConnected) return;
      const text = isCancelled(error) ? "Cancelled." : errorText(error);
      slot.replaceChildren(el("span", "tdview-related-note", text));
      if (!slot.isConnected) this.#show(slot);
    } finally {
      if (this.#abort === abort) this.#abort = null;
    }
  }

  #answer(result: DuplicatesResult, path: Path, read: boolean): Node[] {
    if (result.same.length > 0) return [sameBytesLine(result, (p) => this.onOpen(p))];
    if (!result.searched) {
      const find = button("Find leaves with the same bytes", "tdview-find-same", () => {
        this.#abort?.abort();
        find.closest(".tdview-same-bytes-slot")?.remove();
        void this.#ask(path, true);
      });
      find.title = "Other leaves have this size and dtype: read them to compare (no load)";
      return [find];
    }
    return read ? [el("span", "tdview-related-note", "No other leaf has the same bytes.")] : [];
  }

  #reading(slot: HTMLElement, abort: AbortController): void {
    const cancel = button("Cancel", "tdview-cancel-same", () => abort.abort());
    slot.replaceChildren(
      el("span", "tdview-related-note tdview-same-progress", "Reading…"),
      cancel,
    );
  }

  #progress(slot: HTMLElement, p: ProgressInfo): void {
    const note = slot.querySelector(".tdview-same-progress");
    if (!note || p.total <= 0) return;
    const percent = Math.floor((100 * p.done) / p.total);
    note.textContent = `Reading (${p.label}) ${percent}%…`;
  }
}
