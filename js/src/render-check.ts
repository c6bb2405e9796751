/**
 * The "Check" action of the details: is the selected subtree healthy (`check`,
 * check-protocol.ts). The head's "✓ Check" button runs it on the node on show; a panel
 * then shows its progress (bytes read: archive CRC-32s, values) with Cancel, and what
 * it found: a line that says healthy or how many problems, each problem with its kind,
 * its key (a button that selects that node: `onReveal`) and its message, and the groups
 * of leaves stored twice. The result stays on show while other nodes are selected (a
 * problem's key is clicked to go there) until it is closed or run again; "Read every
 * value" runs it again with `values` (NaN, Inf, all-zero leaves). On a folder of
 * checkpoints (its root, a sub-folder) it checks every checkpoint below it.
 */

import type { CheckProblem, CheckResult } from "./check-protocol";
import { type CallOptions, isCancelled, type ProgressInfo } from "./data-source";
import { alertBox, button, el, errorText, pathText } from "./dom";
import { formatCount, humanBytes } from "./format";
import type { NodeDetails, Path } from "./protocol";

/** Runs the check of `path` (the data source's `check`). */
export type CheckFetch = (
  path: Path,
  values: boolean,
  onProgress: (p: ProgressInfo) => void,
  opts?: CallOptions,
) => Promise<CheckResult>;

/** What each kind of problem is, for the badge's tooltip (docs/check.md says the same). */
export const KIND_TITLES: Record<string, string> = {
  metadata: "a meta.json or node the index flags",
  refused: "a file or folder the store refuses (a symlink out of the root, a FIFO…)",
  missing: "the leaf's file is absent",
  empty: "the leaf's file has no byte where data is expected",
  size: "the leaf's file is shorter or longer than its shape and dtype need",
  truncated: "the archive ends early",
  crc: "the bytes do not match the archive's CRC-32: damaged",
  stale_crc: "the CRC-32 is stale, as after writes with mode='r+' (or the entry is damaged)",
  corrupt: "a compressed entry does not decompress to what the archive records",
  unreadable: "reading failed",
  nan: "NaN values",
  inf: "infinite values",
  zeros: "every value is zero",
};

/** "model/layers/0", "(root)" for the checkpoint itself. */
function keyText(path: Path, rootName: string): string {
  return path.length ? path.join("/") : rootName;
}

/** "6 leaves, 10 archive entries, 24.0 KB read"; "6 leaves (values of 6), …" when the
 * values were read; "3 checkpoints, …" for a folder of them; and the leaves whose bytes
 * no CRC-32 records ("sizes only for 6 leaves: no CRC-32 recorded"). */
export function checkedText(result: CheckResult): string {
  const c = result.checked;
  const leaves = `${formatCount(c.leaves)} leaves`;
  const parts = [result.values ? `${leaves} (values of ${formatCount(c.values)})` : leaves];
  if (c.checkpoints > 1) parts.unshift(`${formatCount(c.checkpoints)} checkpoints`);
  if (c.entries) parts.push(`${formatCount(c.entries)} archive entries`);
  if (c.bytes) parts.push(`${humanBytes(c.bytes)} read`);
  if (c.no_crc) parts.push(`sizes only for ${formatCount(c.no_crc)} leaves: no CRC-32 recorded`);
  return parts.join(", ");
}

/** Kinds of node a check has nothing to read in (a folder of checkpoints' side files);
 * a folder of checkpoints and its sub-folders are checked member by member. */
const UNCHECKABLE_KINDS: ReadonlySet<string> = new Set(["json", "pickle"]);

/** "Healthy" or "3 problems" (500 listed and `more`). */
export function verdictText(result: CheckResult): string {
  if (result.healthy) return "Healthy";
  const n = result.problems.length + result.more;
  return `${formatCount(n)} problem${n === 1 ? "" : "s"}`;
}

export class CheckView {
  readonly element: HTMLElement;
  /** The "✓ Check" button of the details head. */
  readonly toggle: HTMLButtonElement;
  /** Called with a problem's path when its key is clicked (the app selects it). */
  onReveal: ((path: Path) => void) | null = null;
  readonly #fetch: CheckFetch | null;
  readonly #rootName: string;
  readonly #title: HTMLElement;
  readonly #values: HTMLInputElement;
  readonly #again: HTMLButtonElement;
  readonly #cancel: HTMLButtonElement;
  readonly #body: HTMLElement;
  #node: NodeDetails | null = null;
  #checked: Path | null = null;
  #abort: AbortController | null = null;

