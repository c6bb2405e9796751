// @vitest-environment happy-dom
import { afterEach, describe, expect, it, vi } from "vitest";
import { MemoryDataSource } from "../src/memory-data-source";
import type { Path } from "../src/protocol";
import { DetailsPanel } from "../src/render-details";
import { SizesView } from "../src/render-sizes";
import {
  type SizeChild,
  type SizesOptions,
  type SizesResult,
  sizesParams,
} from "../src/sizes-protocol";
import { optimizerRatio, share } from "../src/sizes-totals";
import { tick } from "./trees";

function child(path: Path, bytes: number, extra: Partial<SizeChild> = {}): SizeChild {
  return {
    key: path[path.length - 1] ?? "",
    path,
    kind: "tensordict",
    bytes,
    leaves: 2,
    dtype: "float32",
    section: "rest",
    has_children: true,
    ...extra,
  };
}

/** A trainer's checkpoint: the optimizer twice the model, a step, a few small keys. */
const LEVELS: Record<string, SizesResult> = {
  "": {
    path: [],
    kind: "tensordict",
    bytes: 3_000_120,
    leaves: 40,
    section: "mixed",
    by_dtype: { float32: 3_000_000, int64: 120 },
    by_section: { optimizer: 2_000_000, model: 1_000_000, rest: 120 },
    children: [
      child(["optimizer"], 2_000_000, { section: "optimizer" }),
      child(["model"], 1_000_000, { section: "model" }),
      child(["step"], 8, { kind: "leaf", dtype: "int64", has_children: false }),
    ],
    other: { count: 14, bytes: 112 },
    problems: 0,
    duplicates_bytes: null,
  },
  model: {
    path: ["model"],
    kind: "tensordict",
    bytes: 1_000_000,
    leaves: 4,
    section: "model",
    by_dtype: { float32: 1_000_000 },
    by_section: { model: 1_000_000 },
    children: [
      child(["model", "encoder"], 600_000, { section: "model" }),
      child(["model", "head"], 400_000, { section: "model", has_children: false, kind: "leaf" }),
    ],
    other: { count: 0, bytes: 0 },
    problems: 1,
    duplicates_bytes: 400_000,
  },
};

function fetcher() {
  return vi.fn(async (path: Path, opts?: SizesOptions): Promise<SizesResult> => {
    const level = LEVELS[path.join("/")];
    if (!level) throw new Error(`no level ${path.join("/")}`);
    if (opts?.duplicates) {
      opts.onProgress?.({ done: 1, total: 2, label: "hashing" });
      return { ...structuredClone(level), duplicates_bytes: 4096 };
    }
    return structuredClone(level);
  });
}

async function setup() {
  const fetch = fetcher();
  const view = new SizesView(fetch, "ckpt.tdz");
  document.body.append(view.toggle, view.element);
  view.setNode({ path: [], has_children: true } as never);
  view.setOn(true);
  await tick();
  return { fetch, view, el: view.element };
}

const cells = (el: HTMLElement) => [...el.querySelectorAll<HTMLElement>(".tdview-sizes-cell")];
const key = (target: HTMLElement, k: string) =>
  target.dispatchEvent(new KeyboardEvent("keydown", { key: k, bubbles: true }));
const percent = (v: string) => Number.parseFloat(v) / 100;

afterEach(() => document.body.replaceChildren());

