// @vitest-environment happy-dom
import { afterEach, describe, expect, it, vi } from "vitest";
import type { PreviewData } from "../src/data-source";
import { MemoryDataSource } from "../src/memory-data-source";
import type { NodeSummary, StorageInfo } from "../src/protocol";
import { costText, DetailsPanel, detailFields, shortLocation } from "../src/render-details";
import { tick } from "./trees";

const storage = (cost: StorageInfo["cost"], stored_bytes = 2048): StorageInfo => ({
  location: "/data/run/ckpt.tdz::replay/obs.memmap",
  offset: 4096,
  stored_bytes,
  compression: cost === "decompress" ? "deflate" : "stored",
  crc32: null,
  cost,
});

function tree() {
  return {
    key: "",
    children: [
      {
        key: "replay",
        rollup: { bytes: 8000, numel: 2000, leaves: 1, by_dtype: { float32: 8000 } },
        children: [{ key: "obs", shape: [1000, 2], storage: storage("map", 8000) }],
      },
      {
        key: "tags",
        kind: "non_tensor" as const,
        class_name: "NonTensorData",
        pickled: true,
        pickle: { bytes: 56, globals: [["collections", "OrderedDict"]] as [string, string][] },
        problems: [
          "pickled value: unpickled only on load with allow_pickle=True, or None with a warning",
        ],
      },
      { key: "a/b", shape: [2] },
    ],
  };
}

function setup() {
  const source = new MemoryDataSource(tree(), { source: "ckpt.tdz" });
  const panel = new DetailsPanel(source, {
    source: "ckpt.tdz",
    options: { device: "cpu", mode: "r", allow_pickle: false, robust_key: true },
    totalsDelayMs: 0,
  });
  document.body.append(panel.element);
  return { source, panel, el: panel.element };
}

afterEach(() => {
  document.body.replaceChildren();
  vi.restoreAllMocks();
});

describe("a lazy stack's schema", () => {
  it("is a field of its details, a key a line", async () => {
    const { source } = setup();
    const details = await source.node(["replay"]);
    expect(detailFields(details).map(([label]) => label)).not.toContain("Schema");
    const entries = [
      {
        key: ["obs"],
        kind: "leaf",
        class_name: "Tensor",
        dtype: "float32",
        shape: [-1, 2],
        members: 2,
      },
    ];
    const schema = { members: 2, stack_dim: 0, truncated: false, entries };
    const fields = new Map(detailFields({ ...details, schema }));
    expect(fields.get("Schema")).toBe("obs: float32[-1, 2]");
  });
});

describe("storage facts", () => {
  it("say what a load costs and how much it reads", () => {
    expect(costText(storage("map"), 2048)).toBe("zero-copy map; reads 2.05 KB as used");
    expect(costText(storage("copy"), 2048)).toBe("copy; reads 2.05 KB");
    expect(costText(storage("decompress", 300), 2048)).toBe(
      "decompression; reads 300 B into 2.05 KB",
    );
    expect(costText(storage("none", 0), null)).toBe("none; nothing to read");
  });

  it("name an archive entry by the archive's file name", () => {
    expect(shortLocation("/data/run/ckpt.tdz::replay/obs.memmap")).toBe(
      "ckpt.tdz::replay/obs.memmap",
    );
    expect(shortLocation("C:\\runs\\ckpt.tdz::a.memmap")).toBe("ckpt.tdz::a.memmap");
    expect(shortLocation("/data/run/ckpt/replay/obs.memmap")).toBe(
      "/data/run/ckpt/replay/obs.memmap",
    );
  });
});

