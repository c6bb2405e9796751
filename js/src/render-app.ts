/**
 * The whole widget view for one state: header, error, search, tree and details.
 * It knows nothing of anywidget: widget.ts feeds it the traits and a `DataSource`.
 */

import type { DataSource } from "./data-source";
import { pathText } from "./dom";
import { type DotGroup, DotGroupedSource, dotGroupOf } from "./dot-groups";
import { filterTree } from "./filter-tree";
import { formatCount, formatShape, humanBytes, kindLabel, rollupContents } from "./format";
import { InlineValues } from "./inline-values";
import {
  type NodeDetails,
  type NodeSummary,
  type Path,
  PROTOCOL_VERSION,
  type WidgetState,
} from "./protocol";
import { DetailsPanel } from "./render-details";
import { SearchBox } from "./render-search";
import { TreeView, type TreeViewOptions } from "./render-tree";
import { SplitDivider } from "./split-divider";
import { TreeModel, type TreeModelOptions } from "./tree-model";

export const VERSION_MISMATCH =
  "tdview: this output was made by another version of tdview; re-run the cell.";

export interface AppOptions {
  source: DataSource;
  state: WidgetState;
  /** Called when the user selects a loaded node. */
  onSelect?: (path: Path) => void;
  /** Delay before the details of a new selection are fetched (ms). */
  detailsDelayMs?: number;
  tree?: TreeModelOptions;
  view?: TreeViewOptions;
  /** How this view was laid out last (the widget model keeps it per notebook view). */
  layout?: ViewLayout;
  /** Called when the user changes the layout (drags the divider). */
  onLayout?: (layout: ViewLayout) => void;
}

/** What the user chose of a view's layout, kept with the widget model. */
export interface ViewLayout {
  /** The tree's share of the width (0.15 to 0.85). */
  split?: number;
  /** Whether dotted keys show grouped by `.` (unset: grouped where they share prefixes). */
  grouped?: boolean;
}

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text = "",
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  element.className = className;
  if (text) element.textContent = text;
  return element;
}

function basename(source: string): string {
  const parts = source.split(/[\\/]/).filter(Boolean);
  return parts[parts.length - 1] ?? source;
}

function header(state: WidgetState): HTMLElement {
  const box = el("header", "tdview-header");
  const source = pathText(state.source || "(no checkpoint)", "tdview-source");
  source.title = state.source;
  box.append(source);
  const root = state.root;
  if (root) {
    // a collection's root has no class: it is a folder of checkpoints
    const what = root.kind === "collection" ? kindLabel(root.kind) : root.class_name;
    box.append(el("span", "tdview-root-class", what));
    if (root.batch_size)
      box.append(el("span", "tdview-batch", `batch ${formatShape(root.batch_size)}`));
    if (root.bytes !== null) box.append(el("span", "tdview-bytes", humanBytes(root.bytes)));
    box.append(el("span", "tdview-root-leaves"));
  }
  return box;
}

/** The checkbox that switches the grouping of dotted keys; hidden until it can group. */
function groupToggle(): { label: HTMLLabelElement; input: HTMLInputElement } {
  const label = el("label", "tdview-group-toggle");
  const input = document.createElement("input");
  input.type = "checkbox";
  label.append(input, " group keys by “.”");
  label.title = "Show dotted keys (a flat state_dict) nested as their modules are";
  label.hidden = true;
  return { label, input };
}

/** The message shown instead of the widget when the protocol versions differ. */
export function versionMismatch(): HTMLElement {
  const box = el("div", "tdview-version-mismatch", VERSION_MISMATCH);
  box.setAttribute("role", "alert");
  return box;
}

export function errorBox(message: string): HTMLElement {
  const box = el("div", "tdview-error", message);
  box.setAttribute("role", "alert");
  return box;
}

