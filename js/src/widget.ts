/**
 * The anywidget entry point: wires the model's traits and custom messages to an `App`.
 *
 * The view is rebuilt when a trait that shapes it changes (`_protocol_version`,
 * `source`, `root`, `error`); `selected` is synced both ways without a rebuild, and a
 * new `options` trait resets the load form's defaults. When the kernel goes away (a
 * restart), the view says so once, stays on show greyed out, and asks nothing more.
 */

import { CommDataSource, type CommModel } from "./comm-data-source";
import { type Path, PROTOCOL_VERSION, parseState, type WidgetState } from "./protocol";
import { App, errorBox, versionMismatch } from "./render-app";

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

/** The one calm line shown over a view whose kernel is gone. */
export function lostNotice(message: string): HTMLElement {
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
  let app: App | null = null;
  const onLost = (error: Error) => {
    app?.dispose(); // nothing more is asked; pending replies change nothing
    if (app) {
      app.element.classList.add("tdview-stale");
      app.element.inert = true;
    }
    app = null;
    container.prepend(lostNotice(error.message));
  };
  const source = new CommDataSource(model, { onLost });
  let synced = JSON.stringify(model.get("selected") ?? []);

  const onSelect = (path: Path) => {
    const key = JSON.stringify(path);
    if (key === synced) return;
    synced = key;
    model.set("selected", path);
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
    app = new App({ source, state, onSelect });
    container.replaceChildren(app.element);
    app.view?.render();
  };

  const onSelectedTrait = () => {
    const path = model.get("selected");
    const key = JSON.stringify(path);
    if (key === synced || !Array.isArray(path)) return;
    synced = key;
    void app?.reveal(path.map(String));
  };

  // New load defaults from the kernel reach the form without a rebuild.
  const onOptionsTrait = () => {
    const state = readState(model);
    if (!(state instanceof HTMLElement)) app?.details?.loader.setDefaults(state.options);
  };

  for (const name of REBUILD_ON) model.on(`change:${name}`, build);
  model.on("change:selected", onSelectedTrait);
  model.on("change:options", onOptionsTrait);
  build();

  return () => {
    for (const name of REBUILD_ON) model.off(`change:${name}`, build);
    model.off("change:selected", onSelectedTrait);
    model.off("change:options", onOptionsTrait);
    app?.dispose();
    source.dispose();
    container.remove();
  };
}

export default { render };