  constructor(fetch: CheckFetch | null, rootName = "(root)") {
    this.#fetch = fetch;
    this.#rootName = rootName;
    this.toggle = button("✓ Check", "tdview-check-toggle", () => void this.run());
    this.toggle.title =
      "Is this subtree healthy: archive CRC-32s, file sizes, what the index flags " +
      "(and NaN, Inf, all-zero leaves with “Read every value”)";
    this.toggle.hidden = true;
    this.element = el("section", "tdview-check");
    this.element.setAttribute("aria-label", "Check");
    this.element.hidden = true;
    const bar = el("div", "tdview-check-bar");
    this.#title = el("span", "tdview-check-title");
    const label = el("label", "tdview-check-values");
    this.#values = el("input");
    this.#values.type = "checkbox";
    this.#values.addEventListener("change", () => void this.run(this.#checked ?? undefined));
    label.append(this.#values, " Read every value");
    label.title = "Also count NaN and infinite values, and leaves that are all zeros";
    this.#again = button("Run again", "tdview-check-again", () => {
      void this.run(this.#checked ?? undefined);
    });
    this.#cancel = button("Cancel", "tdview-cancel-button", () => this.cancel());
    const close = button("×", "tdview-check-close", () => this.close());
    close.title = "Close the check";
    close.setAttribute("aria-label", "Close the check");
    bar.append(this.#title, label, this.#again, this.#cancel, close);
    this.#body = el("div", "tdview-check-body");
    this.#body.setAttribute("aria-live", "polite");
    this.element.append(bar, this.#body);
  }

  /** The node on show in the details (the one "✓ Check" checks); null: none. */
  setNode(details: NodeDetails | null): void {
    this.#node = details;
    this.toggle.hidden = !this.#fetch || !details || UNCHECKABLE_KINDS.has(details.kind);
  }

  /** Whether a check is running. */
  get isRunning(): boolean {
    return this.#abort !== null;
  }

  /** Checks `path` (the node on show by default); resolves with the result, or null when
   * it was cancelled, failed or superseded. */
  async run(path: Path | undefined = this.#node?.path): Promise<CheckResult | null> {
    if (!this.#fetch || path === undefined) return null;
    this.#abort?.abort();
    const abort = new AbortController();
    this.#abort = abort;
    this.#checked = path;
    const label = keyText(path, this.#rootName);
    this.element.hidden = false;
    this.#title.replaceChildren("Check of ", pathText(label, "tdview-check-path"));
    this.#title.title = `Check of ${label}`;
    const progress = el("progress", "tdview-progress");
    const progressText = el("span", "tdview-progress-label", "Checking…");
    const row = el("div", "tdview-progress-row");
    row.append(progress, progressText);
    this.#body.replaceChildren(row);
    this.#sync();
    const onProgress = (p: ProgressInfo) => {
      if (abort.signal.aborted) return;
      progress.max = Math.max(p.total, 1);
      progress.value = p.done;
      const bytes = `${humanBytes(p.done)} / ${humanBytes(p.total)}`;
      progressText.textContent = `Checking… ${bytes}${p.label ? ` · ${p.label}` : ""}`;
    };
    try {
      const result = await this.#fetch(path, this.#values.checked, onProgress, {
        signal: abort.signal,
      });
      if (abort.signal.aborted) return null;
      this.#showResult(result);
      return result;
    } catch (error) {
      if (this.#abort !== abort) return null; // superseded by another run
      this.#body.replaceChildren(
        isCancelled(error)
          ? el("p", "tdview-note tdview-check-cancelled", `Check of ${label} cancelled.`)
          : alertBox(errorText(error)),
      );
      return null;
    } finally {
      if (this.#abort === abort) this.#abort = null;
      this.#sync();
    }
  }

  cancel(): void {
    this.#abort?.abort();
  }

  /** Hides the panel (cancelling a check that runs). */
  close(): void {
    this.cancel();
    this.#checked = null;
    this.element.hidden = true;
    this.#body.replaceChildren();
  }

  dispose(): void {
    this.cancel();
  }

  #sync(): void {
    const running = this.#abort !== null;
    this.#cancel.hidden = !running;
    this.#again.hidden = running;
    this.toggle.disabled = false;
  }

  #showResult(result: CheckResult): void {
    const verdict = el(
      "p",
      `tdview-check-verdict ${result.healthy ? "tdview-check-healthy" : "tdview-check-sick"}`,
    );
    verdict.append(el("strong", "", verdictText(result)), ` · checked ${checkedText(result)}`);
    const parts: HTMLElement[] = [verdict];
    if (result.problems.length) {
      const list = el("ul", "tdview-check-problems");
      for (const problem of result.problems) list.append(this.#problemRow(problem));
      parts.push(list);
    }
    if (result.more) {
      parts.push(el("p", "tdview-note", `and ${formatCount(result.more)} more problems`));
    }
    if (result.duplicates.length) parts.push(this.#duplicates(result.duplicates));
    this.#body.replaceChildren(...parts);
  }

  #problemRow(problem: CheckProblem): HTMLElement {
    const row = el("li", `tdview-check-problem tdview-check-${problem.kind}`);
    const kind = el("span", "tdview-check-kind", problem.kind.replace("_", " "));
    kind.title = KIND_TITLES[problem.kind] ?? problem.kind;
    row.append(
      kind,
      this.#keyButton(problem.path),
      el("span", "tdview-check-message", problem.message),
    );
    return row;
  }

  #keyButton(path: Path): HTMLButtonElement {
    const text = keyText(path, this.#rootName);
    const key = button("", "tdview-check-key", () => this.onReveal?.(path));
    key.append(pathText(text));
    key.title = `Select ${text}`;
    return key;
  }

  #duplicates(groups: Path[][]): HTMLElement {
    const box = el("div", "tdview-check-duplicates");
    box.append(el("span", "tdview-check-duplicates-title", "Stored twice:"));
    const list = el("ul", "");
    for (const group of groups) {
      const item = el("li", "");
      group.forEach((path, i) => {
        if (i) item.append(" = ");
        item.append(this.#keyButton(path));
      });
      list.append(item);
    }
    box.append(list);
    return box;
  }
}