describe("the sizes treemap", () => {
  it("draws a cell per child, and the small ones as other, areas as bytes", async () => {
    const { el, fetch } = await setup();
    expect(fetch).toHaveBeenCalledWith([], expect.anything());
    const found = cells(el);
    expect(found.map((c) => c.querySelector(".tdview-sizes-label")?.textContent ?? "")).toEqual([
      "optimizer",
      "model",
      "", // too small a cell for a label: its title and aria-label say it
      "",
    ]);
    const area = (c: HTMLElement) => percent(c.style.width) * percent(c.style.height);
    const level = LEVELS[""] as SizesResult;
    expect(area(found[0] as HTMLElement)).toBeCloseTo(2_000_000 / level.bytes, 6);
    expect(area(found[1] as HTMLElement)).toBeCloseTo(1_000_000 / level.bytes, 6);
    const other = found.find((c) => c.classList.contains("tdview-sizes-other")) as HTMLElement;
    expect(other.getAttribute("aria-label")).toContain("other (14)");
    expect(other.getAttribute("aria-disabled")).toBe("true");
    expect(found[0]?.title).toContain("optimizer\n2.00 MB (2,000,000 B) · 67% of 3.00 MB");
    expect(found[0]?.getAttribute("aria-label")).toBe(
      "optimizer: 2.00 MB, 67%; tensordict of 2 tensors · float32 · optimizer",
    );
  });

  it("colours by section or by dtype, with a legend of each", async () => {
    const { el } = await setup();
    expect(cells(el)[0]?.classList.contains("tdview-sizes-p1")).toBe(true); // optimizer
    expect(cells(el)[1]?.classList.contains("tdview-sizes-p0")).toBe(true); // model
    const legends = [...el.querySelectorAll(".tdview-sizes-legend")];
    expect(legends.map((l) => l.querySelector(".tdview-sizes-legend-title")?.textContent)).toEqual([
      "By section",
      "By dtype",
    ]);
    expect(legends[0]?.classList.contains("tdview-sizes-legend-active")).toBe(true);
    const rows = [...(legends[0]?.querySelectorAll("li") ?? [])].map((li) => li.textContent);
    expect(rows).toEqual(["optimizer2.00 MB67%", "model1.00 MB33%", "rest120 B<0.1%"]);
    expect(el.textContent).toContain("The optimizer's state is 2.0× the model.");
    (el.querySelector(".tdview-sizes-colour") as HTMLElement).click();
    expect(cells(el)[0]?.classList.contains("tdview-sizes-p0")).toBe(true); // float32
    expect(legends.length).toBe(2);
    expect(el.querySelectorAll(".tdview-sizes-legend")[1]?.classList).toContain(
      "tdview-sizes-legend-active",
    );
  });

  it("zooms in on a click and out on Escape, with breadcrumbs", async () => {
    const { el, fetch, view } = await setup();
    cells(el)[1]?.click(); // model
    await tick();
    expect(fetch).toHaveBeenLastCalledWith(["model"], expect.anything());
    expect(view.level?.path).toEqual(["model"]);
    const crumbs = el.querySelector(".tdview-sizes-crumbs") as HTMLElement;
    expect(crumbs.textContent).toBe("ckpt.tdz›model");
    expect(crumbs.querySelector("[aria-current]")?.textContent).toBe("model");
    expect(el.textContent).toContain("400 KB in duplicates");
    expect(el.querySelector(".tdview-sizes-problems")?.textContent).toBe(
      "⚠ 1 node below could not be read: not counted (Check says why)",
    );
    key(cells(el)[0] as HTMLElement, "Escape");
    await tick();
    expect(view.level?.path).toEqual([]);
    expect(crumbs.textContent).toBe("ckpt.tdz");
    // at the top, Escape is left to the host
    const event = new KeyboardEvent("keydown", { key: "Escape", bubbles: true, cancelable: true });
    cells(el)[0]?.dispatchEvent(event);
    expect(event.defaultPrevented).toBe(false);
    cells(el)[1]?.click();
    await tick();
    (crumbs.querySelector("button") as HTMLElement).click();
    await tick();
    expect(view.level?.path).toEqual([]);
  });

  it("moves between cells with the arrow keys, one tab stop, Enter zooms", async () => {
    const { el, view } = await setup();
    const found = cells(el);
    expect(found.map((c) => c.tabIndex).filter((t) => t === 0)).toHaveLength(1);
    const first = found[0] as HTMLElement;
    first.focus();
    key(first, "End");
    expect(document.activeElement).toBe(found[found.length - 1]);
    key(document.activeElement as HTMLElement, "Home");
    expect(document.activeElement).toBe(first);
    const moves = ["ArrowRight", "ArrowDown", "ArrowLeft", "ArrowUp"].map((k) => {
      key(first, k);
      const at = document.activeElement as HTMLElement;
      first.focus();
      return at;
    });
    expect(moves.some((m) => m === found[1])).toBe(true); // the model is beside it
    expect(found.map((c) => c.tabIndex).filter((t) => t === 0)).toHaveLength(1);
    const model = found[1] as HTMLElement;
    model.focus();
    key(model, "Enter");
    await tick();
    expect(view.level?.path).toEqual(["model"]);
    expect(document.activeElement?.classList.contains("tdview-sizes-cell")).toBe(true);
    // a leaf cannot be zoomed into
    const head = cells(el).find((c) => c.getAttribute("aria-label")?.startsWith("head"));
    head?.click();
    await tick();
    expect(view.level?.path).toEqual(["model"]);
  });

  it("looks for duplicates when asked, and says their bytes", async () => {
    const { el, fetch } = await setup();
    expect(fetch).toHaveBeenLastCalledWith([], expect.objectContaining({ duplicates: false }));
    const find = el.querySelector(".tdview-sizes-find") as HTMLButtonElement;
    expect(find.textContent).toBe("Find duplicates");
    find.click();
    expect(find.disabled).toBe(true);
    expect(fetch).toHaveBeenLastCalledWith([], expect.objectContaining({ duplicates: true }));
    await tick();
    expect(el.querySelector(".tdview-sizes-find")).toBeNull();
    expect(el.querySelector(".tdview-sizes-duplicates")?.textContent).toBe("4.10 KB in duplicates");
  });

  it("selects a cell's node in the tree on a double-click or Shift+Enter", async () => {
    const { el, view } = await setup();
    const opened: Path[] = [];
    view.onOpen = (path) => opened.push(path);
    const model = cells(el)[1] as HTMLElement;
    model.dispatchEvent(new MouseEvent("dblclick", { bubbles: true }));
    model.focus();
    model.dispatchEvent(
      new KeyboardEvent("keydown", { key: "Enter", shiftKey: true, bubbles: true }),
    );
    expect(opened).toEqual([["model"], ["model"]]);
    expect(model.title).toContain("Double-click or Shift+Enter: select it in the tree");
    const other = el.querySelector(".tdview-sizes-other") as HTMLElement;
    other.dispatchEvent(new MouseEvent("dblclick", { bubbles: true }));
    expect(opened).toHaveLength(2); // "other" is no node
  });

  it("says what went wrong", async () => {
    const view = new SizesView(async () => {
      throw new Error("the kernel is gone");
    });
    document.body.append(view.element);
    view.setNode({ path: ["x"], has_children: true } as never);
    view.setOn(true);
    await tick();
    expect(view.element.textContent).toContain("the kernel is gone");
  });
});

