// @vitest-environment happy-dom
import { afterEach, describe, expect, it } from "vitest";
import { type PreviewData, resolvePreview } from "../src/data-source";
import { MemoryDataSource } from "../src/memory-data-source";
import { SLIDE_DELAY_MS } from "../src/preview-plane";
import type { NodeDetails } from "../src/protocol";
import { parseResult } from "../src/protocol";
import {
  dtypeNote,
  formatValue,
  histogram,
  PreviewSection,
  previewTable,
  renderPreview,
  statsScope,
  statsTable,
  tableCaption,
} from "../src/render-preview";
import { loadGolden } from "./golden";
import { tick } from "./trees";

function goldenPreview(): PreviewData {
  const g = loadGolden("reply_preview");
  const result = parseResult("preview", (g.message as { result: unknown }).result);
  return resolvePreview(result, g.buffers);
}

const cells = (el: Element, selector: string) =>
  [...el.querySelectorAll(selector)].map((c) => c.textContent);

afterEach(() => {
  document.body.replaceChildren();
});

describe("formatting", () => {
  it("writes values by dtype", () => {
    expect(formatValue(0.1 as number, "float32")).toBe("0.1");
    expect(formatValue(Math.fround(0.1), "float32")).toBe("0.1");
    expect(formatValue(1234567.891, "float64")).toBe("1.23457e+6");
    expect(formatValue(-0.00001234, "float64")).toBe("-1.234e-5");
    expect(formatValue(1e-9, "float32")).toBe("1e-9");
    expect(formatValue(999999, "float32")).toBe("999999");
    expect(formatValue(Number.NaN, "float32")).toBe("nan");
    expect(formatValue(-Infinity, "float64")).toBe("-inf");
    expect(formatValue(2 ** 53 + 2, "float64")).toBe("9.0072e+15");
    expect(formatValue(9007199254740993n, "int64")).toBe("9007199254740993");
    expect(formatValue(1, "bool")).toBe("True");
    expect(formatValue(0, "bool")).toBe("False");
    expect(formatValue(-7, "int32")).toBe("-7");
    expect(formatValue(undefined, "int32")).toBe("");
  });
});

