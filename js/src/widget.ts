/**
 * The anywidget entry point: wires the model's traits and custom messages to an `App`.
 *
 * The view is rebuilt when a trait that shapes it changes (`_protocol_version`,
 * `source`, `root`, `error`); a new `options` trait resets the load form's defaults.
 * A click is reported to the kernel with a `tdview:select` message, which sets
 * `selected` there; the view writes one trait itself, `loaded`, after each load. So in a
 * host that treats the synced traits as the widget's value (marimo), a load is
 * reactive and a click is not. `selected` set by the kernel reveals that node. When the kernel goes away (a
 * restart), the view says so once, stays on show greyed out, and asks nothing more.
 * Until a kernel first answers, the `_static_html` trait can stand in (static-fallback.ts).
 */

import { CommDataSource, type CommModel } from "./comm-data-source";
import { parseCompareState } from "./compare-protocol";
import { CommCompareSource } from "./compare-source";
import { followFillArea, followHeight } from "./fill-height";
import {
  type LoadResult,
  type Path,
  PROTOCOL_VERSION,
  parseState,
  type WidgetState,
} from "./protocol";
import { App, errorBox, type ViewLayout, versionMismatch } from "./render-app";
import { CompareApp } from "./render-compare";
import { StaticFallback } from "./static-fallback";
import { isPlainObject } from "./validate";

/** The view's report of a click (the kernel sets `selected`). */
const SELECT = "tdview:select";

/** The part of anywidget's model that the widget uses. */
export interface WidgetModel extends CommModel {
  get(name: string): unknown;
  set(name: string, value: unknown): void;
  save_changes(): void;
}

export interface RenderProps {
  model: WidgetModel;
  el: HTMLElement;
}

const TRAITS = ["_protocol_version", "source", "root", "selected", "options", "error"] as const;
const REBUILD_ON = ["_protocol_version", "source", "root", "error"] as const;

function readState(model: WidgetModel): WidgetState | HTMLElement {
  if (model.get("_protocol_version") !== PROTOCOL_VERSION) return versionMismatch();
  const raw = Object.fromEntries(TRAITS.map((name) => [name, model.get(name)]));
  return parseState(raw) ?? errorBox("tdview: the widget state is malformed; re-run the cell.");
}

/** The layout the user chose for this view before (`_layout`), as far as it reads. */
function readLayout(model: WidgetModel): ViewLayout {
  const raw = model.get("_layout");
  if (!isPlainObject(raw)) return {};
  const layout: ViewLayout = {};
  if (typeof raw.split === "number") layout.split = raw.split;
  if (typeof raw.grouped === "boolean") layout.grouped = raw.grouped;
  return layout;
}

/** The one calm line shown over a view whose kernel is gone. */
function lostNotice(message: string): HTMLElement {
  const box = document.createElement("div");
  box.className = "tdview-lost";
  box.setAttribute("role", "status");
  box.textContent = `tdview: ${message}.`;
  return box;
}

function render({ model, el }: RenderProps): () => void {
  const container = document.createElement("div");
  container.className = "tdview-root";
  el.append(container);
  // in the tdview console panel the view takes the panel's height; in a cell it is compact
  const stopFilling = followFillArea(container);
  // or the height the user chose (`TDView(..., height=)`, the handle at its bottom)
  const stopSizing = followHeight(container, model);
  let app: App | CompareApp | null = null;
  const fallback = new StaticFallback(model, () => model.get("_static_html"), {
    onChange: (showStatic) => {
      fallback.place(container, app?.element ?? null);
      if (!showStatic) app?.view?.render(); // measured again, now that it shows
    },
  });
  const onLost = (error: Error) => {
    app?.dispose(); // nothing more is asked; pending replies change nothing
    if (fallback.lost()) {
      app = null; // no kernel ever answered: the static tree says more than a notice
      return;
    }
    if (app) {
      app.element.classList.add("tdview-stale");
      app.element.inert = true;
    }
    app = null;
    container.prepend(lostNotice(error.message));
  };
  const onLoaded = (result: LoadResult) => {
    const last = model.get("loaded");
    const count = isPlainObject(last) && typeof last.count === "number" ? last.count : 0;
    model.set("loaded", { path: result.path, count: count + 1 });
    model.save_changes();
  };
  const source = new CommDataSource(fallback.watch(model), { onLost, onLoaded });
  let synced = JSON.stringify(model.get("selected") ?? []);
  /** Selections reported and not yet echoed back by the kernel's `selected` trait. */
  const reported: string[] = [];

  const onSelect = (path: Path) => {
    const key = JSON.stringify(path);
    if (key === synced) return;
    synced = key;
    reported.push(key);
    if (reported.length > 64) reported.shift();
    try {
      model.send({ kind: SELECT, v: PROTOCOL_VERSION, path });
    } catch {
      // the kernel is gone: the data source says so on its next request
    }
  };

  // the divider and the grouping, kept per view with the model (and the saved notebook)
  const onLayout = (layout: ViewLayout) => {
    model.set("_layout", layout);
    model.save_changes();
  };

  const build = () => {
    app?.dispose();
    app = null;
    const state = readState(model);
    if (state instanceof HTMLElement) {
      container.replaceChildren(state);
      return;
    }
    // a compare view (`TDView(a, compare=b)`) has a `compare` trait and no root
    const compare = parseCompareState(model.get("compare"));
    app = compare
      ? new CompareApp({
          source: new CommCompareSource(source, onLoaded),
          state: compare,
          options: state.options,
          selected: state.selected,
          onSelect,
        })
      : new App({ source, state, onSelect, layout: readLayout(model), onLayout });
    container.replaceChildren(app.element);
    fallback.place(container, app.element);
    app.view?.render();
  };

  const onSelectedTrait = () => {
    const path = model.get("selected");
    const key = JSON.stringify(path);
    const echo = reported.indexOf(key);
    if (echo >= 0) {
      reported.splice(0, echo + 1); // the kernel caught up with a click: nothing to reveal
      return;
    }
    if (key === synced || !Array.isArray(path)) return;
    synced = key;
    void app?.reveal(path.map(String));
  };

  // New load defaults from the kernel reach the form without a rebuild.
  const onOptionsTrait = () => {
    const state = readState(model);
    if (state instanceof HTMLElement) return;
    if (app instanceof CompareApp) app.setDefaults(state.options);
    else app?.details?.loader.setDefaults(state.options);
  };

  // The kernel's record of a comparison refined (the view asked for it and knows).
  const onCompareTrait = () => {
    const compare = parseCompareState(model.get("compare"));
    if (app instanceof CompareApp && compare) app.setState(compare);
    else if (compare || app instanceof CompareApp) build();
  };

  for (const name of REBUILD_ON) model.on(`change:${name}`, build);
  model.on("change:selected", onSelectedTrait);
  model.on("change:options", onOptionsTrait);
  model.on("change:compare", onCompareTrait);
  build();

  return () => {
    for (const name of REBUILD_ON) model.off(`change:${name}`, build);
    model.off("change:selected", onSelectedTrait);
    model.off("change:options", onOptionsTrait);
    model.off("change:compare", onCompareTrait);
    app?.dispose();
    source.dispose();
    stopFilling();
    stopSizing();
    fallback.dispose();
    container.remove();
  };
}

export default { render };