export class App {
  readonly element: HTMLElement;
  #tree: TreeModel | null = null;
  #view: TreeView | null = null;
  /** What a tree is built with (a new one when the grouping is switched). */
  #treeOptions: TreeModelOptions = {};
  #viewOptions: TreeViewOptions = {};
  #layout: ViewLayout = {};
  #onLayout: ((layout: ViewLayout) => void) | undefined;
  #rootTotals: { bytes: number; numel: number | null } | null = null;
  /** "Group keys by ." (dot-groups.ts), shown once a level can be grouped. */
  readonly #groupToggle = groupToggle();
  /** Says what a selected group of keys is (it has no details: it is no node). */
  readonly #groupNote = el("p", "tdview-group-note");
  readonly details: DetailsPanel | null = null;
  readonly #search: SearchBox | null = null;
  readonly #inline: InlineValues | null = null;
  /** The tree filtered in place by the search (shown instead of the whole tree). */
  #filtered: { tree: TreeModel; view: TreeView } | null = null;
  #filterAbort: AbortController | null = null;
  /** The whole tree's selection when the filter was turned on (restored when it is off). */
  #beforeFilter: Path | null = null;
  #source: DataSource | null = null;
  #root: NodeSummary | null = null;
  #rootLabel = "";
  readonly #onSelect: ((path: Path) => void) | undefined;
  readonly #detailsDelayMs: number;
  #detailsTimer: ReturnType<typeof setTimeout> | undefined;
  /** Set by `dispose`: replies and reveals that end later change nothing. */
  #disposed = false;
  #shownPath: string | null = null;

