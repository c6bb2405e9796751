/** Tiny DOM helpers shared by the render modules. */

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className = "",
  text = "",
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  if (className) element.className = className;
  if (text) element.textContent = text;
  return element;
}

/**
 * `text` as nodes that a line may break only after a separator ("/", ", ") of a
 * path, subpath or key: a `<wbr>` after each, and a class whose CSS never breaks a word.
 *
 * @example pathText("model/layers/0").innerHTML === "model/<wbr>layers/<wbr>0"
 */
export function pathText(text: string, className = ""): HTMLSpanElement {
  const span = el("span", `tdview-path-text ${className}`.trim());
  const pieces = text.split(/(?<=\/|, )/);
  pieces.forEach((piece, i) => {
    span.append(piece);
    if (i < pieces.length - 1) span.append(document.createElement("wbr"));
  });
  return span;
}

/** A `type="button"` button (never submits a form) with a click handler. */
export function button(
  label: string,
  className: string,
  onClick: (event: MouseEvent) => void,
): HTMLButtonElement {
  const b = el("button", `tdview-button ${className}`.trim(), label);
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}

const SVG_NS = "http://www.w3.org/2000/svg";

export function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number> = {},
): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) element.setAttribute(name, String(value));
  return element;
}

/** The readable text of a failed request. */
export function errorText(error: unknown): string {
  if (error instanceof Error && "type" in error && typeof error.type === "string") {
    return `${error.type}: ${error.message}`;
  }
  return error instanceof Error ? error.message : String(error);
}

/** An inline error box (`role="alert"`). */
export function alertBox(message: string, className = "tdview-error"): HTMLElement {
  const box = el("div", className, message);
  box.setAttribute("role", "alert");
  return box;
}

/** An `<option>` (the `Option` constructor is missing from some DOMs). */
export function option(label: string, value: string): HTMLOptionElement {
  const o = el("option", "", label);
  o.value = value;
  return o;
}