describe("the preview of the golden bfloat16 leaf", () => {
  const data = goldenPreview();

  it("says that the values are shown as float32", () => {
    expect(dtypeNote(data)).toBe("shown as float32 (stored as bfloat16)");
    expect(dtypeNote({ ...data, dtype: "complex64" })).toBe(
      "shown as |z| in float32 (stored as complex64)",
    );
    expect(dtypeNote({ ...data, dtype: "float32" })).toBe("");
  });

  it("draws the slice as a table of rows and columns", () => {
    const table = previewTable(data);
    expect(cells(table, "thead th")).toEqual(["row", "0", "1", "2", "3", "4", "5"]);
    expect(table.querySelectorAll("tbody tr")).toHaveLength(4);
    expect(cells(table, "tbody tr:first-child td")).toEqual([
      "0.5",
      "-0.25",
      "0.125",
      "0.992188",
      "-1",
      "0",
    ]);
    expect(tableCaption(data)).toBe("first 4 of 1,000 rows");
  });

  it("shows a whole min and max exactly, and the mean as a float", () => {
    const stats = statsTable({
      min: 1234567,
      max: 2 ** 53 + 2,
      mean: 1234567.5,
      std: 0,
      nan: 0,
      inf: 0,
      count: 2,
    });
    const values = cells(stats, ".tdview-stat-value");
    expect(values.slice(0, 3)).toEqual(["1234567", "9.0072e+15", "1.23457e+6"]);
  });

  it("lists the statistics", () => {
    const stats = statsTable(
      data.stats ?? { min: null, max: null, mean: null, std: null, nan: 0, inf: 0, count: 0 },
    );
    expect(cells(stats, ".tdview-stat-label")).toEqual([
      "min",
      "max",
      "mean",
      "std",
      "NaN",
      "Inf",
      "count",
    ]);
    expect(cells(stats, ".tdview-stat-value")).toEqual([
      "-1",
      "1",
      "0.0123",
      "0.5771",
      "0",
      "0",
      "6,000",
    ]);
    const none = statsTable({
      min: null,
      max: null,
      mean: null,
      std: null,
      nan: 3,
      inf: 0,
      count: 3,
    });
    expect(cells(none, ".tdview-stat-value").slice(0, 5)).toEqual(["—", "—", "3", "0", "3"]);
    expect(none.querySelector(".tdview-warn")?.textContent).toBe("3");
  });

  it("leaves out the statistics that make no sense for the dtype", () => {
    const ints = statsTable({ min: 0, max: 4, mean: 2, std: 1, nan: null, inf: null, count: 5 });
    expect(cells(ints, ".tdview-stat-label")).toEqual(["min", "max", "mean", "std", "count"]);
    expect(ints.querySelector(".tdview-warn")).toBeNull();
    const bools = statsTable({
      min: 0,
      max: 1,
      mean: null,
      std: null,
      nan: null,
      inf: null,
      count: 5,
    });
    expect(cells(bools, ".tdview-stat-label")).toEqual(["min", "max", "count"]);
  });

  it("labels a bar per value, and can scale the bars by log count", () => {
    const f64 = (v: number[]) => ({
      dtype: "float64",
      shape: [v.length],
      data: Float64Array.from(v),
    });
    const counts = { dtype: "int64", shape: [3], data: BigInt64Array.from([1n, 1000n, 10n]) };
    const values = f64([0, 1, 5]);
    const figure = histogram(f64([0, 5]), counts, { values, dtype: "int64" });
    expect(cells(figure, ".tdview-histogram-values span")).toEqual(["0", "1", "5"]);
    const bars = [...figure.querySelectorAll("rect.tdview-histogram-bar")];
    expect(bars.map((b) => b.querySelector("title")?.textContent)).toEqual([
      "0: 1",
      "1: 1,000",
      "5: 10",
    ]);
    expect(figure.querySelector("svg")?.getAttribute("aria-label")).toBe(
      "Histogram: 3 values from 0 to 5",
    );
    const linear = bars.map((b) => Number(b.getAttribute("height")));
    const log = [
      ...histogram(f64([0, 5]), counts, { values, dtype: "int64", log: true }).querySelectorAll(
        "rect.tdview-histogram-bar",
      ),
    ].map((b) => Number(b.getAttribute("height")));
    expect(linear[2]).toBe(1.5);
    expect(log[1]).toBe(100);
    expect(log[2]).toBeCloseTo((Math.log1p(10) / Math.log1p(1000)) * 100);
    const bools = histogram(f64([0, 1]), counts, { values: f64([0, 1, 1]), dtype: "bool" });
    expect(cells(bools, ".tdview-histogram-values span")).toEqual(["False", "True", "True"]);
  });

  it("draws one SVG bar per bin, as tall as its count", () => {
    const h = data.histogram;
    if (!h) throw new Error("no histogram");
    const figure = histogram(h.edges, h.counts);
    const bars = [...figure.querySelectorAll("rect.tdview-histogram-bar")];
    expect(bars).toHaveLength(10);
    const counts = [...h.counts.data].map(Number);
    const max = Math.max(...counts);
    const tallest = bars[counts.indexOf(max)];
    expect(Number(tallest?.getAttribute("height"))).toBe(100);
    expect(tallest?.querySelector("title")?.textContent).toMatch(/^\[.*\): 629$/);
    expect(cells(figure, ".tdview-histogram-axis span")).toEqual([
      "-1",
      "10 bins · tallest 629",
      "1",
    ]);
    expect(figure.querySelector("svg")?.getAttribute("aria-label")).toBe(
      "Histogram: 10 bins from -1 to 1",
    );
  });

  it("keeps a tiny bin visible and an empty one flat", () => {
    const edges = { dtype: "float64", shape: [4], data: Float64Array.from([0, 1, 2, 3]) };
    const counts = { dtype: "int64", shape: [3], data: BigInt64Array.from([0n, 1n, 100000n]) };
    const heights = [...histogram(edges, counts).querySelectorAll("rect.tdview-histogram-bar")].map(
      (b) => Number(b.getAttribute("height")),
    );
    expect(heights).toEqual([0, 1.5, 100]);
  });

  it("puts it all together", () => {
    const box = renderPreview(data);
    expect(box.querySelector(".tdview-display-dtype")).not.toBeNull();
    expect(box.querySelector(".tdview-stats")).not.toBeNull();
    expect(box.querySelector(".tdview-histogram")).not.toBeNull();
    expect(box.querySelector(".tdview-preview-table")).not.toBeNull();
  });

  it("shows a 0-d leaf as its one value, and a 1-d leaf as one column", () => {
    const scalar = previewTable({
      ...data,
      shape: [],
      display_dtype: "int64",
      slice: { dtype: "int64", shape: [], data: BigInt64Array.from([42n]) },
    });
    expect(cells(scalar, "tbody td")).toEqual(["42"]);
    const column = previewTable({
      ...data,
      shape: [3],
      display_dtype: "bool",
      slice: { dtype: "bool", shape: [3], data: Uint8Array.from([1, 0, 1]) },
      selection: { index: "[0:3]", dims: [{ start: 0, stop: 3, step: 1, kept: true }], shape: [3] },
      plane: { rows: 0, cols: null, at: [null], offset: 0, col_offset: 0 },
    });
    expect(cells(column, "thead th")).toEqual(["row", "value"]);
    expect(cells(column, "tbody td")).toEqual(["True", "False", "True"]);
  });

  it("labels a plane's rows and columns with the leaf's indices of its two dims", () => {
    const all = (n: number) => ({ start: 0, stop: n, step: 1, kept: true });
    const conv = {
      ...data,
      shape: [64, 3, 7, 7],
      slice: { dtype: "float32", shape: [2, 7], data: new Float32Array(14) },
      selection: {
        index: "[0:64, 0:3, 0:7, 0:7]",
        dims: [64, 3, 7, 7].map(all),
        shape: [64, 3, 7, 7],
      },
      plane: { rows: 2, cols: 3, at: [12, 1, null, null], offset: 5, col_offset: 0 },
    };
    expect(tableCaption(conv)).toBe("rows 5–7 of 7 (dim 2)");
    const head = cells(previewTable(conv), "thead th");
    expect(head).toEqual(["d2 \\ d3", "0", "1", "2", "3", "4", "5", "6"]); // never 0,0,1
    expect(cells(previewTable(conv), "tbody th")).toEqual(["5", "6"]);
    expect(statsScope(conv)).toBe("Statistics of the whole tensor: 9,408 values");
    const wide = {
      ...data,
      shape: [1000, 84],
      slice: { dtype: "float32", shape: [2, 50], data: new Float32Array(100) },
      selection: { index: "[0:1000, 0:84]", dims: [all(1000), all(84)], shape: [1000, 84] },
      plane: { rows: 0, cols: 1, at: [null, null], offset: 0, col_offset: 0 },
    };
    expect(tableCaption(wide)).toBe("first 2 of 1,000 rows · first 50 of 84 columns");
    const row = {
      ...wide,
      selection: {
        index: "[5, 0:84]",
        dims: [{ start: 5, stop: 6, step: 1, kept: false }, all(84)],
        shape: [84],
      },
    };
    expect(statsScope(row)).toBe("Statistics of [5, 0:84]: 84 of 84,000 values");
  });
});

