// @vitest-environment happy-dom
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MemoryDataSource, type MemoryNode } from "../src/memory-data-source";
import type { Options } from "../src/protocol";
import { LoadPanel, loadTiming, memoryFit } from "../src/render-load";
import { tick } from "./trees";

const GB = 1e9;
const DEVICES = [
  { name: "cpu", free_bytes: 16 * GB, total_bytes: 32 * GB },
  { name: "cuda:0", free_bytes: 2 * GB, total_bytes: 80 * GB },
  { name: "meta", free_bytes: null, total_bytes: null },
];
const OPTIONS: Options = { device: "cpu", mode: "r", allow_pickle: false, robust_key: true };

function tree(): MemoryNode {
  return {
    key: "",
    children: [
      {
        key: "replay",
        batch_size: [1000],
        rollup: { bytes: 3 * GB, numel: 1, leaves: 2, by_dtype: {} },
        children: [
          { key: "obs", shape: [1000, 8] },
          { key: "reward", shape: [1000] },
        ],
      },
      {
        key: "tags",
        kind: "non_tensor",
        class_name: "NonTensorData",
        pickled: true,
        pickle: { bytes: 56, globals: [] },
      },
      { key: "x", shape: [4] },
    ],
  };
}

function setup(
  options: {
    latencyMs?: number;
    open?: boolean;
    defaults?: Partial<Options>;
    namespace?: Map<string, string>;
  } = {},
) {
  const source = new MemoryDataSource(tree(), {
    devices: DEVICES,
    source: "demo_ckpt.tdz",
    latencyMs: options.latencyMs ?? 0,
    ...(options.namespace ? { namespace: options.namespace } : {}),
  });
  const panel = new LoadPanel(source, {
    source: "demo_ckpt.tdz",
    options: { ...OPTIONS, ...options.defaults },
    open: options.open ?? true,
  });
  document.body.append(panel.element);
  const q = <T extends Element = HTMLElement>(selector: string) => {
    const found = panel.element.querySelector<T>(selector);
    if (!found) throw new Error(`no ${selector}`);
    return found;
  };
  const node = async (key: string) => {
    const details = await source.node([key]);
    panel.setNode(details);
    return details;
  };
  const type = (value: string) => {
    const input = q<HTMLInputElement>(".tdview-variable");
    input.value = value;
    input.dispatchEvent(new Event("input"));
  };
  const choose = (selector: string, value: string) => {
    const select = q<HTMLSelectElement>(selector);
    select.value = value;
    select.dispatchEvent(new Event("change"));
  };
  return { source, panel, q, node, type, choose };
}

const PROGRESS_DELAY = loadTiming.progressDelayMs;
beforeEach(() => {
  loadTiming.progressDelayMs = 0; // progress at once, unless a test says otherwise
});
afterEach(() => {
  loadTiming.progressDelayMs = PROGRESS_DELAY;
  document.body.replaceChildren();
});

describe("memoryFit", () => {
  it("says the size is being summed while a subtree's totals are on their way", () => {
    const cpu = { name: "cpu", free_bytes: 1000, total_bytes: 2000 };
    expect(memoryFit(null, cpu, "r", true).text).toBe("Summing the subtree's size…");
    expect(memoryFit(null, cpu, "r").text).toBe("No tensor data");
  });

  it("says the devices are being read while the kernel's first list is on its way", () => {
    const unknown = { name: "cpu", free_bytes: null, total_bytes: null };
    expect(memoryFit(GB, unknown, "r", false, true).text).toBe(
      "Needs 1.00 GB · reading the devices…",
    );
    expect(memoryFit(GB, unknown, "r").text).toBe("Needs 1.00 GB · free memory of cpu unknown");
  });

  const cuda = DEVICES[1];

  it("compares the bytes with the device's free memory", () => {
    expect(memoryFit(GB, cuda, "r")).toEqual({
      text: "Needs 1.00 GB · cuda:0: 2.00 GB free of 80.0 GB",
      warning: null,
    });
    expect(memoryFit(3 * GB, cuda, "r").warning).toBe(
      "3.00 GB will not fit in the 2.00 GB free on cuda:0.",
    );
  });

  it("says what it does not know, and that a CPU map may still fit", () => {
    expect(memoryFit(GB, { name: "cpu", free_bytes: null, total_bytes: null }, "r").text).toBe(
      "Needs 1.00 GB · free memory of cpu unknown",
    );
    expect(memoryFit(null, cuda, "r").text).toBe("No tensor data");
    expect(memoryFit(GB, DEVICES[2], "r").text).toMatch(/^meta: shapes and dtypes only/);
    expect(memoryFit(40 * GB, DEVICES[0], "r").warning).toMatch(/a map may still work/);
    expect(memoryFit(40 * GB, DEVICES[0], null).warning).not.toMatch(/map/);
  });
});

