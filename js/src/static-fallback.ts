/**
 * The static tree shown while no kernel answers.
 *
 * A notebook saved with widget state is shown by its widget view, not by the output's
 * text/html: nbconvert's HTML export (its templates emit the widget-view script alone
 * once the model is in the saved state), a viewer with the html-manager, JupyterLab
 * reopening a notebook before a kernel runs its cell. There no reply ever comes and the
 * live tree would stay empty, so the view shows the `_static_html` trait (the text/html
 * that `TDView._repr_mimebundle_` built, bounded) once the first request has gone
 * unanswered for `delayMs`, or at once when sending fails. The first message from the
 * kernel gives the live view back.
 */

import type { CommModel } from "./comm-data-source";

/** Read right both with no kernel (an export, a notebook reopened) and with a kernel busy
 * with a long cell, which answers once the cell is done. */
export const STATIC_NOTE = "static view — no kernel has answered yet (run the cell to browse)";
/** A live kernel answers the first request well within this (ms). */
export const STATIC_DELAY_MS = 1000;

/** The note and the static HTML. The HTML is the kernel's, as trusted as the widget's
 * own code (`_esm`) saved beside it; its keys and values were escaped in Python. */
export function staticView(html: string): HTMLElement {
  const box = document.createElement("div");
  box.className = "tdview-static-fallback";
  const note = document.createElement("div");
  note.className = "tdview-lost tdview-static-note";
  note.setAttribute("role", "status");
  note.textContent = `tdview: ${STATIC_NOTE}`;
  const tree = document.createElement("div");
  tree.className = "tdview-static-tree";
  tree.innerHTML = html;
  box.append(note, tree);
  return box;
}

export interface StaticFallbackOptions {
  /** Called with true when the static view should show, false when the kernel answered. */
  onChange: (showStatic: boolean) => void;
  delayMs?: number;
}

type Listener = (a?: unknown, b?: unknown) => void;

export class StaticFallback {
  readonly #model: CommModel;
  /** The trait, read when needed: the kernel sets it as the output is displayed. */
  readonly #html: () => string;
  readonly #onChange: (showStatic: boolean) => void;
  readonly #delayMs: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #answered = false;
  #showing = false;
  #element: HTMLElement | null = null;

  constructor(model: CommModel, html: () => unknown, options: StaticFallbackOptions) {
    this.#model = model;
    this.#html = () => {
      const value = html();
      return typeof value === "string" ? value : "";
    };
    this.#onChange = options.onChange;
    this.#delayMs = options.delayMs ?? STATIC_DELAY_MS;
    model.on("msg:custom", this.#onMessage);
  }

  /** Whether the static view is on show. */
  get showing(): boolean {
    return this.#showing;
  }

  /** Puts the static view before `live` and hides `live`, or the other way round. */
  place(container: HTMLElement, live: HTMLElement | null): void {
    if (live) live.style.display = this.#showing ? "none" : "";
    if (!this.#showing) {
      this.#element?.remove();
      return;
    }
    this.#element ??= staticView(this.#html());
    container.prepend(this.#element);
  }

  /** The model to send requests through: the first request starts the wait. */
  watch(model: CommModel): CommModel {
    return {
      send: (content, callbacks, buffers) => {
        this.#arm();
        model.send(content, callbacks, buffers);
      },
      on: (event, callback) => model.on(event, callback),
      off: (event, callback) => model.off(event, callback),
    };
  }

  /** The connection was lost: true when the static view is shown instead of the
   * lost notice (no kernel has ever answered this view). */
  lost(): boolean {
    if (this.#answered || !this.#html()) return false;
    this.#show(true);
    return true;
  }

  dispose(): void {
    clearTimeout(this.#timer);
    this.#model.off("msg:custom", this.#onMessage);
  }

  #arm(): void {
    if (this.#answered || this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      if (!this.#answered && this.#html()) this.#show(true);
    }, this.#delayMs);
  }

  #show(showStatic: boolean): void {
    if (this.#showing === showStatic) return;
    this.#showing = showStatic;
    this.#onChange(showStatic);
  }

  readonly #onMessage: Listener = (msg) => {
    if (this.#answered) return;
    const kind = (msg as { kind?: unknown } | null)?.kind;
    if (typeof kind !== "string" || !kind.startsWith("tdview:")) return;
    this.#answered = true;
    clearTimeout(this.#timer);
    this.#show(false);
  };
}
