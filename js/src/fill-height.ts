/**
 * A view inside a scroll area marked `tdview-fill` (the tdview console panel of the
 * JupyterLab extension marks its cells' area) takes the height left below its top there,
 * and follows the area's resizes. Elsewhere (a notebook cell) it keeps its compact height.
 */

/** The class of a scroll area whose views fill it. */
export const FILL_AREA = "tdview-fill";
/** The class of a view that fills its area (the layout switches to flex in styles.css). */
export const FILLED = "tdview-filled";
/** Below this the view keeps its compact layout's height (header, search, 360 px tree). */
export const MIN_FILL_HEIGHT = 440;
/** Left below the view: the cell's bottom padding, so that the area does not scroll. */
export const FILL_GAP = 12;

/** The view's height: what the area leaves below `top` (the view's top in the area's
 * scrolled content), less the gap, but at least `min`. */
export function fillHeight(areaHeight: number, top: number, min = MIN_FILL_HEIGHT): number {
  return Math.max(min, Math.floor(areaHeight - top - FILL_GAP));
}

/** Starts filling the `tdview-fill` area `view` is (or, once attached, will be) in;
 * returns the function that stops. A no-op where there is no ResizeObserver. */
export function followFillArea(view: HTMLElement): () => void {
  if (typeof ResizeObserver === "undefined") return () => {};
  let area: HTMLElement | null = null;
  const size = () => {
    if (!area) return;
    const top = view.getBoundingClientRect().top - area.getBoundingClientRect().top;
    const height = fillHeight(area.clientHeight, top + area.scrollTop);
    view.style.setProperty("--tdview-fill-height", `${height}px`);
  };
  // The view is rendered before it is attached: its first size says it is in the page.
  // Only the area is watched then, so setting the view's height starts no resize loop.
  const observer = new ResizeObserver(() => {
    if (!area) {
      area = view.closest<HTMLElement>(`.${FILL_AREA}`);
      observer.unobserve(view);
      if (!area) return; // a notebook cell: the compact layout stays
      observer.observe(area);
      view.classList.add(FILLED);
    }
    size();
  });
  observer.observe(view);
  return () => {
    observer.disconnect();
    view.classList.remove(FILLED);
    view.style.removeProperty("--tdview-fill-height");
  };
}
