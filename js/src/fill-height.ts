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

/** The class of a view whose height the user chose (the `height` trait); styles.css
 * gives it the filled layout at `--tdview-height`. */
export const SIZED = "tdview-sized";
/** The heights a user may choose, in px: `TDView.height`'s bounds in widget.py. */
export const MIN_HEIGHT = 240;
export const MAX_HEIGHT = 4000;
/** A key press on the resize handle moves it this far. */
export const HEIGHT_STEP = 24;

/** `px` rounded into [MIN_HEIGHT, MAX_HEIGHT]. */
export function clampHeight(px: number): number {
  return Math.min(MAX_HEIGHT, Math.max(MIN_HEIGHT, Math.round(px)));
}

/** Gives `view` the height `px`, or (null) its compact or filled height back. */
export function setViewHeight(view: HTMLElement, px: number | null): void {
  view.classList.toggle(SIZED, px !== null);
  if (px === null) view.style.removeProperty("--tdview-height");
  else view.style.setProperty("--tdview-height", `${px}px`);
}

/** The part of anywidget's model that the height uses. */
export interface HeightModel {
  get(name: string): unknown;
  set(name: string, value: unknown): void;
  save_changes(): void;
  on(event: string, callback: () => void): void;
  off(event: string, callback: () => void): void;
}

function traitHeight(model: HeightModel): number | null {
  const value = model.get("height");
  return typeof value === "number" && Number.isFinite(value) ? clampHeight(value) : null;
}

/**
 * The view takes the `height` trait's height (`TDView(..., height=)`), and a handle at
 * its bottom (a horizontal separator: drag it, or Arrow Up/Down on it; a double click
 * gives the view its own height back) sets the trait, so the kernel and the saved
 * notebook keep the user's choice. Returns the function that stops.
 */
export function followHeight(view: HTMLElement, model: HeightModel): () => void {
  const handle = document.createElement("div");
  handle.className = "tdview-resize-handle";
  handle.tabIndex = 0;
  handle.setAttribute("role", "separator");
  handle.setAttribute("aria-orientation", "horizontal");
  handle.setAttribute("aria-label", "Height of the view");
  handle.title = "Drag to set the view's height (double click: its own height again)";
  const show = (px: number | null) => {
    setViewHeight(view, px);
    handle.setAttribute("aria-valuemin", String(MIN_HEIGHT));
    handle.setAttribute("aria-valuemax", String(MAX_HEIGHT));
    handle.setAttribute("aria-valuenow", String(px ?? Math.round(view.offsetHeight)));
  };
  const commit = (px: number | null) => {
    show(px);
    model.set("height", px);
    model.save_changes();
  };
  const onTrait = () => show(traitHeight(model));
  let drag: { y: number; height: number } | null = null;
  handle.addEventListener("pointerdown", (event) => {
    drag = { y: event.clientY, height: view.getBoundingClientRect().height };
    handle.setPointerCapture?.(event.pointerId);
    handle.classList.add("tdview-resizing");
    event.preventDefault();
  });
  handle.addEventListener("pointermove", (event) => {
    if (drag) show(clampHeight(drag.height + event.clientY - drag.y));
  });
  const end = (event: PointerEvent) => {
    if (!drag) return;
    const px = clampHeight(drag.height + event.clientY - drag.y);
    drag = null;
    handle.classList.remove("tdview-resizing");
    commit(px);
  };
  handle.addEventListener("pointerup", end);
  handle.addEventListener("pointercancel", end);
  handle.addEventListener("dblclick", () => commit(null));
  handle.addEventListener("keydown", (event) => {
    const step = { ArrowUp: -HEIGHT_STEP, ArrowDown: HEIGHT_STEP }[event.key];
    if (step === undefined) return;
    event.preventDefault();
    commit(clampHeight(view.getBoundingClientRect().height + step));
  });
  // The view's content is replaced as it is rebuilt: the handle goes back to its end.
  const keepLast = () => {
    if (view.lastElementChild !== handle) view.append(handle);
  };
  const moved = typeof MutationObserver === "undefined" ? null : new MutationObserver(keepLast);
  moved?.observe(view, { childList: true });
  keepLast();
  onTrait();
  model.on("change:height", onTrait);
  return () => {
    moved?.disconnect();
    model.off("change:height", onTrait);
    handle.remove();
    setViewHeight(view, null);
  };
}