describe("PreviewSection", () => {
  const tree = {
    key: "",
    children: [
      { key: "x", shape: [3, 2], dtype: "bfloat16", data: [1, 2, 3, Number.NaN, 5, 6] },
      { key: "bad", shape: [2], fail: "PreviewUnsupportedError" },
      { key: "td", children: [] },
    ],
  };

  async function setup() {
    const source = new MemoryDataSource(tree);
    const section = new PreviewSection(source, { rows: 2 });
    document.body.append(section.element);
    const details = async (key: string) => source.node([key]);
    return { source, section, details };
  }

  it("reads nothing until the button is pressed", async () => {
    const { source, section, details } = await setup();
    section.setNode(await details("x"));
    expect(section.element.hidden).toBe(false);
    expect(source.calls("preview")).toHaveLength(0);
    section.element.querySelector<HTMLButtonElement>(".tdview-preview-button")?.click();
    expect(section.element.querySelector(".tdview-busy")?.textContent).toBe("Reading…");
    await tick();
    expect(source.calls("preview")).toEqual([
      { method: "preview", params: { path: ["x"], rows: 2 } },
    ]);
    expect(section.element.querySelector(".tdview-display-dtype")?.textContent).toBe(
      "shown as float32 (stored as bfloat16)",
    );
    expect(section.element.querySelectorAll("tbody tr")).toHaveLength(2);
  });

  it("is hidden for a node that is not a tensor", async () => {
    const { section, details } = await setup();
    section.setNode(await details("td"));
    expect(section.element.hidden).toBe(true);
    section.setNode(null);
    expect(section.element.hidden).toBe(true);
  });

  it("shows an error readably, and stays usable", async () => {
    const { section, details } = await setup();
    // Details that name the failing leaf: its preview request fails.
    section.setNode({ ...(await details("x")), path: ["bad"] });
    await section.run();
    expect(section.element.querySelector('[role="alert"]')?.textContent).toBe(
      "PreviewUnsupportedError: bad: PreviewUnsupportedError",
    );
    const button = section.element.querySelector<HTMLButtonElement>(".tdview-preview-button");
    expect(button?.disabled).toBe(false);
  });

  it("drops a preview in flight when the selection moves on", async () => {
    const source = new MemoryDataSource(tree, { latencyMs: 20 });
    const section = new PreviewSection(source);
    const x = (await source.node(["x"])) as NodeDetails;
    section.setNode(x);
    const running = section.run();
    section.suspend();
    await running;
    expect(section.element.querySelector(".tdview-preview-result")).toBeNull();
    expect(section.element.querySelector('[role="alert"]')).toBeNull();
    section.dispose();
  });
});

