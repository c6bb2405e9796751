/**
 * The divider between the tree and the details: dragged with the pointer, or focused and
 * moved with the arrow keys (a WAI-ARIA window splitter: `role="separator"`, its value
 * the tree's share of the width in percent). The share is a pair of `fr` columns set on
 * the grid it sits in (`--tdview-split-a`, `--tdview-split-b`, tree.css).
 */

/** The tree's share of the width, at least and at most. */
export const SPLIT_MIN = 0.15;
export const SPLIT_MAX = 0.85;
/** What one arrow key moves (Shift: five times as much). */
const STEP = 0.02;

export function clampSplit(fraction: number): number {
  if (!Number.isFinite(fraction)) return 0.5;
  return Math.min(SPLIT_MAX, Math.max(SPLIT_MIN, fraction));
}

export class SplitDivider {
  readonly element: HTMLDivElement;
  readonly #grid: HTMLElement;
  readonly #onChange: (fraction: number) => void;
  #fraction = 0.5;
  #dragging = false;

  /**
   * @param grid the element whose columns are split (the divider goes between them)
   * @param onChange called with the new share once a drag ends or a key moved it
   */
  constructor(grid: HTMLElement, fraction: number, onChange: (fraction: number) => void) {
    this.#grid = grid;
    this.#onChange = onChange;
    const el = document.createElement("div");
    el.className = "tdview-split-divider";
    el.setAttribute("role", "separator");
    el.setAttribute("aria-orientation", "vertical");
    el.setAttribute("aria-label", "Width of the tree");
    el.setAttribute("aria-valuemin", String(Math.round(SPLIT_MIN * 100)));
    el.setAttribute("aria-valuemax", String(Math.round(SPLIT_MAX * 100)));
    el.tabIndex = 0;
    el.addEventListener("keydown", this.#onKey);
    el.addEventListener("pointerdown", this.#onDown);
    el.addEventListener("pointermove", this.#onMove);
    el.addEventListener("pointerup", this.#onUp);
    el.addEventListener("pointercancel", this.#onUp);
    this.element = el;
    grid.classList.add("tdview-split");
    this.set(fraction);
  }

  get fraction(): number {
    return this.#fraction;
  }

  /** Shows the tree at this share of the width (clamped); says nothing to `onChange`. */
  set(fraction: number): void {
    this.#fraction = clampSplit(fraction);
    const share = this.#fraction;
    this.#grid.style.setProperty("--tdview-split-a", `${share}fr`);
    this.#grid.style.setProperty("--tdview-split-b", `${1 - share}fr`);
    this.element.setAttribute("aria-valuenow", String(Math.round(share * 100)));
  }

  readonly #onKey = (event: KeyboardEvent): void => {
    const step = event.shiftKey ? STEP * 5 : STEP;
    const moves: Record<string, number> = {
      ArrowLeft: this.#fraction - step,
      ArrowRight: this.#fraction + step,
      Home: SPLIT_MIN,
      End: SPLIT_MAX,
    };
    const next = moves[event.key];
    if (next === undefined) return;
    event.preventDefault();
    event.stopPropagation(); // not JupyterLab's notebook shortcuts
    this.set(next);
    this.#onChange(this.#fraction);
  };

  readonly #onDown = (event: PointerEvent): void => {
    if (event.button !== 0) return;
    event.preventDefault();
    this.#dragging = true;
    this.element.setPointerCapture?.(event.pointerId);
    this.element.classList.add("tdview-dragging");
    this.element.focus();
  };

  readonly #onMove = (event: PointerEvent): void => {
    if (!this.#dragging) return;
    const box = this.#grid.getBoundingClientRect();
    if (box.width > 0) this.set((event.clientX - box.left) / box.width);
  };

  readonly #onUp = (event: PointerEvent): void => {
    if (!this.#dragging) return;
    this.#dragging = false;
    this.element.releasePointerCapture?.(event.pointerId);
    this.element.classList.remove("tdview-dragging");
    this.#onChange(this.#fraction);
  };
}
