/**
 * Copying text: `navigator.clipboard.writeText` where the page may use it, else the
 * old `execCommand("copy")` on a hidden selection, else the text is shown selected in a
 * read-only field for the user to copy with Ctrl+C / ⌘C.
 */

import { el } from "./dom";

export type CopyOutcome = "clipboard" | "command" | "manual";

function copyBySelection(text: string): boolean {
  const area = el("textarea", "tdview-copy-buffer");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.append(area);
  try {
    area.select();
    return typeof document.execCommand === "function" && document.execCommand("copy");
  } catch {
    return false;
  } finally {
    area.remove();
  }
}

/** Copies `text`; "manual" means neither way worked and the user must copy it. */
export async function copyText(text: string): Promise<CopyOutcome> {
  try {
    if (navigator.clipboard?.writeText) {
      await navigator.clipboard.writeText(text);
      return "clipboard";
    }
  } catch {
    // Not allowed here (an insecure origin, no permission): fall back.
  }
  return copyBySelection(text) ? "command" : "manual";
}

export interface CopyButtonOptions {
  /** Accessible name, e.g. "Copy the nested key". */
  title?: string;
  /** Milliseconds the "Copied" confirmation stays. */
  confirmMs?: number;
}

/**
 * A button that copies `text()` when clicked. When the clipboard cannot be reached it
 * shows the text in a selected read-only field next to the button instead.
 */
export class CopyButton {
  readonly element: HTMLElement;
  readonly button: HTMLButtonElement;
  readonly #text: () => string;
  readonly #label: string;
  readonly #confirmMs: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #manual: HTMLInputElement | null = null;

  constructor(label: string, text: () => string, options: CopyButtonOptions = {}) {
    this.#text = text;
    this.#label = label;
    this.#confirmMs = options.confirmMs ?? 1500;
    this.element = el("span", "tdview-copy");
    this.button = el("button", "tdview-button tdview-copy-button", label);
    this.button.type = "button";
    if (options.title) {
      this.button.title = options.title;
      this.button.setAttribute("aria-label", options.title);
    }
    this.button.addEventListener("click", () => void this.copy());
    this.element.append(this.button);
  }

  set disabled(value: boolean) {
    this.button.disabled = value;
  }

  /** Copies now; resolves with how it went. */
  async copy(): Promise<CopyOutcome> {
    const text = this.#text();
    this.#manual?.remove();
    this.#manual = null;
    const outcome = await copyText(text);
    if (outcome === "manual") this.#showManual(text);
    else this.#confirm();
    this.element.dataset.copied = text;
    return outcome;
  }

  dispose(): void {
    clearTimeout(this.#timer);
  }

  #confirm(): void {
    this.button.textContent = "Copied ✓";
    this.button.classList.add("tdview-copied");
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.button.textContent = this.#label;
      this.button.classList.remove("tdview-copied");
    }, this.#confirmMs);
  }

  #showManual(text: string): void {
    const field = el("input", "tdview-copy-manual");
    field.readOnly = true;
    field.value = text;
    field.setAttribute("aria-label", "Press Ctrl+C to copy");
    field.title = "The clipboard is not available here: press Ctrl+C (⌘C) to copy";
    this.element.append(field);
    this.#manual = field;
    field.focus();
    field.select();
  }
}
