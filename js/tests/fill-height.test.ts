// @vitest-environment happy-dom
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  FILL_AREA,
  FILL_GAP,
  FILLED,
  fillHeight,
  followFillArea,
  MIN_FILL_HEIGHT,
} from "../src/fill-height";

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