describe("DetailsPanel", () => {
  it("copies the key as a tuple and as a subpath", async () => {
    const writeText = vi.fn(() => Promise.resolve());
    Object.defineProperty(navigator, "clipboard", { value: { writeText }, configurable: true });
    const { panel, el } = setup();
    await panel.show(["replay", "obs"]);
    const key = el.querySelector<HTMLButtonElement>(".tdview-copy-key button");
    const sub = el.querySelector<HTMLButtonElement>(".tdview-copy-subpath button");
    expect(key?.title).toBe('Copy the nested key ("replay", "obs")');
    key?.click();
    sub?.click();
    await tick();
    expect(writeText.mock.calls).toEqual([['("replay", "obs")'], ['"replay/obs"']]);
    expect(el.querySelector("dl")?.textContent).toContain("zero-copy map; reads 8.00 KB as used");
    expect(el.querySelector("dl")?.textContent).toContain("ckpt.tdz::replay/obs.memmap @ 4096");
  });

  it("wraps a path, subpath or key only at its separators, its Copy button in the row", async () => {
    const { panel, el } = setup();
    await panel.show(["replay", "obs"]);
    const sub = el.querySelector(".tdview-copy-subpath")?.closest("dd");
    const text = sub?.querySelector(".tdview-path-text");
    expect(text?.innerHTML).toBe("replay/<wbr>obs");
    expect(text?.classList.contains("tdview-copy-text")).toBe(true);
    expect(sub?.lastElementChild?.classList.contains("tdview-copy-subpath")).toBe(true);
    const dds = [...el.querySelectorAll("dd")];
    const path = dds.find((dd) => dd.textContent === "replay / obs");
    expect(path?.querySelector(".tdview-path-text")).not.toBeNull();
  });

  it("has no subpath to copy when a key holds a slash", async () => {
    const { panel, el } = setup();
    await panel.show(["a/b"]);
    expect(el.querySelector(".tdview-copy-key")).not.toBeNull();
    expect(el.querySelector(".tdview-copy-subpath")).toBeNull();
  });

  it("shows a node's size once, with its tensor count", async () => {
    const { panel, el } = setup();
    await panel.show(["replay"]);
    const text = el.querySelector("dl")?.textContent ?? "";
    expect(text).toContain("8.00 KB (8,000 B) in 1 tensor");
    expect(text).not.toContain("Subtree");
  });

  it("shows a node at once, then its subtree totals after a quiet time", async () => {
    const source = new MemoryDataSource(tree(), { source: "ckpt.tdz" });
    const panel = new DetailsPanel(source, { source: "ckpt.tdz", totalsDelayMs: 40 });
    document.body.append(panel.element);
    const shown = panel.show(["replay"]);
    await tick(10);
    const first = panel.element.querySelector("dl")?.textContent ?? "";
    expect(first).toContain("replay");
    expect(first).not.toContain("8,000 B");
    expect(source.calls("node").map((c) => c.params)).toEqual([
      { path: ["replay"], totals: false },
    ]);
    await shown;
    expect(panel.element.querySelector("dl")?.textContent).toContain(
      "8.00 KB (8,000 B) in 1 tensor",
    );
    expect(source.calls("node").map((c) => c.params)).toEqual([
      { path: ["replay"], totals: false },
      { path: ["replay"] },
    ]);
    // a node shown meanwhile cancels the wait: no totals are asked for the first one
    const again = panel.show(["replay"]);
    await tick(5);
    await panel.show(["a/b"]);
    await again;
    expect(source.calls("node")).toHaveLength(4);
  });

  it("locks a pickled value, lists its imports, and unlocks it for the load only", async () => {
    const { panel, el, source } = setup();
    await panel.show(["tags"]);
    const lock = () => el.querySelector<HTMLElement>(".tdview-lock");
    expect(lock()?.dataset.locked).toBe("true");
    expect(lock()?.querySelector(".tdview-lock-badge")?.textContent).toBe("Locked");
    expect(lock()?.textContent).toContain("56 B of pickle");
    // when it is unpickled, as tdview tree says it: the default None unpickles too
    expect(lock()?.textContent).toContain(
      "unpickled only on load with allow_pickle=True, or None with a warning",
    );
    expect(
      [...(lock()?.querySelectorAll(".tdview-globals li") ?? [])].map((li) => li.textContent),
    ).toEqual(["collections.OrderedDict"]);
    expect(panel.loader.isOpen).toBe(false);
    lock()?.querySelector<HTMLButtonElement>(".tdview-unlock-button")?.click();
    expect(lock()?.dataset.locked).toBe("false");
    expect(panel.loader.isOpen).toBe(true);
    expect(panel.loader.allowPickle).toBe(true);
    expect(panel.loader.code).toMatch(/allow_pickle=True\)$/);
    // The load form's checkbox drives the same state.
    const box = el.querySelector<HTMLInputElement>(".tdview-unlock");
    if (!box) throw new Error("no checkbox");
    box.checked = false;
    box.dispatchEvent(new Event("change"));
    expect(lock()?.dataset.locked).toBe("true");
    lock()?.querySelector<HTMLButtonElement>(".tdview-unlock-button")?.click();
    await panel.loader.load();
    expect(source.calls("load")[0]?.params.allow_pickle).toBe(true);
    // Another node: locked again.
    await panel.show(["replay"]);
    await panel.show(["tags"]);
    expect(lock()?.dataset.locked).toBe("true");
  });

  it("says a pickle's imports are unknown when its scan stopped", async () => {
    const stopped = "too large to scan: imports unknown; stopped after 2,000,000 opcodes";
    const source = new MemoryDataSource(
      {
        key: "",
        children: [
          {
            key: "bomb",
            kind: "non_tensor" as const,
            class_name: "NonTensorData",
            pickled: true,
            pickle: { bytes: 33554432, globals: [] as [string, string][], stopped },
          },
        ],
      },
      { source: "bomb.tdz" },
    );
    const panel = new DetailsPanel(source, {
      source: "bomb.tdz",
      options: { device: "cpu", mode: "r", allow_pickle: false, robust_key: true },
      totalsDelayMs: 0,
    });
    document.body.append(panel.element);
    await panel.show(["bomb"]);
    const globals = panel.element.querySelector(".tdview-lock-globals")?.textContent ?? "";
    expect(globals).toContain(stopped);
    expect(globals).not.toContain("builtins only");
  });

  it("shows the preview only for a tensor, and the load form for any node", async () => {
    const { panel, el } = setup();
    await panel.show(["replay"]);
    expect(panel.preview.element.hidden).toBe(true);
    expect(panel.loader.element.hidden).toBe(false);
    await panel.show(["replay", "obs"]);
    expect(panel.preview.element.hidden).toBe(false);
    await panel.show(["gone"]);
    expect(el.querySelector(".tdview-details-info [role=alert]")?.textContent).toMatch(/^KeyError/);
    expect(panel.preview.element.hidden).toBe(true);
    expect(panel.loader.element.hidden).toBe(true);
    await panel.show(null);
    expect(panel.details).toBeNull();
  });
});

