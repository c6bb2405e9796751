/**
 * The compare view (`TDView(a, compare=b)`): one virtualized tree of the union of both
 * checkpoints, with each key's mark (+ added, - removed, ~ changed, R renamed, ! not read)
 * and each subtree's counts, "only differences" on by default, the next and the previous
 * difference from the keyboard (`]` and `[`, or Alt+↓ and Alt+↑) and the toolbar, the
 * details of both sides (render-compare-details.ts), and a task bar that compares the
 * whole tree or a subtree again by bytes or values, with progress and cancel.
 *
 * The tree is the normal view's (`TreeModel`, `TreeView`, `TreeKeyboard`) over the pages
 * of `diff_children` (compare-model.ts), drawn with rows of its own (render-compare-rows.ts). A refine changes
 * rows anywhere below it, so the tree is rebuilt after one: off screen, with the rows the
 * user had open opened again and the selection kept, then put in place of the old one.
 */

import { rollupCounts, rollupText, sameParts, UNVERIFIED_TEXT } from "./compare-format";
import {
  CompareTreeSource,
  compareNode,
  DiffNavigator,
  restoreTreeState,
  sameTreeState,
  type TreeState,
  treeState,
} from "./compare-model";
import type { CompareState, DiffLevel, DiffSummary } from "./compare-protocol";
import type { CompareSource } from "./compare-source";
import { ToleranceFields } from "./compare-tolerance";
import { isCancelled, type ProgressInfo } from "./data-source";
import { alertBox, button, el, errorText } from "./dom";
import { formatCount, humanBytes } from "./format";
import type { Options, Path } from "./protocol";
import { CompareDetails } from "./render-compare-details";
import { baseName } from "./render-compare-preview";
import {
  CompareKeyboard,
  fillCompareRow,
  KEYS_HINT,
  NEXT_KEYS,
  PREVIOUS_KEYS,
  span,
} from "./render-compare-rows";
import { TreeView } from "./render-tree";
import { TreeModel, type TreeModelOptions } from "./tree-model";

export interface CompareAppOptions {
  source: CompareSource;
  state: CompareState;
  options: Options;
  /** The key selected when the view opens (the `selected` trait). */
  selected?: Path;
  /** Called when the user selects a loaded key. */
  onSelect?: (path: Path) => void;
  /** Delay before the details of a new selection are fetched (ms). */
  detailsDelayMs?: number;
  tree?: TreeModelOptions;
}

/** Height of a tree row (px), as styles.css draws it (`--tdview-row-height`). */
const ROW_HEIGHT = 24;

const LEVEL_WORDS: Record<string, string> = {
  metadata: "metadata (shapes, dtypes)",
  fingerprint: "bytes (sizes and CRC-32s)",
  values: "values",
  mixed: "mixed (some subtrees compared again)",
};

/**
 * The header's counts: the differences, then how the rest was found the same (compared,
 * by CRC-32 alone, by shape and dtype alone: then with the button that compares values).
 */
function summaryLine(summary: DiffSummary, compareValues: () => void): HTMLElement {
  const r = summary.summary;
  const box = span("tdview-compare-summary", "");
  const counts = rollupCounts(r);
  if (!counts.length) box.append(span("tdview-compare-equal", `no differences at this level`));
  for (const [mark, n, word] of counts) {
    box.append(
      span(
        `tdview-count tdview-count-${word.replace(" ", "-")}`,
        `${mark}${formatCount(n)} ${word}`,
      ),
    );
  }
  for (const [n, words, title] of sameParts(r)) {
    const unverified = words === UNVERIFIED_TEXT;
    const part = span(
      unverified ? "tdview-compare-unverified" : "tdview-compare-same",
      `${formatCount(n)} ${words}`,
    );
    part.title = title;
    box.append(part);
    if (unverified) {
      const next = button("Compare values", "tdview-compare-unverified-values", compareValues);
      next.title = "Read both sides of every leaf and compare their values";
      box.append(next);
    }
  }
  const bytes = r.bytes_changed + r.bytes_added + r.bytes_removed;
  if (bytes) box.append(span("tdview-bytes", `${humanBytes(bytes)} differ`));
  return box;
}

export class CompareApp {
  readonly element: HTMLElement;
  readonly details: CompareDetails;
  readonly #source: CompareSource;
  readonly #options: CompareAppOptions;
  readonly #header: HTMLElement;
  readonly #browser: HTMLElement;
  readonly #status: HTMLElement;
  readonly #task: HTMLElement;
  readonly #onlyChanged: HTMLInputElement;
  readonly #prev: HTMLButtonElement;
  readonly #next: HTMLButtonElement;
  readonly #refineAll: HTMLButtonElement[] = [];
  readonly #tolerance: ToleranceFields;
  #state: CompareState;
  #tree: TreeModel | null = null;
  #view: TreeView | null = null;
  #navigator: DiffNavigator;
  #refine: AbortController | null = null;
  #detailsTimer: ReturnType<typeof setTimeout> | undefined;
  #shownPath: string | null = null;
  #stepToken = 0;
  /** What the tree on screen is still opening (the first one shows at once). */
  #wanted: TreeState | null = null;
  /** The tree a rebuild under way opens off screen. */
  #pending: TreeModel | null = null;
  #rebuilds = 0;
  #disposed = false;

