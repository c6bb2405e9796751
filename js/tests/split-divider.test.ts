// @vitest-environment happy-dom
import { describe, expect, it } from "vitest";
import { MemoryDataSource } from "../src/memory-data-source";
import { parseState } from "../src/protocol";
import { App, type ViewLayout } from "../src/render-app";
import { SPLIT_MAX, SPLIT_MIN, SplitDivider } from "../src/split-divider";
import { loadGolden } from "./golden";
import { sampleTree } from "./trees";

function key(el: HTMLElement, k: string, shiftKey = false) {
  el.dispatchEvent(
    new KeyboardEvent("keydown", { key: k, shiftKey, bubbles: true, cancelable: true }),
  );
}

describe("SplitDivider", () => {
  it("is a focusable separator whose arrow keys move the split", () => {
    const grid = document.createElement("div");
    const changes: number[] = [];
    const divider = new SplitDivider(grid, 0.5, (f) => changes.push(f));
    const el = divider.element;
    expect(el.getAttribute("role")).toBe("separator");
    expect(el.getAttribute("aria-orientation")).toBe("vertical");
    expect(el.tabIndex).toBe(0);
    expect(el.getAttribute("aria-valuenow")).toBe("50");
    key(el, "ArrowRight");
    expect(el.getAttribute("aria-valuenow")).toBe("52");
    expect(grid.style.getPropertyValue("--tdview-split-a")).toBe("0.52fr");
    key(el, "ArrowLeft", true);
    expect(el.getAttribute("aria-valuenow")).toBe("42");
    key(el, "Home");
    expect(divider.fraction).toBe(SPLIT_MIN);
    key(el, "End");
    key(el, "ArrowRight");
    expect(divider.fraction).toBe(SPLIT_MAX);
    expect(changes.map((f) => Math.round(f * 100))).toEqual([52, 42, 15, 85, 85]);
  });

  it("follows a drag and reports where it ended", () => {
    const grid = document.createElement("div");
    grid.getBoundingClientRect = () => ({ left: 100, width: 1000 }) as DOMRect;
    const changes: number[] = [];
    const divider = new SplitDivider(grid, 0.5, (f) => changes.push(f));
    const el = divider.element;
    const pointer = (type: string, clientX: number) =>
      el.dispatchEvent(new PointerEvent(type, { clientX, button: 0, pointerId: 1, bubbles: true }));
    pointer("pointerdown", 600);
    pointer("pointermove", 400);
    expect(divider.fraction).toBeCloseTo(0.3);
    expect(changes).toEqual([]);
    pointer("pointermove", 10); // clamped
    pointer("pointerup", 10);
    expect(changes).toEqual([SPLIT_MIN]);
  });
});

describe("the app's divider", () => {
  it("starts where the view's layout says, and reports a move", () => {
    const source = new MemoryDataSource(sampleTree(10));
    const parsed = parseState(loadGolden("state").message);
    if (!parsed) throw new Error("golden state does not parse");
    const layouts: ViewLayout[] = [];
    const app = new App({
      source,
      state: { ...parsed, root: source.root, selected: [] },
      layout: { split: 0.3 },
      onLayout: (l) => layouts.push(l),
    });
    const divider = app.element.querySelector<HTMLElement>('.tdview-body > [role="separator"]');
    expect(divider?.getAttribute("aria-valuenow")).toBe("30");
    if (divider) key(divider, "ArrowRight");
    expect(layouts).toEqual([{ split: 0.32 }]);
    app.dispose();
  });
});
