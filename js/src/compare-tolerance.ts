/**
 * The tolerances of a value comparison, as the user types them: `rtol` and `atol`
 * (an element differs when |a - b| > atol + rtol·|a|, as `torch.isclose` reads them),
 * two fields beside "Compare all by". Empty means 0; anything else must be a finite
 * number ≥ 0 (`1e-5`, `0.001`), or the comparison does not start and the field says why.
 */

import { el } from "./dom";

export interface Tolerances {
  rtol: number;
  atol: number;
}

/** The number a field holds, or the reason it is none. */
export function parseTolerance(text: string): number | { error: string } {
  const trimmed = text.trim();
  if (trimmed === "") return 0;
  // Number() takes "0x10", "Infinity" and " ": only decimal and exponent forms here
  if (!/^[+]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(trimmed)) {
    return { error: `not a number ≥ 0: ${JSON.stringify(trimmed)}` };
  }
  const value = Number(trimmed);
  if (!Number.isFinite(value)) return { error: `too large: ${trimmed}` };
  return value;
}

/** How a tolerance reads in its field: "" for 0, the shortest exact form otherwise. */
export function toleranceText(value: number): string {
  return value ? String(value) : "";
}

export class ToleranceFields {
  readonly element: HTMLElement;
  readonly #inputs: Record<keyof Tolerances, HTMLInputElement>;

  constructor(initial: Tolerances) {
    this.element = el("span", "tdview-compare-tolerance");
    this.element.title =
      "A value comparison counts an element as differing when |a − b| > atol + rtol·|a|";
    this.element.append(el("span", "tdview-field-label", "within"));
    const make = (name: keyof Tolerances): HTMLInputElement => {
      const input = el("input", `tdview-tolerance tdview-${name}`);
      input.type = "text";
      input.inputMode = "decimal";
      input.size = 7;
      input.placeholder = "0";
      input.spellcheck = false;
      input.value = toleranceText(initial[name]);
      input.setAttribute("aria-label", name);
      input.addEventListener("input", () => this.#check(input));
      const label = el("label", "tdview-field");
      label.append(el("span", "tdview-field-label", name), input);
      this.element.append(label);
      return input;
    };
    this.#inputs = { rtol: make("rtol"), atol: make("atol") };
  }

  /** The tolerances typed, or the first field's problem (that field is marked). */
  values(): Tolerances | { error: string } {
    const found: Partial<Tolerances> = {};
    for (const name of ["rtol", "atol"] as const) {
      const value = this.#check(this.#inputs[name]);
      if (typeof value !== "number") return { error: `${name}: ${value.error}` };
      found[name] = value;
    }
    return found as Tolerances;
  }

  /** Shows the tolerances a comparison used (the kernel's summary after a refine). */
  set(values: Tolerances): void {
    for (const name of ["rtol", "atol"] as const) {
      const input = this.#inputs[name];
      if (document.activeElement !== input) input.value = toleranceText(values[name]);
      this.#check(input);
    }
  }

  set disabled(busy: boolean) {
    for (const input of Object.values(this.#inputs)) input.disabled = busy;
  }

  #check(input: HTMLInputElement): number | { error: string } {
    const value = parseTolerance(input.value);
    const bad = typeof value !== "number";
    input.setAttribute("aria-invalid", String(bad));
    input.classList.toggle("tdview-invalid", bad);
    input.title = bad ? value.error : "";
    return value;
  }
}
