/**
 * Calls back when JupyterLab switches its theme. What is drawn with colours read once
 * (the heatmap's canvas) redraws then; CSS-coloured parts follow the theme by themselves.
 */

/** The attributes JupyterLab sets on <body> when a theme has been applied. */
export const THEME_ATTRIBUTES = ["data-jp-theme-light", "data-jp-theme-name"];

/** Calls `onChange` after each theme switch on `target`; returns the function that stops
 * (one observer per call: its owner stops it when its view goes). */
export function watchTheme(onChange: () => void, target: Element = document.body): () => void {
  if (typeof MutationObserver === "undefined") return () => {};
  const observer = new MutationObserver(() => onChange());
  observer.observe(target, { attributes: true, attributeFilter: THEME_ATTRIBUTES });
  return () => observer.disconnect();
}