describe("PreviewSection, open from leaf to leaf", () => {
  const tree = {
    key: "",
    children: [
      {
        key: "buffer",
        shape: [100_000, 3],
        dtype: "int64",
        data: Array.from({ length: 300_000 }, (_, i) => i),
      },
      { key: "flags", shape: [4], dtype: "bool", data: [1, 0, 1, 1] },
      { key: "td", children: [] },
    ],
  };

  async function setup(rows = 20, latencyMs = 0) {
    const source = new MemoryDataSource(tree, { latencyMs });
    const section = new PreviewSection(source, { rows });
    document.body.append(section.element);
    const details = async (key: string) => source.node([key]);
    const q = <T extends Element>(sel: string) => section.element.querySelector<T>(sel);
    return { source, section, details, q };
  }

  it("is one Preview control, with no title of the same name", async () => {
    const { section, details } = await setup();
    section.setNode(await details("flags"));
    expect(section.element.querySelector("h3")).toBeNull();
    const shown = [...section.element.querySelectorAll("button")].filter((b) => !b.hidden);
    expect(shown.map((b) => b.textContent)).toEqual(["Preview"]);
  });

  it("stays open as the selection moves to another leaf, and reads it", async () => {
    const { source, section, details, q } = await setup();
    section.setNode(await details("flags"));
    q<HTMLButtonElement>(".tdview-preview-button")?.click();
    await tick();
    expect(section.open).toBe(true);
    expect(q<HTMLButtonElement>(".tdview-preview-close")?.hidden).toBe(false);
    expect(cells(section.element, ".tdview-stat-label")).toEqual(["min", "max", "count"]);
    section.suspend();
    section.setNode(await details("buffer"));
    await tick();
    expect(source.calls("preview").map((c) => c.params.path)).toEqual([["flags"], ["buffer"]]);
    expect(cells(section.element, "tbody th")[0]).toBe("0");
    section.setNode(await details("td"));
    expect(section.element.hidden).toBe(true);
    section.setNode(await details("flags"));
    await tick();
    q<HTMLButtonElement>(".tdview-preview-button")?.click(); // reads it again, stays open
    expect(section.open).toBe(true);
    q<HTMLButtonElement>(".tdview-preview-close")?.click();
    expect(section.open).toBe(false);
    expect(q(".tdview-preview-result")).toBeNull();
    expect(q<HTMLButtonElement>(".tdview-preview-close")?.hidden).toBe(true);
  });

  it("pages through the rows: rows 20–40 of 100,000, and back", async () => {
    const { source, section, details, q } = await setup();
    section.setNode(await details("buffer"));
    section.openPreview();
    await tick();
    expect(q(".tdview-preview-rows")?.textContent).toBe("rows 0–20 of 100,000");
    expect(q<HTMLButtonElement>(".tdview-preview-prev")?.disabled).toBe(true);
    q<HTMLButtonElement>(".tdview-preview-next")?.click();
    await tick();
    // a page of the table, not another selection: the statistics stay of the whole leaf
    expect(source.calls("preview").at(-1)?.params).toMatchObject({ offset: 20 });
    expect(source.calls("preview").at(-1)?.params.index).toBeUndefined();
    expect(q(".tdview-preview-rows")?.textContent).toBe("rows 20–40 of 100,000");
    expect(cells(section.element, "tbody th")[0]).toBe("20");
    expect(cells(section.element, "tbody td")[0]).toBe("60");
    expect(q<HTMLInputElement>(".tdview-preview-index")?.value).toBe("");
    expect(q(".tdview-preview-scope")?.textContent).toBe(
      "Statistics of the whole tensor: 300,000 values",
    );
    // the pager sits with the table it pages
    expect(q(".tdview-preview-table-head + .tdview-preview-table")).not.toBeNull();
    expect(q(".tdview-preview-table-head .tdview-preview-pager")).not.toBeNull();
    q<HTMLButtonElement>(".tdview-preview-prev")?.click();
    await tick();
    expect(q(".tdview-preview-rows")?.textContent).toBe("rows 0–20 of 100,000");
  });

  it("reaches row 50,000 by an index expression, validated in the browser", async () => {
    const { source, section, details, q } = await setup();
    section.setNode(await details("buffer"));
    const input = q<HTMLInputElement>(".tdview-preview-index");
    if (!input) throw new Error("no index input");
    expect(input.placeholder).toBe("e.g. [50000:50020, :3]"); // fits [100000, 3]
    expect(input.title).toContain("The shape of this tensor is [100000, 3].");
    input.value = "[50000:50020, :8, 1]";
    input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
    expect(q(".tdview-preview-index-error")?.textContent).toBe(
      "[50000:50020, :8, 1] has 3 parts but the leaf has 2 dims: its shape is [100000, 3]",
    );
    expect(input.getAttribute("aria-invalid")).toBe("true");
    input.value = "[5a]";
    expect(section.applyIndex(input.value)).toBe(false);
    expect(source.calls("preview")).toHaveLength(0);
    input.value = "[50000:50020, :8]";
    input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
    await tick();
    expect(q(".tdview-preview-index-error")?.textContent).toBe("");
    expect(source.calls("preview")[0]?.params).toMatchObject({ index: "[50000:50020, :8]" });
    expect(cells(section.element, "tbody th")[0]).toBe("50000");
    expect(cells(section.element, "tbody td")[0]).toBe("150000");
    expect(q(".tdview-preview-rows")).toBeNull(); // the selection's 20 rows are all shown
    expect(q(".tdview-preview-caption")?.textContent).toBe("rows 50,000–50,020 of 100,000");
  });

  it("forgets the index on another leaf", async () => {
    const { source, section, details } = await setup();
    section.setNode(await details("buffer"));
    section.applyIndex("[5:7]");
    await tick();
    section.setNode(await details("flags"));
    await tick();
    expect(source.calls("preview").at(-1)?.params).toEqual({ path: ["flags"], rows: 20 });
  });

  it("redraws the histogram by log count without asking again", async () => {
    const { source, section, details, q } = await setup();
    section.setNode(await details("flags"));
    section.openPreview();
    await tick();
    const log = q<HTMLInputElement>(".tdview-preview-log");
    if (!log) throw new Error("no log toggle");
    log.checked = true;
    log.dispatchEvent(new Event("change"));
    expect(q(".tdview-histogram-max")?.textContent).toContain("log scale");
    expect(source.calls("preview")).toHaveLength(1);
  });

  it("can be cancelled while it reads, and stays open", async () => {
    const { section, details, q } = await setup(20, 50);
    section.setNode(await details("buffer"));
    section.openPreview();
    q<HTMLButtonElement>(".tdview-preview-cancel")?.click();
    await tick(80);
    expect(q(".tdview-preview-result")).toBeNull();
    expect(section.element.textContent).toContain("Preview cancelled.");
    expect(section.open).toBe(true);
  });
});