  constructor(options: CompareAppOptions) {
    this.#options = options;
    this.#source = options.source;
    this.#state = options.state;
    this.#navigator = new DiffNavigator(this.#source, this.#state.root);
    this.element = el("div", "tdview-app tdview-compare");
    this.#header = el("header", "tdview-header tdview-compare-header");
    this.#renderHeader();
    this.#onlyChanged = el("input", "tdview-only-changed");
    this.#onlyChanged.type = "checkbox";
    this.#onlyChanged.checked = true;
    this.#onlyChanged.addEventListener("change", () => void this.#rebuild());
    const only = el("label", "tdview-field tdview-only-changed-field");
    only.append(this.#onlyChanged, span("", "Only differences"));
    only.title = "Show only the keys that differ and the nodes that hold them";
    this.#prev = button("◀ Previous difference", "tdview-prev-difference", () => this.step(-1));
    this.#next = button("Next difference ▶", "tdview-next-difference", () => this.step(1));
    this.#prev.setAttribute("aria-keyshortcuts", "[ Alt+ArrowUp");
    this.#next.setAttribute("aria-keyshortcuts", "] Alt+ArrowDown");
    this.#prev.title = "Previous difference (key [ or Alt+↑ in the tree)";
    this.#next.title = "Next difference (key ] or Alt+↓ in the tree)";
    this.#prev.append(el("kbd", "tdview-kbd", PREVIOUS_KEYS));
    this.#next.prepend(el("kbd", "tdview-kbd", NEXT_KEYS));
    const all = el("span", "tdview-compare-all");
    all.append(span("tdview-field-label", "Compare all by"));
    for (const [label, level] of [
      ["bytes", "fingerprint"],
      ["values", "values"],
    ] as const) {
      const b = button(label, `tdview-compare-all-${level}`, () => void this.refine([], level));
      b.title =
        level === "values"
          ? "Read every leaf of both sides and compare their values element by element"
          : "Compare every leaf's bytes: sizes and CRC-32s of archive entries, files byte by byte";
      this.#refineAll.push(b);
      all.append(b);
    }
    this.#tolerance = new ToleranceFields(this.#state.summary);
    all.append(this.#tolerance.element);
    const toolbar = el("div", "tdview-compare-toolbar");
    toolbar.append(only, this.#prev, this.#next, all);
    this.#status = el("div", "tdview-compare-status");
    this.#status.setAttribute("role", "status");
    this.#task = el("div", "tdview-compare-task");
    this.#task.setAttribute("aria-live", "polite");
    const hint = el("p", "tdview-note tdview-compare-keys", KEYS_HINT);
    this.#browser = el("div", "tdview-browser");
    this.details = new CompareDetails(this.#source, {
      state: this.#state,
      options: options.options,
      onRefine: (path, level) => void this.refine(path, level),
    });
    const body = el("div", "tdview-body");
    body.append(this.#browser, this.details.element);
    this.element.append(this.#header, toolbar, hint, this.#task, this.#status, body);
    void this.#rebuild(options.selected ?? []);
  }

  get tree(): TreeModel | null {
    return this.#tree;
  }

  get view(): TreeView | null {
    return this.#view;
  }

  get onlyChanged(): boolean {
    return this.#onlyChanged.checked;
  }

  /** Shows or hides the keys without differences (rebuilds the tree). */
  async setOnlyChanged(on: boolean): Promise<void> {
    this.#onlyChanged.checked = on;
    await this.#rebuild();
  }

  /** Expands the ancestors of `path`, selects it and scrolls to it. */
  async reveal(path: Path): Promise<boolean> {
    const tree = this.#tree;
    const view = this.#view;
    if (!tree || !view) return false;
    const index = await tree.revealPath(path);
    if (this.#disposed || tree !== this.#tree) return false;
    if (index >= 0) view.scrollToIndex(index);
    return index >= 0;
  }

  /** Selects the next (1) or the previous (-1) difference. */
  async step(direction: 1 | -1): Promise<Path | null> {
    const token = ++this.#stepToken;
    const from = this.#tree?.selectedPath ?? [];
    this.#status.textContent = "";
    try {
      const navigator = this.#navigator;
      const found = direction > 0 ? await navigator.next(from) : await navigator.previous(from);
      if (token !== this.#stepToken || this.#disposed) return null;
      if (!found) {
        this.#status.textContent =
          direction > 0 ? "No difference after this one." : "No difference before this one.";
        return null;
      }
      await this.reveal(found);
      this.#view?.element.focus({ preventScroll: true });
      return found;
    } catch (error) {
      if (!isCancelled(error)) this.#status.textContent = errorText(error);
      return null;
    }
  }

  /** Compares the subtree at `path` again at `level`, with progress and a Cancel button. */
  async refine(path: Path, level: DiffLevel): Promise<DiffSummary | null> {
    if (this.#refine) return null;
    // the tolerances typed (a value comparison uses them; the other levels ignore them)
    const tolerance = this.#tolerance.values();
    if ("error" in tolerance) {
      this.#task.replaceChildren(alertBox(`Cannot compare values: ${tolerance.error}.`));
      return null;
    }
    const abort = new AbortController();
    this.#refine = abort;
    this.#setBusy(true);
    const what = path.length ? path.join("/") : "the whole tree";
    const words = level === "values" ? "values" : level === "fingerprint" ? "bytes" : "metadata";
    const progress = el("progress", "tdview-progress");
    const label = span("tdview-progress-label", `Comparing ${words} of ${what}…`);
    const cancel = button("Cancel", "tdview-cancel-button tdview-refine-cancel", () =>
      abort.abort(),
    );
    const row = el("div", "tdview-progress-row");
    row.append(progress, label, cancel);
    this.#task.replaceChildren(row);
    const onProgress = (p: ProgressInfo) => {
      progress.max = Math.max(p.total, 1);
      progress.value = p.done;
      const read = p.total ? ` ${humanBytes(p.done)} of ${humanBytes(p.total)} read` : "";
      label.textContent = `Comparing ${words} of ${what}…${read}`;
    };
    try {
      const summary = await this.#source.refine(path, level, {
        signal: abort.signal,
        onProgress,
        rtol: tolerance.rtol,
        atol: tolerance.atol,
      });
      if (this.#disposed) return null;
      this.#task.replaceChildren(
        el(
          "p",
          "tdview-note tdview-refine-done",
          `Compared ${words} of ${what}: ${rollupText(summary.summary)} in all.`,
        ),
      );
      await this.setSummary(summary);
      return summary;
    } catch (error) {
      if (this.#disposed) return null;
      this.#task.replaceChildren(
        isCancelled(error)
          ? el(
              "p",
              "tdview-note tdview-refine-cancelled",
              `Comparing ${what} cancelled; nothing changed.`,
            )
          : alertBox(errorText(error)),
      );
      return null;
    } finally {
      if (this.#refine === abort) this.#refine = null;
      this.#setBusy(false);
    }
  }

  /** A new summary (a refine, or the `compare` trait): header, tree and details follow. */
  async setSummary(summary: DiffSummary): Promise<void> {
    this.#state = { ...this.#state, summary };
    this.#renderHeader();
    const root = await this.#source.node([]).catch(() => this.#state.root);
    if (this.#disposed) return;
    this.#state = { ...this.#state, root };
    this.details.setState(this.#state);
    this.#renderHeader();
    this.#navigator = new DiffNavigator(this.#source, root);
    this.#shownPath = null;
    await this.#rebuild();
  }

  /** The `compare` trait changed (the kernel's record of a refine: of this view's own,
   * whose reply follows it, nothing to do). */
  setState(state: CompareState): void {
    if (this.#refine) return;
    if (JSON.stringify(state.summary) === JSON.stringify(this.#state.summary)) return;
    void this.setSummary(state.summary);
  }

  /** New load defaults (the `options` trait). */
  setDefaults(options: Options): void {
    this.details.setDefaults(options);
  }

  dispose(): void {
    this.#disposed = true;
    clearTimeout(this.#detailsTimer);
    this.#refine?.abort();
    this.#pending?.dispose();
    this.#tree?.dispose();
    this.#view?.dispose();
    this.details.dispose();
  }

  // ------------------------------------------------------------ internals

  #renderHeader(): void {
    const { source_a, source_b, summary } = this.#state;
    const a = span("tdview-source tdview-compare-source-a", source_a);
    a.title = summary.a;
    const b = span("tdview-source tdview-compare-source-b", source_b);
    b.title = summary.b;
    const tolerances =
      summary.level !== "metadata" &&
      summary.level !== "fingerprint" &&
      (summary.rtol || summary.atol)
        ? ` within rtol ${summary.rtol}, atol ${summary.atol}`
        : "";
    const level = span(
      "tdview-badge tdview-compare-level",
      `${LEVEL_WORDS[summary.level] ?? summary.level}${tolerances}`,
    );
    level.title = "What this comparison read";
    this.#header.replaceChildren(
      span("tdview-compare-side-label", "a"),
      a,
      span("tdview-compare-arrow", "→"),
      span("tdview-compare-side-label", "b"),
      b,
      level,
      summaryLine(summary, () => void this.refine([], "values")),
    );
  }

  #setBusy(busy: boolean): void {
    for (const b of this.#refineAll) b.disabled = busy;
    for (const b of this.#header.querySelectorAll("button")) b.disabled = busy;
    this.#tolerance.disabled = busy;
    this.details.setBusy(busy);
  }

  /**
   * A new tree (and view) over the pages of the current mode, the old one's state kept:
   * the new tree opens the rows the old had open and selects the same key (or its nearest
   * ancestor still shown) before it replaces the old one on screen, with the selected row
   * where it was in the viewport. The first tree shows at once and opens as it can.
   */
  async #rebuild(select?: Path): Promise<void> {
    const token = ++this.#rebuilds;
    const old = this.#tree;
    // a rebuild while the tree on screen is still opening keeps what that one wants
    const wanted = (): TreeState =>
      select
        ? { expanded: [[]], selected: select }
        : (this.#wanted ??
          (old ? treeState(old, this.#shownSelection()) : { expanded: [[]], selected: [] }));
    const only = this.#onlyChanged.checked;
    const rootLabel = `${baseName(this.#state.source_a)} → ${baseName(this.#state.source_b)}`;
    const tree = new TreeModel(
      new CompareTreeSource(this.#source, only),
      compareNode(this.#state.root, only),
      { rootLabel, ...this.#options.tree },
    );
    this.#pending?.dispose();
    this.#pending = null;
    const current = () => token === this.#rebuilds && !this.#disposed;
    if (old && this.#view) await this.#replace(tree, wanted, current);
    else await this.#openShown(tree, wanted(), current);
  }

  /** The first tree: on screen at once, opened as its pages come. */
  async #openShown(tree: TreeModel, wanted: TreeState, current: () => boolean): Promise<void> {
    this.#wanted = wanted;
    const view = this.#show(tree);
    await restoreTreeState(tree, wanted);
    if (!current()) return;
    this.#wanted = null;
    view.scrollToIndex(tree.selectedIndex);
    this.#selectionChanged();
    view.render();
  }

  /**
   * A tree in place of the one on screen, opened off screen first: the old one stays in
   * view, and usable, until the new one is ready, and what the user changed on it
   * meanwhile is caught up with (a few rounds). The selected row stays where it was in
   * the viewport.
   */
  async #replace(tree: TreeModel, wanted: () => TreeState, current: () => boolean): Promise<void> {
    this.#pending = tree;
    let state = wanted();
    for (let round = 0; ; round++) {
      await restoreTreeState(tree, state);
      if (!current()) return;
      const now = wanted();
      if (sameTreeState(now, state) || round >= 2) break;
      state = now;
    }
    const above =
      (this.#tree?.selectedIndex ?? 0) * ROW_HEIGHT - (this.#view?.element.scrollTop ?? 0);
    this.#pending = null;
    this.#wanted = null;
    const view = this.#show(tree);
    view.element.scrollTop = Math.max(0, tree.selectedIndex * ROW_HEIGHT - above);
    view.scrollToIndex(tree.selectedIndex);
    view.render();
    this.#selectionChanged();
  }

  /** The selection of the tree on screen (its path, or the one it is revealing). */
  #shownSelection(): Path {
    return this.#tree?.selectedPath ?? this.#wanted?.selected ?? [];
  }

  /** Puts `tree` on screen in a new view, in place of the one there. */
  #show(tree: TreeModel): TreeView {
    const hadFocus = this.#view?.element.contains(document.activeElement) ?? false;
    this.#tree?.dispose();
    this.#view?.dispose();
    const keyboard = new CompareKeyboard(tree, (direction) => void this.step(direction));
    const view = new TreeView(tree, {
      label: "Keys of both checkpoints",
      fillRow: fillCompareRow,
      keyboard,
      rowHeight: ROW_HEIGHT,
    });
    this.#tree = tree;
    this.#view = view;
    this.#browser.replaceChildren(view.element);
    tree.subscribe((change) => {
      if (change.selection && tree === this.#tree) this.#selectionChanged();
    });
    if (hadFocus) view.element.focus({ preventScroll: true });
    return view;
  }

  #selectionChanged(): void {
    if (this.#disposed) return;
    const path = this.#tree?.selectedPath ?? null;
    const key = path && JSON.stringify(path);
    if (key === this.#shownPath) return;
    this.#shownPath = key;
    clearTimeout(this.#detailsTimer);
    if (path) this.#options.onSelect?.(path);
    const show = () => void this.details.show(path);
    const delay = this.#options.detailsDelayMs ?? 100;
    if (delay > 0) this.#detailsTimer = setTimeout(show, delay);
    else show();
  }
}