describe("the details panel's Sizes toggle", () => {
  function panel() {
    const source = new MemoryDataSource(
      { key: "", children: [{ key: "model", children: [{ key: "w", shape: [4] }] }] },
      { source: "ckpt.tdz" },
    );
    const fetch = fetcher();
    const details = new DetailsPanel(Object.assign(source, { sizes: fetch }), {
      source: "ckpt.tdz",
      totalsDelayMs: 0,
    });
    document.body.append(details.element);
    return { details, fetch };
  }

  it("shows for a node with children and takes the panel while on", async () => {
    const { details, fetch } = panel();
    await details.show([]);
    const toggle = details.sizes.toggle;
    expect(toggle.hidden).toBe(false);
    toggle.click();
    await tick();
    expect(toggle.getAttribute("aria-pressed")).toBe("true");
    expect(details.element.classList.contains("tdview-sizes-on")).toBe(true);
    expect(fetch).toHaveBeenCalledWith([], expect.anything());
    expect(details.sizes.element.hidden).toBe(false);
    await details.show(["model", "w"]); // a leaf: no sizes, the facts back
    expect(toggle.hidden).toBe(true);
    expect(details.element.classList.contains("tdview-sizes-on")).toBe(false);
    await details.show(["model"]); // on holds from node to node
    await tick();
    expect(details.element.classList.contains("tdview-sizes-on")).toBe(true);
    expect(fetch).toHaveBeenLastCalledWith(["model"], expect.anything());
  });

  it("is absent where the source cannot measure", async () => {
    const source = new MemoryDataSource({ key: "", children: [{ key: "a", shape: [2] }] });
    const details = new DetailsPanel(source, { totalsDelayMs: 0 });
    await details.show([]);
    expect(details.sizes.toggle.hidden).toBe(true);
  });
});

describe("the totals' words", () => {
  it("say shares and the optimizer's weight", () => {
    expect([share(1, 3), share(1, 30), share(1, 1e5), share(0, 5), share(1, 0)]).toEqual([
      "33%",
      "3.3%",
      "<0.1%",
      "0.0%",
      "",
    ]);
    expect(optimizerRatio({ model: 21e6, optimizer: 42e6 })).toBe(
      "The optimizer's state is 2.0× the model.",
    );
    expect(optimizerRatio({ model: 21e6 })).toBe("");
  });
});

describe("the request", () => {
  it("sends duplicates only when asked", () => {
    expect(sizesParams(["a"])).toEqual({ path: ["a"], limit: 40 });
    expect(sizesParams(["a"], { duplicates: false })).toEqual({ path: ["a"], limit: 40 });
    expect(sizesParams([], { duplicates: true })).toEqual({
      path: [],
      limit: 40,
      duplicates: true,
    });
  });
});