describe("PreviewSection, what it describes", () => {
  const tree = {
    key: "",
    children: [
      {
        key: "weight",
        shape: [256, 64],
        dtype: "float32",
        data: Array.from({ length: 256 * 64 }, (_, i) => i),
      },
      {
        key: "conv",
        shape: [4, 3, 5, 5],
        dtype: "float32",
        data: Array.from({ length: 300 }, (_, i) => i),
      },
      { key: "step", shape: [], dtype: "int64", data: [1000] },
    ],
  };

  async function setup() {
    const source = new MemoryDataSource(tree);
    const section = new PreviewSection(source, { rows: 20 });
    document.body.append(section.element);
    const q = <T extends Element>(sel: string) => section.element.querySelector<T>(sel);
    const enter = async (text: string) => {
      const input = q<HTMLInputElement>(".tdview-preview-index") as HTMLInputElement;
      input.value = text;
      input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
      await tick();
    };
    return { source, section, q, enter };
  }

  it("[5] gives the statistics of row 5, and says so", async () => {
    const { section, source, q, enter } = await setup();
    section.setNode(await source.node(["weight"]));
    section.openPreview();
    await tick();
    expect(q(".tdview-preview-scope")?.textContent).toBe(
      "Statistics of the whole tensor: 16,384 values",
    );
    await enter("[5]");
    expect(q(".tdview-preview-scope")?.textContent).toBe(
      "Statistics of [5, 0:64]: 64 of 16,384 values",
    );
    const stats = cells(section.element, ".tdview-stat-value");
    expect(stats[0]).toBe("320"); // min: row 5 starts at 5 * 64
    expect(stats.at(-1)).toBe("64");
    await enter("[..., -1]");
    expect(q(".tdview-preview-scope")?.textContent).toBe(
      "Statistics of [0:256, 63]: 256 of 16,384 values",
    );
    expect(cells(section.element, "tbody td").slice(0, 2)).toEqual(["63", "127"]);
  });

  it("answers an index the kernel refuses beside the field, keeping what it showed", async () => {
    const { section, source, q } = await setup();
    section.setNode(await source.node(["weight"]));
    section.openPreview();
    await tick();
    // the browser's check passes (no shape known for it), the kernel's answer is shown
    section.setNode({ ...(await source.node(["weight"])), shape: null } as NodeDetails);
    await tick();
    expect(section.applyIndex("[0, 0, 0]")).toBe(true);
    await tick();
    expect(q(".tdview-preview-index-error")?.textContent).toContain(
      "has 3 parts but the leaf has 2 dims: its shape is [256, 64]",
    );
    expect(q('[role="alert"]')).toBeNull();
    expect(q(".tdview-preview-result")).not.toBeNull();
  });

  it("maps the dims of a conv weight: a kernel at a time, a slider per other dim", async () => {
    const { section, source, q } = await setup();
    section.setNode(await source.node(["conv"]));
    section.openPreview();
    await tick();
    expect(cells(section.element, "thead th").slice(0, 3)).toEqual(["dim", "size", "rows"]);
    const head = cells(section.element, ".tdview-preview-table thead th");
    expect(head).toEqual(["d2 \\ d3", "0", "1", "2", "3", "4"]);
    expect(q(".tdview-preview-caption")?.textContent).toBe("[0, 0, 0:5, 0:5] · 5 rows (dim 2)");
    const sliders = section.element.querySelectorAll<HTMLInputElement>(".tdview-plane-slider");
    expect(sliders).toHaveLength(2);
    const filter = sliders[0] as HTMLInputElement;
    filter.value = "2";
    filter.dispatchEvent(new Event("input"));
    filter.dispatchEvent(new Event("change"));
    await tick();
    expect(source.calls("preview").at(-1)?.params).toMatchObject({
      plane: { rows: 2, cols: 3, at: [2, 0, 0, 0] },
    });
    expect(cells(section.element, ".tdview-preview-table tbody td")[0]).toBe("150"); // conv[2, 0, 0, 0]
    const rowsOf = section.element.querySelectorAll<HTMLInputElement>(".tdview-plane-rows");
    const channelAsRows = rowsOf[1] as HTMLInputElement;
    channelAsRows.checked = true;
    channelAsRows.dispatchEvent(new Event("change"));
    await tick();
    expect(source.calls("preview").at(-1)?.params).toMatchObject({
      plane: { rows: 1, cols: 3, at: [2, 0, 0, 0] },
    });
    expect(cells(section.element, ".tdview-preview-table tbody th")).toEqual(["0", "1", "2"]);
    expect(q(".tdview-preview-scope")?.textContent).toBe(
      "Statistics of the whole tensor: 300 values",
    );
  });

  it("sends a moving slider's position once it rests", async () => {
    const { section, source } = await setup();
    section.setNode(await source.node(["conv"]));
    section.openPreview();
    await tick();
    const before = source.calls("preview").length;
    const slider = section.element.querySelector<HTMLInputElement>(".tdview-plane-slider");
    if (!slider) throw new Error("no slider");
    for (const at of ["1", "2", "3"]) {
      slider.value = at;
      slider.dispatchEvent(new Event("input"));
    }
    expect(section.element.querySelector(".tdview-plane-at")?.textContent).toBe("3");
    expect(source.calls("preview")).toHaveLength(before); // not yet
    await new Promise((done) => setTimeout(done, SLIDE_DELAY_MS + 50));
    await tick();
    expect(source.calls("preview")).toHaveLength(before + 1);
    expect(source.calls("preview").at(-1)?.params).toMatchObject({
      plane: { rows: 2, cols: 3, at: [3, 0, 0, 0] },
    });
  });

  it("pages the columns past the first 50, the statistics unchanged", async () => {
    const { section, source, q } = await setup();
    section.setNode(await source.node(["weight"]));
    section.openPreview();
    await tick();
    expect(q(".tdview-preview-caption")?.textContent).toBe("first 50 of 64 columns");
    expect(q<HTMLButtonElement>(".tdview-preview-cols-prev")?.disabled).toBe(true);
    q<HTMLButtonElement>(".tdview-preview-cols-next")?.click();
    await tick();
    expect(source.calls("preview").at(-1)?.params).toMatchObject({ col_offset: 50 });
    expect(q(".tdview-preview-caption")?.textContent).toBe("columns 50–64 of 64");
    const head = cells(section.element, ".tdview-preview-table thead th");
    expect(head.slice(0, 3)).toEqual(["row", "50", "51"]);
    expect(cells(section.element, ".tdview-preview-table tbody td")[0]).toBe("50");
    expect(q<HTMLButtonElement>(".tdview-preview-cols-next")?.disabled).toBe(true);
    expect(q(".tdview-preview-scope")?.textContent).toBe(
      "Statistics of the whole tensor: 16,384 values",
    );
  });

  it("a scalar has no index to ask", async () => {
    const { section, source, q } = await setup();
    section.setNode(await source.node(["step"]));
    expect(q<HTMLInputElement>(".tdview-preview-index")?.disabled).toBe(true);
    expect(q<HTMLInputElement>(".tdview-preview-index")?.placeholder).toBe(
      "a scalar: nothing to index",
    );
  });
});