describe("LoadPanel", () => {
  it("asks for the devices only once opened", async () => {
    const { source, panel, q } = setup({ open: false });
    await tick();
    expect(source.calls("devices")).toHaveLength(0);
    expect(q(".tdview-load-body").hidden).toBe(true);
    q<HTMLButtonElement>(".tdview-disclosure").click();
    expect(panel.isOpen).toBe(true);
    await tick();
    expect(source.calls("devices")).toHaveLength(1);
    const options = [...q<HTMLSelectElement>(".tdview-device").options].map((o) => o.text);
    expect(options).toEqual(["cpu · 16.0 GB free", "cuda:0 · 2.00 GB free", "meta"]);
  });

  it("shows the bytes against the chosen device's memory, and warns when they will not fit", async () => {
    const { q, node, choose } = setup();
    await tick();
    await node("replay");
    expect(q(".tdview-memory").textContent).toBe("Needs 3.00 GB · cpu: 16.0 GB free of 32.0 GB");
    choose(".tdview-device", "cuda:0");
    const warning = q(".tdview-memory [role=alert]");
    expect(warning.textContent).toBe("⚠ 3.00 GB will not fit in the 2.00 GB free on cuda:0.");
    choose(".tdview-device", "meta");
    expect(q(".tdview-memory").textContent).toMatch(/^meta: shapes/);
  });

  it("builds the code line from the form as it changes", async () => {
    const { q, node, choose, type } = setup();
    await node("replay");
    const code = () => q(".tdview-code").textContent;
    expect(q<HTMLInputElement>(".tdview-variable").value).toBe("replay");
    expect(code()).toBe(
      'replay = tdview.load_memmap("demo_ckpt.tdz", subpath="replay", device="cpu", mode="r")',
    );
    choose(".tdview-mode", "default");
    type("");
    expect(code()).toBe(
      'tdview.load_memmap("demo_ckpt.tdz", subpath="replay", device="cpu", mode=None)',
    );
    choose(".tdview-mode", "r+");
    type("sub");
    expect(code()).toBe(
      'sub = tdview.load_memmap("demo_ckpt.tdz", subpath="replay", device="cpu", mode="r+")',
    );
  });

  it("refuses a name that is not a Python identifier", async () => {
    const { q, node, type, panel, source } = setup();
    await node("replay");
    type("2x");
    expect(q<HTMLButtonElement>(".tdview-load-button").disabled).toBe(true);
    expect(q(".tdview-variable").getAttribute("aria-invalid")).toBe("true");
    expect(q(".tdview-field-problem").textContent).toBe('"2x" is not a Python identifier');
    expect(await panel.load()).toBeNull();
    type("lambda");
    expect(q(".tdview-field-problem").textContent).toBe('"lambda" is a Python keyword');
    type("ok");
    expect(q<HTMLButtonElement>(".tdview-load-button").disabled).toBe(false);
    expect(source.calls("load")).toHaveLength(0);
  });

  it("counts one leaf as a leaf in the progress", async () => {
    const { q, node, source } = setup({ latencyMs: 5 });
    await tick(10);
    await node("x");
    q<HTMLButtonElement>(".tdview-load-button").click();
    await tick(7);
    expect(q(".tdview-progress-label").textContent).toMatch(/^Loading x… [01] \/ 1 leaf(?!s)/);
    for (let i = 0; i < 10 && !document.querySelector(".tdview-load-done"); i++) await tick(10);
    expect(source.calls("load")).toHaveLength(1);
  });

  it("loads with the form's params, shows progress, then the result and its code", async () => {
    const { q, node, type, choose, source } = setup({ latencyMs: 5 });
    await tick(10);
    await node("replay");
    choose(".tdview-device", "cuda:0");
    type("sub");
    q<HTMLButtonElement>(".tdview-load-button").click();
    expect(q<HTMLButtonElement>(".tdview-load-button").disabled).toBe(true);
    expect(q<HTMLButtonElement>(".tdview-cancel-button").hidden).toBe(false);
    await tick(7);
    expect(q(".tdview-progress-label").textContent).toMatch(/^Loading replay… [12] \/ 2 leaves/);
    for (let i = 0; i < 10 && !document.querySelector(".tdview-load-done"); i++) await tick(10);
    expect(source.calls("load")[0]?.params).toEqual({
      path: ["replay"],
      device: "cuda:0",
      mode: "r",
      allow_pickle: false,
      variable: "sub",
      replace: false,
    });
    expect(q(".tdview-load-done").textContent).toBe("Loaded replay into sub");
    expect(q(".tdview-load-summary").textContent).toBe("TensorDict(batch_size=[1000])");
    expect(q(".tdview-code").textContent).toBe(
      'sub = tdview.load_memmap("demo_ckpt.tdz", subpath="replay", device="cuda:0", mode="r")',
    );
    expect(q<HTMLButtonElement>(".tdview-cancel-button").hidden).toBe(true);
    expect(source.calls("devices").length).toBeGreaterThanOrEqual(2); // free memory refreshed
  });

  it("reads the devices when it opens, and says so until they come", async () => {
    const { q, node } = setup({ latencyMs: 30, open: false });
    await tick(40);
    await node("x");
    q<HTMLButtonElement>(".tdview-disclosure").click();
    expect(q(".tdview-memory").textContent).toMatch(/· reading the devices…$/);
    for (let i = 0; i < 10 && /reading/.test(q(".tdview-memory").textContent ?? ""); i++) {
      await tick(10);
    }
    expect(q(".tdview-memory").textContent).toMatch(/· cpu: 16.0 GB free of 32.0 GB$/);
  });

  it("shows no progress for a load shorter than the delay, and progress for a longer one", async () => {
    loadTiming.progressDelayMs = 60;
    const { q, node, panel } = setup({ latencyMs: 5 });
    await node("x");
    const quick = panel.load();
    await tick(2);
    expect(panel.element.querySelector(".tdview-progress")).toBeNull();
    expect(q<HTMLButtonElement>(".tdview-cancel-button").hidden).toBe(true);
    expect(q<HTMLButtonElement>(".tdview-load-button").disabled).toBe(true);
    await quick;
    expect(q(".tdview-load-done").textContent).toBe("Loaded x into x");
    expect(panel.element.querySelector(".tdview-progress")).toBeNull();

    const slow = setup({ latencyMs: 40 }); // 2 leaves: about 120 ms
    await slow.node("replay");
    const running = slow.panel.load();
    await tick(30);
    expect(slow.panel.element.querySelector(".tdview-progress")).toBeNull();
    await tick(50);
    expect(slow.q(".tdview-progress-label").textContent).toMatch(/^Loading replay…/);
    expect(slow.q<HTMLButtonElement>(".tdview-cancel-button").hidden).toBe(false);
    await running;
    expect(slow.q(".tdview-load-done").textContent).toBe("Loaded replay into replay");
    expect(slow.q<HTMLButtonElement>(".tdview-cancel-button").hidden).toBe(true);
  });

  it("asks before it replaces a bound name, and says what the name holds", async () => {
    const namespace = new Map([["replay", "this TDView"]]);
    const { q, node, panel, source } = setup({ namespace });
    await node("replay");
    expect(await panel.load()).toBeNull();
    expect(q(".tdview-bound-message").textContent).toBe(
      "⚠ `replay` is already bound to this TDView.".replaceAll("`", ""),
    );
    expect(q(".tdview-bound-message code").textContent).toBe("replay");
    expect(q(".tdview-bound").getAttribute("role")).toBe("alert");
    expect(q(".tdview-replace-button").textContent).toBe("Replace replay");
    expect(namespace.get("replay")).toBe("this TDView"); // nothing bound yet
    q<HTMLButtonElement>(".tdview-replace-button").click();
    for (let i = 0; i < 10 && !document.querySelector(".tdview-load-done"); i++) await tick(5);
    expect(q(".tdview-load-done").textContent).toBe("Loaded replay into replay");
    expect(panel.element.querySelector(".tdview-bound")).toBeNull();
    expect(namespace.get("replay")).toBe("a TensorDict");
    expect(source.calls("load").map((c) => c.params.replace)).toEqual([false, true]);
  });

  it("drops the question when the name changes, and loads a free name at once", async () => {
    const namespace = new Map([["x", "a Tensor [4] float32"]]);
    const { q, node, panel, type, source } = setup({ namespace });
    await node("x");
    await panel.load();
    expect(q(".tdview-bound-message").textContent).toBe(
      "⚠ x is already bound to a Tensor [4] float32.",
    );
    q<HTMLButtonElement>(".tdview-rename-button").click();
    expect(panel.element.querySelector(".tdview-bound")).toBeNull();
    expect(document.activeElement).toBe(q(".tdview-variable"));
    await panel.load();
    type("x2");
    expect(panel.element.querySelector(".tdview-bound")).toBeNull();
    expect(await panel.load()).not.toBeNull();
    expect(namespace.get("x2")).toBe("a Tensor");
    expect(source.calls("load").map((c) => [c.params.variable, c.params.replace])).toEqual([
      ["x", false],
      ["x", false],
      ["x2", false],
    ]);
  });

  it("cancels a running load, and says that nothing was bound", async () => {
    const { q, node, panel } = setup({ latencyMs: 30 });
    await node("replay");
    const running = panel.load();
    expect(panel.isRunning).toBe(true);
    q<HTMLButtonElement>(".tdview-cancel-button").click();
    expect(await running).toBeNull();
    expect(q(".tdview-load-cancelled").textContent).toBe(
      "Load of replay cancelled; nothing was bound.",
    );
    expect(panel.isRunning).toBe(false);
    expect(q<HTMLButtonElement>(".tdview-load-button").disabled).toBe(false);
  });

  it("keeps a running load on show when the selection moves on", async () => {
    const { q, node, panel } = setup({ latencyMs: 10 });
    await node("replay");
    const running = panel.load();
    await node("x");
    expect(q(".tdview-progress-label").textContent).toMatch(/^Loading replay…/);
    expect(q<HTMLButtonElement>(".tdview-load-button").disabled).toBe(true);
    expect(q<HTMLInputElement>(".tdview-variable").value).toBe("x");
    await running;
    expect(q(".tdview-load-done").textContent).toBe("Loaded replay into replay");
  });

  it("refuses pickles until unlocked, and unlocks for one node only", async () => {
    const { q, node, panel } = setup();
    const seen: boolean[] = [];
    panel.onPickleChange = (allowed) => seen.push(allowed);
    await node("tags");
    expect(q(".tdview-unlock-field").hidden).toBe(false);
    await panel.load();
    const alert = q(".tdview-load-status [role=alert]");
    expect(alert.textContent).toMatch(/^PickleRefusedError: Refusing/);
    expect(alert.querySelector(".tdview-hint")?.textContent).toMatch(
      /Unlock pickles for this load/,
    );
    panel.unlockPickles();
    expect(q<HTMLInputElement>(".tdview-unlock").checked).toBe(true);
    expect(q(".tdview-code").textContent).toBe(
      'tags = tdview.load_memmap("demo_ckpt.tdz", subpath="tags", device="cpu", mode="r", allow_pickle=True)',
    );
    const result = await panel.load();
    expect(result?.variable).toBe("tags");
    await node("x");
    expect(panel.allowPickle).toBe(false);
    expect(q(".tdview-unlock-field").hidden).toBe(true); // a tensor holds no pickle
    expect(seen).toEqual([false, true, false]);
  });

  it("starts unlocked when the view allows pickles", async () => {
    const { node, panel } = setup({ defaults: { allow_pickle: true, mode: null, device: "meta" } });
    await node("tags");
    expect(panel.allowPickle).toBe(true);
    expect(panel.code).toBe(
      'tags = tdview.load_memmap("demo_ckpt.tdz", subpath="tags", device="meta", mode=None, allow_pickle=True)',
    );
  });

  it("disables the form without a node", () => {
    const { q } = setup();
    expect(q<HTMLButtonElement>(".tdview-load-button").disabled).toBe(true);
    expect(q(".tdview-code").textContent).toBe("");
  });
});
