// @vitest-environment happy-dom
import { afterEach, describe, expect, it } from "vitest";
import { MemoryDataSource } from "../src/memory-data-source";
import { VERSION_MISMATCH } from "../src/render-app";
import { loadTiming } from "../src/render-load";
import widget from "../src/widget";
import { attachKernel } from "./fake-kernel";
import { FakeModel } from "./fake-model";
import { loadGolden } from "./golden";
import { replayTree, tick } from "./trees";

function setup(
  traits: Record<string, unknown> = loadGolden("state").message,
  memory = new MemoryDataSource(replayTree()),
) {
  const model = new FakeModel(traits);
  const kernel = attachKernel(model, memory);
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

const PROGRESS_DELAY = loadTiming.progressDelayMs;
afterEach(() => {
  loadTiming.progressDelayMs = PROGRESS_DELAY;
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

  it("reports a selection made in the tree with a message, writing no trait", async () => {
    const { el, model, kernel } = setup();
    await settle();
    const tree = el.querySelector<HTMLElement>('[role="tree"]');
    tree?.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowDown" }));
    expect(kernel.selects).toEqual([["obs", "state"]]);
    expect(model.saves).toBe(0); // marimo re-runs cells on a trait the view writes
    await settle();
    expect(model.get("selected")).toEqual(["obs", "state"]); // the kernel's echo
  });

  it("a late echo of an earlier click does not pull the selection back", async () => {
    const { el, kernel } = setup();
    await settle();
    const tree = el.querySelector<HTMLElement>('[role="tree"]');
    tree?.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowDown" }));
    tree?.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowDown" }));
    expect(kernel.selects).toHaveLength(2);
    await settle(); // both echoes arrive, the first after the second click
    const selected = el.querySelector('[aria-selected="true"]');
    expect(selected?.querySelector(".tdview-key")?.textContent).toBe(
      (kernel.selects[1] as string[]).at(-1),
    );
  });

  it("writes `loaded` after each load, so that a host can react to it", async () => {
    const { el, model } = setup();
    await settle();
    el.querySelector<HTMLButtonElement>(".tdview-disclosure")?.click();
    el.querySelector<HTMLButtonElement>(".tdview-load-button")?.click();
    await settle();
    expect(model.get("loaded")).toEqual({ path: ["obs", "pixels"], count: 1 });
    el.querySelector<HTMLButtonElement>(".tdview-load-button")?.click();
    await settle();
    expect(model.get("loaded")).toEqual({ path: ["obs", "pixels"], count: 2 });
    expect(model.saves).toBe(2);
  });

  it("offers no variable where the kernel cannot bind one (marimo)", async () => {
    const state = loadGolden("state").message as Record<string, unknown>;
    const options = { ...(state.options as object), can_bind: false };
    const { el, kernel } = setup({ ...state, options });
    await settle();
    el.querySelector<HTMLButtonElement>(".tdview-disclosure")?.click();
    const field = el.querySelector<HTMLElement>(".tdview-variable-field");
    expect(field?.hidden).toBe(true);
    expect(el.querySelector(".tdview-code")?.textContent).not.toMatch(/^\w+ = /);
    el.querySelector<HTMLButtonElement>(".tdview-load-button")?.click();
    await settle();
    const load = kernel.requests.find((r) => r.method === "load");
    expect(load?.params).toMatchObject({ variable: null });
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

  it("previews a leaf over the comm: buffers decoded into table, stats and histogram", async () => {
    const tree = replayTree();
    const action = tree.children?.find((c) => c.key === "action");
    if (action) action.data = Array.from({ length: 60 }, (_, i) => (i % 7) - 3);
    const { el, kernel } = setup(
      { ...loadGolden("state").message, selected: ["action"] },
      new MemoryDataSource(tree),
    );
    await settle();
    expect(kernel.requests.map((r) => r.method)).not.toContain("preview");
    el.querySelector<HTMLButtonElement>(".tdview-preview-button")?.click();
    await settle();
    expect(kernel.requests.find((r) => r.method === "preview")?.params).toEqual({
      path: ["action"],
      rows: 20,
    });
    const preview = el.querySelector(".tdview-preview-result");
    expect(preview?.querySelector(".tdview-display-dtype")?.textContent).toBe(
      "shown as float32 (stored as bfloat16)",
    );
    expect(preview?.querySelectorAll("tbody tr")).toHaveLength(10);
    expect(preview?.querySelector("tbody td")?.textContent).toBe("-3");
    // 64 equal bins, as the kernel sends for a float leaf
    expect(preview?.querySelectorAll(".tdview-histogram-bar")).toHaveLength(64);
  });

  it("loads over the comm with progress, and a cancel reaches the kernel", async () => {
    loadTiming.progressDelayMs = 0; // progress at once (render-load.test.ts tests the delay)
    const memory = new MemoryDataSource(replayTree(), { latencyMs: 15, source: "ckpt" });
    const { el, kernel, model } = setup(
      { ...loadGolden("state").message, selected: ["obs"] },
      memory,
    );
    for (let i = 0; i < 10; i++) await tick(20);
    el.querySelector<HTMLButtonElement>(".tdview-disclosure")?.click();
    el.querySelector<HTMLButtonElement>(".tdview-load-button")?.click();
    await tick(25);
    expect(el.querySelector(".tdview-progress-label")?.textContent).toMatch(/1 \/ 2 leaves/);
    for (let i = 0; i < 10 && !el.querySelector(".tdview-load-done"); i++) await tick(20);
    expect(el.querySelector(".tdview-load-done")?.textContent).toBe("Loaded obs into obs");
    expect(el.querySelector(".tdview-code")?.textContent).toBe(
      'obs = tdview.load_memmap("ckpt", subpath="obs", device="cpu", mode="r")',
    );
    el.querySelector<HTMLButtonElement>(".tdview-load-button")?.click();
    await tick(5);
    el.querySelector<HTMLButtonElement>(".tdview-load .tdview-cancel-button")?.click();
    await tick();
    const loads = kernel.requests.filter((r) => r.method === "load");
    expect(loads).toHaveLength(2);
    expect(kernel.cancels).toEqual([loads[1]?.id]);
    expect(model.sentOf("tdview:cancel")).toHaveLength(1);
    expect(el.querySelector(".tdview-load-cancelled")?.textContent).toBe(
      "Load of obs cancelled; nothing was bound.",
    );
  });

  it("follows new load defaults from the options trait without a rebuild", async () => {
    const { el, model } = setup();
    await settle();
    const tree = el.querySelector('[role="tree"]');
    const options = {
      device: "meta",
      mode: null,
      allow_pickle: true,
      robust_key: true,
      can_bind: true,
    };
    model.change("options", options);
    expect(el.querySelector('[role="tree"]')).toBe(tree); // the same view
    expect(el.querySelector<HTMLSelectElement>(".tdview-device")?.value).toBe("meta");
    expect(el.querySelector<HTMLInputElement>(".tdview-unlock")?.checked).toBe(true);
    expect(el.querySelector(".tdview-code")?.textContent).toContain('device="meta"');
    // the selected node is a tensor leaf: it loads with load_leaf, which takes no pickles
    expect(el.querySelector(".tdview-code")?.textContent).toContain(".load_leaf(");
    expect(el.querySelector(".tdview-code")?.textContent).not.toContain("allow_pickle");
    expect(el.querySelector(".tdview-code")?.textContent).toContain("mode=None");
  });

  it("after a kernel restart, says so once, greys the view out and asks nothing", async () => {
    const { el, model, kernel } = setup();
    await settle();
    const asked = kernel.requests.length;
    model.failSend = true; // JupyterLab's comm throws "Cannot send" once the kernel restarted
    const twisty = el.querySelector('[role="treeitem"][aria-expanded="false"] .tdview-twisty');
    (twisty as HTMLElement | null)?.click();
    const rows = [...el.querySelectorAll<HTMLElement>('[role="treeitem"]')];
    rows[rows.length - 1]?.click();
    await settle();
    const notices = [...el.querySelectorAll(".tdview-lost")].map((n) => n.textContent);
    expect(notices).toEqual(["tdview: the kernel restarted: run the cell again."]);
    expect(el.textContent).not.toContain("ConnectionLost");
    expect(el.textContent).not.toContain("Cannot send");
    const stale = el.querySelector<HTMLElement>(".tdview-stale");
    expect(stale?.inert).toBe(true);
    model.failSend = false;
    rows[1]?.click();
    await settle();
    expect(kernel.requests.length).toBe(asked); // nothing more was sent
    expect(el.querySelectorAll(".tdview-lost")).toHaveLength(1);
  });

  it("cleans up: listeners, DOM and pending requests", async () => {
    const { el, model, cleanup } = setup();
    model.onSend = null;
    cleanup();
    expect(model.listenerCount()).toBe(0);
    expect(el.children).toHaveLength(0);
  });
});
