// @vitest-environment happy-dom
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  clampHeight,
  FILL_AREA,
  FILL_GAP,
  FILLED,
  fillHeight,
  followFillArea,
  followHeight,
  HEIGHT_STEP,
  MAX_HEIGHT,
  MIN_FILL_HEIGHT,
  MIN_HEIGHT,
  SIZED,
} from "../src/fill-height";
import { FakeModel } from "./fake-model";

/** A ResizeObserver the test calls back by hand. */
class FakeObserver {
  static last: FakeObserver | null = null;
  readonly observed = new Set<Element>();
  disconnected = false;
  constructor(readonly callback: () => void) {
    FakeObserver.last = this;
  }
  observe(target: Element) {
    this.observed.add(target);
  }
  unobserve(target: Element) {
    this.observed.delete(target);
  }
  disconnect() {
    this.disconnected = true;
    this.observed.clear();
  }
}

afterEach(() => {
  vi.unstubAllGlobals();
  document.body.replaceChildren();
});

describe("the height a view takes in a fill area", () => {
  it("is what the area leaves below the view, less the gap", () => {
    expect(fillHeight(900, 200)).toBe(900 - 200 - FILL_GAP);
    expect(fillHeight(900.7, 100.2)).toBe(Math.floor(900.7 - 100.2 - FILL_GAP));
  });

  it("is never less than the compact layout's", () => {
    expect(fillHeight(300, 100)).toBe(MIN_FILL_HEIGHT);
    expect(fillHeight(0, 0, 100)).toBe(100);
  });
});

describe("following a fill area", () => {
  it("fills the area it is attached in, then watches only the area", () => {
    vi.stubGlobal("ResizeObserver", FakeObserver);
    const area = document.createElement("div");
    area.className = FILL_AREA;
    Object.defineProperty(area, "clientHeight", { value: 900 });
    const view = document.createElement("div");
    const stop = followFillArea(view);
    const observer = FakeObserver.last as FakeObserver;
    expect([...observer.observed]).toEqual([view]);
    area.append(view);
    document.body.append(area);
    observer.callback();
    expect([...observer.observed]).toEqual([area]);
    expect(view.classList.contains(FILLED)).toBe(true);
    expect(view.style.getPropertyValue("--tdview-fill-height")).toBe(`${900 - FILL_GAP}px`);
    stop();
    expect(observer.disconnected).toBe(true);
    expect(view.classList.contains(FILLED)).toBe(false);
    expect(view.style.getPropertyValue("--tdview-fill-height")).toBe("");
  });

  it("leaves a view in a notebook cell compact, and stops watching it", () => {
    vi.stubGlobal("ResizeObserver", FakeObserver);
    const view = document.createElement("div");
    document.body.append(view);
    followFillArea(view);
    const observer = FakeObserver.last as FakeObserver;
    observer.callback();
    expect(observer.observed.size).toBe(0);
    expect(view.classList.contains(FILLED)).toBe(false);
  });
});

describe("the height the user chose", () => {
  function setup(height: number | null) {
    const model = new FakeModel({ height });
    const host = document.createElement("div");
    const view = document.createElement("div");
    host.append(view);
    document.body.append(host);
    let shown = 440;
    view.getBoundingClientRect = () => ({ height: shown }) as DOMRect;
    const stop = followHeight(view, model);
    const handle = view.querySelector<HTMLElement>(".tdview-resize-handle");
    if (!handle) throw new Error("no handle");
    const resize = (px: number) => {
      shown = px;
    };
    return { model, view, handle, stop, resize };
  }
  const pointer = (type: string, clientY: number) =>
    new PointerEvent(type, { clientY, pointerId: 1, bubbles: true });

  it("is clamped to whole pixels in the trait's bounds", () => {
    expect(clampHeight(10)).toBe(MIN_HEIGHT);
    expect(clampHeight(1e9)).toBe(MAX_HEIGHT);
    expect(clampHeight(600.4)).toBe(600);
  });

  it("follows the height trait, and none keeps the view's own height", () => {
    const { model, view, handle } = setup(600);
    expect(view.classList.contains(SIZED)).toBe(true);
    expect(view.style.getPropertyValue("--tdview-height")).toBe("600px");
    expect(handle.getAttribute("role")).toBe("separator");
    expect(handle.getAttribute("aria-valuenow")).toBe("600");
    expect(view.lastElementChild).toBe(handle); // at the bottom of the view
    model.change("height", 800);
    expect(view.style.getPropertyValue("--tdview-height")).toBe("800px");
    model.change("height", null);
    expect(view.classList.contains(SIZED)).toBe(false);
    expect(view.style.getPropertyValue("--tdview-height")).toBe("");
  });

  it("is dragged by the handle, and the trait keeps it", () => {
    const { model, view, handle } = setup(null);
    handle.dispatchEvent(pointer("pointerdown", 100));
    handle.dispatchEvent(pointer("pointermove", 160));
    expect(view.style.getPropertyValue("--tdview-height")).toBe("500px");
    expect(model.saves).toBe(0); // written once, when the drag ends
    handle.dispatchEvent(pointer("pointerup", 180));
    expect(model.get("height")).toBe(520);
    expect(model.saves).toBe(1);
    expect(view.style.getPropertyValue("--tdview-height")).toBe("520px");
    handle.dispatchEvent(pointer("pointermove", 400)); // no drag: nothing moves
    expect(view.style.getPropertyValue("--tdview-height")).toBe("520px");
  });

  it("moves a step per arrow key, and a double click gives the view its own height", () => {
    const { model, handle, resize, view } = setup(500);
    resize(500);
    handle.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowDown" }));
    expect(model.get("height")).toBe(500 + HEIGHT_STEP);
    resize(500 + HEIGHT_STEP);
    handle.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowUp" }));
    expect(model.get("height")).toBe(500);
    resize(MIN_HEIGHT);
    handle.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowUp" }));
    expect(model.get("height")).toBe(MIN_HEIGHT); // never below the bound
    handle.dispatchEvent(new MouseEvent("dblclick"));
    expect(model.get("height")).toBeNull();
    expect(view.classList.contains(SIZED)).toBe(false);
  });

  it("stays at the bottom of the view as its content is replaced", async () => {
    const { view, handle } = setup(null);
    view.replaceChildren(document.createElement("main"));
    await Promise.resolve(); // the mutation observer's turn
    expect([...view.children].map((c) => c.tagName)).toEqual(["MAIN", "DIV"]);
    expect(view.lastElementChild).toBe(handle);
    view.prepend(document.createElement("aside"));
    view.append(document.createElement("footer"));
    await Promise.resolve();
    expect(view.lastElementChild).toBe(handle);
  });

  it("stops: the handle goes, the trait is no longer followed", () => {
    const { model, view, stop } = setup(700);
    stop();
    expect(document.querySelector(".tdview-resize-handle")).toBeNull();
    expect(view.classList.contains(SIZED)).toBe(false);
    model.change("height", 900);
    expect(view.classList.contains(SIZED)).toBe(false);
    expect(model.listenerCount()).toBe(0);
  });
});
