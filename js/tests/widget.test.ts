// @vitest-environment happy-dom
import { afterEach, describe, expect, it } from "vitest";
import { MemoryDataSource } from "../src/memory-data-source";
import { VERSION_MISMATCH } from "../src/render-app";
import widget from "../src/widget";
import { attachKernel } from "./fake-kernel";
import { FakeModel } from "./fake-model";
import { loadGolden } from "./golden";
import { replayTree, tick } from "./trees";

function setup(traits: Record<string, unknown> = loadGolden("state").message) {
  const model = new FakeModel(traits);
  const kernel = attachKernel(model, new MemoryDataSource(replayTree()));
  const el = document.createElement("div");
  document.body.append(el);
  const cleanup = widget.render({ model, el });
  return { model, kernel, el, cleanup };
}

/** Waits for the comm round trips and the details delay. */
async function settle() {
  for (let i = 0; i < 5; i++) await tick(30);
}

const rowKeys = (el: HTMLElement) =>
  [...el.querySelectorAll('[role="treeitem"]')].map(
    (r) => r.querySelector(".tdview-key")?.textContent,
  );

afterEach(() => {
  document.body.replaceChildren();
});

describe("widget", () => {
  it("exports an anywidget module with render", () => {
    expect(typeof widget.render).toBe("function");
  });

  it("renders the header, the tree over the comm, and the selected node's details", async () => {
    const { el, kernel } = setup();
    const header = el.querySelector(".tdview-header")?.textContent ?? "";
    expect(header).toContain("runs/ppo/replay_buffer");
    expect(header).toContain("TensorDict");
    expect(header).toContain("batch [1000]");
    await settle();
    expect(kernel.invalid).toEqual([]);
    expect(rowKeys(el)).toEqual([
      "replay_buffer",
      "obs",
      "pixels",
      "state",
      "action",
      "reward",
      "done",
      "info",
    ]);
    const selected = el.querySelector('[aria-selected="true"]');
    expect(selected?.querySelector(".tdview-key")?.textContent).toBe("pixels");
    const details = el.querySelector(".tdview-details")?.textContent ?? "";
    expect(details).toContain("obs / pixels");
    expect(details).toContain("[1000, 3, 84, 84]");
    expect(kernel.requests.map((r) => r.method)).toContain("node");
  });

  it("syncs a selection made in the tree to the selected trait", async () => {
    const { el, model } = setup();
    await settle();
    const tree = el.querySelector<HTMLElement>('[role="tree"]');
    tree?.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowDown" }));
    expect(model.get("selected")).toEqual(["obs", "state"]);
    expect(model.saves).toBe(1);
  });

  it("reveals a selection set by the kernel", async () => {
    const { el, model } = setup({ ...loadGolden("state").message, selected: [] });
    await settle();
    expect(rowKeys(el)).toEqual(["replay_buffer", "obs", "action", "reward", "done", "info"]);
    model.change("selected", ["obs", "state"]);
    await settle();
    const selected = el.querySelector('[aria-selected="true"]');
    expect(selected?.querySelector(".tdview-key")?.textContent).toBe("state");
    expect(model.saves).toBe(0);
  });

  it("shows only the re-run message for another protocol version", async () => {
    const { el, kernel } = setup({ _protocol_version: 2, source: 3, root: "something else" });
    await settle();
    expect(el.textContent).toBe(VERSION_MISMATCH);
    expect(VERSION_MISMATCH).toBe(
      "tdview: this output was made by another version of tdview; re-run the cell.",
    );
    expect(el.querySelector('[role="tree"]')).toBeNull();
    expect(kernel.requests).toEqual([]);
  });

  it("shows the error of a checkpoint that failed to open", async () => {
    const { el, kernel } = setup(loadGolden("state_error").message);
    await settle();
    const alert = el.querySelector('[role="alert"]');
    expect(alert?.textContent).toBe(
      "NotACheckpointError: runs/ppo/missing.tdz: no such file or directory",
    );
    expect(el.querySelector('[role="tree"]')).toBeNull();
    expect(kernel.requests).toEqual([]);
  });

  it("says so when the state is malformed", () => {
    const { el } = setup({ ...loadGolden("state").message, root: { key: 1 } });
    expect(el.querySelector('[role="alert"]')?.textContent).toMatch(/malformed/);
  });

  it("rebuilds when the root changes", async () => {
    const { el, model } = setup(loadGolden("state_error").message);
    await settle();
    const good = loadGolden("state").message;
    model.change("error", "");
    model.change("source", good.source);
    model.change("root", good.root);
    await settle();
    expect(el.querySelector('[role="alert"]')).toBeNull();
    expect(rowKeys(el)[1]).toBe("obs");
  });

  it("cleans up: listeners, DOM and pending requests", async () => {
    const { el, model, cleanup } = setup();
    model.onSend = null;
    cleanup();
    expect(model.listenerCount()).toBe(0);
    expect(el.children).toHaveLength(0);
  });
});