describe("room to look", () => {
  it("heads the panel with the node's name and summary, its statistics once previewed", async () => {
    const values = tree();
    const obs = values.children[0]?.children?.[0];
    if (obs) Object.assign(obs, { data: Array.from({ length: 2000 }, (_, i) => i / 1000 - 1) });
    const panel = new DetailsPanel(new MemoryDataSource(values), { source: "ckpt.tdz" });
    const el = panel.element;
    document.body.append(el);
    await panel.show(["replay", "obs"]);
    const head = el.querySelector<HTMLElement>(".tdview-details-head");
    expect(head?.hidden).toBe(false);
    expect(head?.querySelector(".tdview-details-name")?.textContent).toBe("obs");
    const summary = () => head?.querySelector(".tdview-summary")?.textContent;
    expect(summary()).toBe("f32[1000,2] n=2,000 8.00 KB");
    const node = panel.details;
    if (!node) throw new Error("no details");
    expect(panel.rowTitle(node)).toBe(""); // no statistics yet: the row keeps its path
    panel.preview.openPreview();
    await vi.waitFor(() => expect(summary()).toContain("x∈"));
    expect(summary()).toBe("f32[1000,2] n=2,000 8.00 KB x∈[-1, 0.999] μ=-5e-4 σ=0.577");
    expect(panel.rowTitle(node)).toBe(`replay / obs\n${summary()}`);
  });

  it("keeps statistics of a slice out of the summary", () => {
    const { panel } = setup();
    const stats = { min: 0, max: 1, mean: 0.5, std: 0.5, nan: 0, inf: 0, count: 4 };
    const data = { path: ["x"], dtype: "float32", shape: [2, 4], stats } as PreviewData;
    panel.head.noteStats(data); // 4 of 8 values: a slice
    const node = { path: ["x"], dtype: "float32", shape: [2, 4], bytes: 32 } as NodeSummary;
    expect(panel.head.summaryOf(node)).toBe("");
    panel.head.noteStats({ ...data, stats: { ...stats, count: 8 } });
    expect(panel.head.summaryOf(node)).toBe("f32[2,4] n=8 32 B x∈[0, 1] μ=0.5 σ=0.5");
  });

  it("says what a node is and its size in the head", async () => {
    const { panel, el } = setup();
    await panel.show(["replay"]);
    expect(el.querySelector(".tdview-summary")?.textContent).toBe(
      "TensorDict · 8.00 KB in 1 tensor",
    );
    await panel.show([]);
    expect(el.querySelector(".tdview-details-name")?.textContent).toBe("ckpt.tdz");
    await panel.show(null);
    expect(el.querySelector<HTMLElement>(".tdview-details-head")?.hidden).toBe(true);
  });

  it("folds the facts away, and keeps them folded from node to node", async () => {
    const { panel, el } = setup();
    await panel.show(["replay", "obs"]);
    const toggle = () => el.querySelector<HTMLButtonElement>(".tdview-facts-toggle");
    const facts = () => el.querySelector<HTMLElement>("dl.tdview-facts");
    expect(toggle()?.getAttribute("aria-expanded")).toBe("true");
    expect(toggle()?.getAttribute("aria-controls")).toBe(facts()?.id);
    toggle()?.click();
    expect(panel.factsFolded).toBe(true);
    expect(facts()?.hidden).toBe(true);
    const rows = (facts()?.childElementCount ?? 0) / 2;
    expect(toggle()?.textContent).toBe(`▸ Facts (${rows} rows)`);
    expect(toggle()?.getAttribute("aria-expanded")).toBe("false");
    await panel.show(["replay"]);
    expect(facts()?.hidden).toBe(true);
    expect(facts()?.textContent).toContain("8.00 KB"); // folded, not dropped
    toggle()?.click();
    expect(facts()?.hidden).toBe(false);
    expect(toggle()?.textContent).toBe("▾ Facts");
  });

  it("gives the panel the whole width and back", async () => {
    const { panel, el } = setup();
    await panel.show(["replay", "obs"]);
    const widen = el.querySelector<HTMLButtonElement>(".tdview-maximize");
    widen?.click();
    expect(el.classList.contains("tdview-maximized")).toBe(true);
    expect(widen?.getAttribute("aria-pressed")).toBe("true");
    await panel.show(["replay"]);
    expect(el.classList.contains("tdview-maximized")).toBe(true);
    widen?.click();
    expect(el.classList.contains("tdview-maximized")).toBe(false);
    expect(widen?.getAttribute("aria-pressed")).toBe("false");
  });

  it("wraps where a leaf is stored at its slashes, with no offset outside an archive", async () => {
    const { panel, el, source } = setup();
    const file = { ...storage("map", 8000), location: "/data/run/linear1/weight.memmap" };
    const details = await source.node(["replay", "obs"]);
    vi.spyOn(source, "node").mockResolvedValue({ ...details, storage: { ...file, offset: null } });
    await panel.show(["replay", "obs"]);
    const stored = [...el.querySelectorAll("dt")].find((dt) => dt.textContent === "Stored in");
    const dd = stored?.nextElementSibling;
    expect(dd?.textContent).toBe("/data/run/linear1/weight.memmap");
    expect(dd?.querySelector(".tdview-path-text")?.innerHTML).toBe(
      "/<wbr>data/<wbr>run/<wbr>linear1/<wbr>weight.memmap",
    );
  });
});