  constructor(options: AppOptions) {
    const { state, source } = options;
    this.#onSelect = options.onSelect;
    this.#detailsDelayMs = options.detailsDelayMs ?? 100;
    this.element = el("div", "tdview-app");
    if (state._protocol_version !== PROTOCOL_VERSION) {
      this.element.append(versionMismatch());
      return;
    }
    this.element.append(header(state));
    if (state.error) this.element.append(errorBox(state.error));
    if (!state.root) return;
    const rootLabel = basename(state.source) || "(root)";
    this.#source = source;
    this.#root = state.root;
    this.#rootLabel = rootLabel;
    const inline = new InlineValues(source, () => {
      this.view?.refresh();
      this.#search?.refresh(); // a match's parameter, as its row shows it
    });
    // the root's size and tensor count, once its details bring its rollup
    let rootTotals = "";
    this.#inline = inline;
    this.#layout = { ...options.layout };
    this.#onLayout = options.onLayout;
    this.#treeOptions = { rootLabel, ...options.tree };
    this.#viewOptions = {
      // Enter or a double click on a leaf opens its preview (which then stays open)
      onActivate: () => this.details?.preview.openPreview(),
      inlineValue: (node) => (node.path.length === 0 ? rootTotals : inline.textOf(node)),
      rowTitle: (node) => this.details?.rowTitle(node) ?? "",
      ...options.view,
    };
    const { tree, view } = this.#makeTree(this.#layout.grouped ?? true);
    this.#groupToggle.input.checked = this.#layout.grouped ?? true;
    this.#groupToggle.input.addEventListener("change", () => {
      void this.setGrouped(this.#groupToggle.input.checked);
    });
    this.details = new DetailsPanel(source, { source: state.source, options: state.options });
    // a problem's key in the check's list selects its node
    this.details.check.onReveal = (path) => void this.reveal(path);
    this.details.related.onOpen = (path) => void this.reveal(path);
    this.details.sizes.onOpen = (path) => void this.reveal(path);
    // a leaf previewed: its row's tooltip now has its summary
    this.details.head.onStats = () => {
      this.view?.refresh();
      this.#filtered?.view.refresh();
    };
    const showRootTotals = (d: NodeDetails) => {
      if (d.path.length > 0 || !d.rollup || d.member || this.#disposed) return;
      this.#rootTotals = { bytes: d.rollup.bytes, numel: d.rollup.numel };
      this.tree?.setRootTotals(d.rollup.bytes, d.rollup.numel);
      const text = rollupContents(d.rollup);
      if (text === rootTotals) return;
      rootTotals = text;
      const slot = this.element.querySelector(".tdview-header .tdview-root-leaves");
      if (slot) slot.textContent = `${humanBytes(d.rollup.bytes)} in ${text}`;
      this.element.querySelector(".tdview-header .tdview-bytes")?.remove();
      this.view?.refresh();
    };
    this.details.onDetails = showRootTotals;
    // the root row shows its size: asked for here, never cancelled, since the details'
    // own request for the root's totals is dropped as soon as another row is picked
    if (state.root.bytes === null) {
      const asked = source.node([]);
      this.details.rootTotals = asked; // the details of the root show them: no second walk
      asked.then(showRootTotals, () => {});
    }
    // a folder picked shows its children; a row picked from the list hands the tree the keys
    this.#search = new SearchBox(source, (path, how) => void this.reveal(path, how), {
      onFilter: (pattern) => void this.filter(pattern),
      inlineValue: (node) => (node.path.length === 0 ? "" : inline.textOf(node)),
    });
    const left = el("div", "tdview-browser");
    left.append(this.#search.element, this.#groupToggle.label, view.element);
    const body = el("div", "tdview-body");
    const divider = new SplitDivider(body, this.#layout.split ?? 0.5, (split) => {
      this.#layout.split = split;
      this.#onLayout?.({ ...this.#layout });
    });
    body.append(left, divider.element, this.details.element);
    this.element.append(body);
    void tree.expand(0);
    const revealed =
      state.selected.length > 0 ? this.reveal(state.selected) : Promise.resolve(false);
    void revealed.then((found) => {
      if (!found) this.#selectionChanged();
    });
  }

  get tree(): TreeModel | null {
    return this.#tree;
  }

  get view(): TreeView | null {
    return this.#view;
  }

  /** A tree of the checkpoint, its dotted keys grouped or not (dot-groups.ts). */
  #makeTree(grouped: boolean): { tree: TreeModel; view: TreeView } {
    const toggle = this.#groupToggle.label;
    const source = new DotGroupedSource(this.#source as DataSource, {
      enabled: grouped,
      onGroupable: () => {
        toggle.hidden = false;
      },
    });
    const tree = new TreeModel(source, this.#root as NodeSummary, this.#treeOptions);
    const totals = this.#rootTotals;
    if (totals) tree.setRootTotals(totals.bytes, totals.numel);
    const view = new TreeView(tree, this.#viewOptions);
    tree.subscribe((change) => {
      if (change.selection) this.#selectionChanged();
    });
    this.#tree = tree;
    this.#view = view;
    return { tree, view };
  }

  /** Shows the dotted keys grouped by `.` or as they are; the selection stays. */
  async setGrouped(grouped: boolean): Promise<void> {
    const old = this.#tree;
    const oldView = this.#view;
    if (!old || !oldView || this.#disposed) return;
    this.#groupToggle.input.checked = grouped;
    if (this.#layout.grouped !== grouped) {
      this.#layout.grouped = grouped;
      this.#onLayout?.({ ...this.#layout });
    }
    const group = dotGroupOf(old.selectedNode);
    const selected = group ? group.parent : old.selectedPath;
    const focused = oldView.element.contains(document.activeElement);
    const { tree, view } = this.#makeTree(grouped);
    oldView.element.replaceWith(view.element);
    view.element.hidden = oldView.element.hidden; // under a filtered tree it stays hidden
    oldView.dispose();
    old.dispose();
    await tree.expand(0);
    if (selected && selected.length > 0) await this.reveal(selected);
    if (focused) view.element.focus();
  }

  /** Shows only the matches of `pattern` and their ancestors in the tree (null: the
   * whole tree again, with the selection kept). */
  async filter(pattern: string | null): Promise<void> {
    this.#filterAbort?.abort();
    this.#filterAbort = null;
    const main = this.view;
    const root = this.#root;
    if (!main || !root || !this.#source) return;
    const selected = (this.#filtered?.tree ?? this.tree)?.selectedPath ?? null;
    if (!this.#filtered) this.#beforeFilter = selected;
    const dropFiltered = () => {
      this.#filtered?.view.element.remove();
      this.#filtered?.view.dispose();
      this.#filtered?.tree.dispose();
      this.#filtered = null;
      main.element.hidden = false;
    };
    if (pattern === null) {
      dropFiltered();
      // the filtered tree starts on its root: a selection left there is the one before
      const back = selected && selected.length > 0 ? selected : this.#beforeFilter;
      this.#beforeFilter = null;
      if (back) await this.reveal(back);
      return;
    }
    const abort = new AbortController();
    this.#filterAbort = abort;
    try {
      const f = await filterTree(this.#source, root, pattern, { signal: abort.signal });
      if (abort.signal.aborted || this.#disposed) return;
      const grouped = this.#layout.grouped ?? true;
      const matches = new DotGroupedSource(f.source, { enabled: grouped });
      const tree = new TreeModel(matches, f.root, { rootLabel: this.#rootLabel });
      const view = new TreeView(tree, {
        label: "Matches of the search",
        onActivate: () => this.details?.preview.openPreview(),
        rowTitle: (node) => this.details?.rowTitle(node) ?? "",
      });
      dropFiltered();
      this.#filtered = { tree, view };
      main.element.hidden = true;
      main.element.after(view.element);
      tree.subscribe((change) => {
        if (change.selection) this.#selectionChanged();
      });
      await tree.expand(0);
      for (const path of f.matches.slice(0, 200)) {
        if (abort.signal.aborted) return;
        await tree.revealPath(path, { select: false });
      }
      // the node selected before stays selected where the filtered tree holds it
      const before = this.#beforeFilter;
      if (before && before.length > 0 && !abort.signal.aborted) {
        const at = await tree.revealPath(before);
        if (at >= 0) view.scrollToIndex(at);
      }
      view.render();
    } catch {
      // a search that failed says so in the search box
    }
  }

  /** Expands the ancestors of `path`, selects it and scrolls to it; with `folder`, it
   * is expanded too and scrolled to show as many of its children as fit; with
   * `fromList`, the tree takes the focus. */
  async reveal(path: Path, how: { folder?: boolean; fromList?: boolean } = {}): Promise<boolean> {
    const { tree, view } = this;
    if (!tree || !view) return false;
    const index = await tree.revealPath(path);
    if (this.#disposed || index < 0) return false;
    if (how.folder) {
      await tree.expand(index);
      if (this.#disposed || tree.selectedIndex !== index) return true;
      const children = tree.row(index)?.node?.n_children ?? 0;
      view.scrollToIndex(Math.min(index + children, tree.rowCount - 1));
    }
    view.scrollToIndex(index);
    if (how.fromList) view.element.focus();
    return true;
  }

  dispose(): void {
    this.#disposed = true;
    clearTimeout(this.#detailsTimer);
    this.tree?.dispose();
    this.view?.dispose();
    this.details?.dispose();
    this.#search?.dispose();
    this.#inline?.dispose();
    this.#filterAbort?.abort();
    this.#filtered?.view.dispose();
    this.#filtered?.tree.dispose();
  }

  #selectionChanged(): void {
    if (this.#disposed) return; // a rebuilt view must not write `selected` nor ask
    const shown = this.#filtered?.tree ?? this.tree;
    this.#showGroupNote(dotGroupOf(shown?.selectedNode));
    const path = shown?.selectedPath ?? null;
    const key = path && JSON.stringify(path);
    if (key === this.#shownPath) return;
    this.#shownPath = key;
    clearTimeout(this.#detailsTimer);
    if (path) this.#onSelect?.(path);
    const show = () => void this.details?.show(path);
    if (this.#detailsDelayMs > 0) this.#detailsTimer = setTimeout(show, this.#detailsDelayMs);
    else show();
  }

  #showGroupNote(group: DotGroup | undefined): void {
    const note = this.#groupNote;
    if (!group) {
      note.remove();
      return;
    }
    note.textContent =
      `${group.prefix}… groups ${formatCount(group.keys)} keys that share this prefix. ` +
      "A group is no key: select one of its keys to see its details, copy or load it.";
    this.details?.element.prepend(note);
  }
}
