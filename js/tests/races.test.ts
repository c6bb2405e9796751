// @vitest-environment happy-dom
// Replies that end after the user moved on, views disposed mid-flight, levels that
// shrink: what the front end does when things happen out of order.
import { afterEach, describe, expect, it, vi } from "vitest";
import { MemoryDataSource, type MemoryNode } from "../src/memory-data-source";
import type { Options, WidgetState } from "../src/protocol";
import { App } from "../src/render-app";
import { DetailsPanel } from "../src/render-details";
import { LoadPanel } from "../src/render-load";
import { TreeModel } from "../src/tree-model";
import widget from "../src/widget";
import { attachKernel } from "./fake-kernel";
import { FakeModel } from "./fake-model";
import { loadGolden } from "./golden";
import { replayTree, tick } from "./trees";

const OPTIONS: Options = { device: "cpu", mode: "r", allow_pickle: false, robust_key: true };

afterEach(() => document.body.replaceChildren());

async function settle(ms = 15, rounds = 12): Promise<void> {
  for (let i = 0; i < rounds; i++) await tick(ms);
}

const leaves = (n: number): MemoryNode[] =>
  Array.from({ length: n }, (_, i) => ({ key: `k${String(i).padStart(5, "0")}`, shape: [1] }));

function state(source: MemoryDataSource, selected: string[]): WidgetState {
  return {
    _protocol_version: 1,
    source: "s",
    root: source.root,
    selected,
    options: OPTIONS,
    error: "",
  };
}

describe("a reveal and the user", () => {
  it("a selection the user makes while a reveal pages stands", async () => {
    const source = new MemoryDataSource(
      {
        key: "",
        children: [
          { key: "first", shape: [1] },
          { key: "lvl", children: leaves(100) },
        ],
      },
      { latencyMs: 5 },
    );
    const tree = new TreeModel(source, source.root, { pageSize: 10 });
    await tree.expand(0);
    const reveal = tree.revealPath(["lvl", "k00099"]);
    await tick(12);
    expect(tree.select(["first"])).toBe(true); // a click while the reveal pages
    expect(await reveal).toBe(-1);
    expect(tree.selectedPath).toEqual(["first"]);
  });

  it("a selection past the real end of a level moves to its last row, and is shown", async () => {
    // the level announced 250 children and has 120: the user went to the end first
    const source = new MemoryDataSource(
      {
        key: "",
        children: [
          { key: "lvl", n_children: 250, children: leaves(120) },
          { key: "zz", shape: [1] },
        ],
      },
      { latencyMs: 10 },
    );
    const app = new App({
      source,
      detailsDelayMs: 0,
      tree: { pageSize: 50, lookahead: 0 },
      view: { height: 120 },
      state: state(source, []),
    });
    document.body.append(app.element);
    await settle();
    const tree = app.tree as TreeModel;
    void tree.expand(1);
    const view = app.view?.element as HTMLElement;
    view.focus();
    for (const key of ["ArrowUp", "End", "ArrowUp"]) {
      view.dispatchEvent(new KeyboardEvent("keydown", { key, bubbles: true }));
    }
    await settle();
    expect(tree.rowCount).toBe(1 + 1 + 120 + 1);
    expect(tree.selectedPath).toEqual(["lvl", "k00119"]);
    expect(app.details?.details?.path ?? null).toEqual(["lvl", "k00119"]);
    const active = view.getAttribute("aria-activedescendant");
    expect(active && document.getElementById(active)).toBeTruthy();
    app.dispose();
  });
});

describe("disposed views", () => {
  it("ask nothing and write no selection once disposed, a reveal in flight", async () => {
    const source = new MemoryDataSource(replayTree(), { latencyMs: 10 });
    const onSelect = vi.fn();
    const app = new App({
      source,
      state: state(source, ["obs", "state"]),
      onSelect,
      detailsDelayMs: 5,
    });
    await tick(1);
    app.dispose();
    const before = source.log.length;
    await settle(20, 6);
    expect(onSelect).not.toHaveBeenCalled();
    expect(source.log.slice(before).map((entry) => entry.method)).toEqual([]);
  });

  it("a rebuild during the first reveal writes no passing empty selection", async () => {
    const golden = loadGolden("state").message as Record<string, unknown>;
    const memory = new MemoryDataSource(replayTree(), { latencyMs: 10 });
    const model = new FakeModel({ ...golden, selected: ["obs", "state"] });
    attachKernel(model, memory);
    const el = document.createElement("div");
    document.body.append(el);
    const writes: unknown[] = [];
    const set = model.set.bind(model);
    model.set = (name: string, value: unknown) => {
      if (name === "selected") writes.push(value);
      set(name, value);
    };
    const cleanup = widget.render({ model, el });
    await tick(1);
    model.change("error", ""); // a trait that rebuilds the view
    await settle(20, 10);
    expect(writes).not.toContainEqual([]);
    expect(model.get("selected")).toEqual(["obs", "state"]);
    cleanup();
  });
});

describe("panels", () => {
  const tree: MemoryNode = {
    key: "",
    children: [
      { key: "alpha", children: [{ key: "x", shape: [2], data: [1, 2] }] },
      { key: "beta", children: [{ key: "z", shape: [2] }] },
    ],
  };

  it("a load that ends while another node is selected leaves that node's code line", async () => {
    const source = new MemoryDataSource(tree, { latencyMs: 10, source: "ck.tdz" });
    const panel = new LoadPanel(source, { source: "ck.tdz", options: OPTIONS, open: true });
    document.body.append(panel.element);
    panel.setNode(await source.node(["alpha"]));
    const loading = panel.load();
    await tick(5);
    panel.setNode(await source.node(["beta"]));
    const beta = panel.code;
    expect(beta).toContain('"beta"');
    await loading;
    expect(panel.code).toBe(beta); // what Copy code copies
    expect(panel.element.querySelector(".tdview-code")?.textContent).toBe(beta);
    expect(panel.element.querySelector(".tdview-load-done")?.textContent).toContain("alpha");
  });

  it("details are not left dimmed when nothing is selected any more", async () => {
    const source = new MemoryDataSource(tree, { latencyMs: 10 });
    const details = new DetailsPanel(source, {});
    const showing = details.show(["alpha"]);
    await details.show(null);
    await showing;
    const info = details.element.querySelector(".tdview-details-info");
    expect(info?.classList.contains("tdview-loading")).toBe(false);
  });
});
