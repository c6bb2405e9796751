// @vitest-environment happy-dom
import { afterEach, describe, expect, it } from "vitest";
import { MemoryDataSource } from "../src/memory-data-source";
import {
  canvasSize,
  cellText,
  colorScale,
  heatmapPixels,
  parseColor,
  renderHeatmap,
  scalePixels,
  themeColor,
} from "../src/render-heatmap";
import { PreviewSection } from "../src/render-preview";
import { tick } from "./trees";

afterEach(() => {
  document.body.replaceChildren();
});

describe("the heatmap's colours", () => {
  it("parses the colours a theme variable holds", () => {
    expect(parseColor("#fff")).toEqual([255, 255, 255]);
    expect(parseColor(" #1976D2 ")).toEqual([25, 118, 210]);
    expect(parseColor("rgb(1, 2, 3)")).toEqual([1, 2, 3]);
    expect(parseColor("rgba(10 20 30 / 50%)")).toEqual([10, 20, 30]);
    expect(parseColor("var(--md-blue-700)")).toBeNull();
  });

  it("reads the --jp-* variables, with fallbacks", () => {
    const themed = document.createElement("div");
    themed.style.setProperty("--jp-brand-color1", "#ff0000");
    document.body.append(themed);
    expect(themeColor(themed, ["--jp-brand-color1", "#000000"])).toEqual([255, 0, 0]);
    expect(themeColor(themed, ["--jp-layout-color1", "#ffffff"])).toEqual([255, 255, 255]);
    expect(themeColor(null, ["--jp-brand-color1", "#1976d2"])).toEqual([25, 118, 210]);
  });

  it("mixes each cell from low to high, a cell without a value transparent", () => {
    const px = heatmapPixels([0, 5, 10, Number.NaN], 0, 10, [0, 0, 0], [200, 100, 50]);
    expect([...px]).toEqual([0, 0, 0, 255, 100, 50, 25, 255, 200, 100, 50, 255, 0, 0, 0, 0]);
    const flat = heatmapPixels([3, 3], 3, 3, [0, 0, 0], [200, 100, 50]);
    expect([...flat.slice(0, 4)]).toEqual([0, 0, 0, 255]);
  });
});

describe("the heatmap's scale, caption and shape", () => {
  const themed = () => {
    const box = document.createElement("div");
    box.style.setProperty("--jp-layout-color1", "#ffffff");
    box.style.setProperty("--jp-brand-color1", "#0000ff");
    box.style.setProperty("--jp-error-color1", "#ff0000");
    document.body.append(box);
    return box;
  };

  it("diverges about 0 for signed data: blue below, the background at 0, red above", () => {
    const scale = colorScale(-0.1205, 0.1239, themed());
    expect(scale.diverging).toBe(true);
    expect([scale.min, scale.max]).toEqual([-0.1239, 0.1239]);
    const px = scalePixels([-0.1239, 0, 0.1239, Number.NaN], scale);
    expect([...px]).toEqual([0, 0, 255, 255, 255, 255, 255, 255, 255, 0, 0, 255, 0, 0, 0, 0]);
  });

  it("is sequential from the background for non-negative data", () => {
    const scale = colorScale(0, 10, themed());
    expect(scale.diverging).toBe(false);
    expect([...scalePixels([0, 10], scale)]).toEqual([255, 255, 255, 255, 0, 0, 255, 255]);
  });

  it("says how many values each cell means", () => {
    expect(cellText(7, 7, 7, 7)).toBe("each cell: one value");
    expect(cellText(256, 64, 128, 64)).toBe("each cell: mean of 2×1 values");
    expect(cellText(300, 40, 128, 40)).toBe("each cell: mean of 2–3×1 values");
  });

  it("keeps the values' aspect ratio, or says it is stretched", () => {
    expect(canvasSize(256, 64, 560)).toEqual({ width: 80, height: 320, kept: true });
    expect(canvasSize(7, 7, 560)).toEqual({ width: 320, height: 320, kept: true });
    const row = canvasSize(1, 64, 560);
    expect(row.kept).toBe(false);
    expect(row.height).toBe(24);
  });

  it("draws a [256, 64] weight 4 times taller than wide, and a row stretched", () => {
    const weight = renderHeatmap(
      {
        heatmap: {
          cells: { dtype: "float32", shape: [2, 2], data: Float32Array.from([-1, 1, 0, 2]) },
          of: [256, 64],
          min: -1,
          max: 2,
        },
      } as Parameters<typeof renderHeatmap>[0],
      themed(),
    );
    const canvas = weight?.querySelector<HTMLCanvasElement>("canvas");
    expect(canvas?.style.width).toBe("80px");
    expect(canvas?.style.aspectRatio.replace(/\s/g, "")).toBe("80/320");
    expect(weight?.querySelector(".tdview-heatmap-zero")?.textContent).toBe("0");
    expect(weight?.querySelector(".tdview-heatmap-caption")?.textContent).toBe(
      "Heatmap of the selection: 256 × 64 values, each cell: mean of 128×32 values",
    );
  });
});

describe("the heatmap of a preview", () => {
  const tree = {
    key: "",
    children: [
      {
        key: "w",
        shape: [300, 40],
        dtype: "float32",
        data: Array.from({ length: 12_000 }, (_, i) => i),
      },
      { key: "v", shape: [5], dtype: "float32", data: [1, 2, 3, 4, 5] },
    ],
  };

  it("is asked for when ticked, and drawn on a canvas, never with a filter", async () => {
    const source = new MemoryDataSource(tree);
    const section = new PreviewSection(source);
    document.body.append(section.element);
    section.setNode(await source.node(["w"]));
    section.openPreview();
    await tick();
    expect(section.element.querySelector(".tdview-heatmap")).toBeNull();
    const toggle = section.element.querySelector<HTMLInputElement>(".tdview-preview-heatmap");
    if (!toggle) throw new Error("no heatmap toggle");
    toggle.checked = true;
    toggle.dispatchEvent(new Event("change"));
    await tick();
    expect(source.calls("preview").at(-1)?.params).toMatchObject({
      heatmap: { rows: 128, cols: 256 },
    });
    const canvas = section.element.querySelector<HTMLCanvasElement>("canvas.tdview-heatmap-canvas");
    expect(canvas?.width).toBe(40);
    expect(canvas?.height).toBe(128);
    expect(canvas?.getAttribute("aria-label")).toBe(
      "Heatmap of 300 x 40 values in 128 x 40 cells, 40 to 11980",
    );
    expect(section.element.querySelector(".tdview-heatmap-caption")?.textContent).toBe(
      "Heatmap of the selection: 300 × 40 values, each cell: mean of 2–3×1 values",
    );
    // after the table, whose pager stays beside it
    expect(section.element.querySelector(".tdview-preview-table + .tdview-heatmap")).not.toBeNull();
    expect(section.element.querySelector(".tdview-heatmap-size")?.textContent).toBe(
      "non-negative", // a sequential scale
    );
    expect(section.element.innerHTML).not.toContain("invert");
  });

  it("is not offered for a 1-D leaf", async () => {
    const source = new MemoryDataSource(tree);
    const section = new PreviewSection(source);
    section.setNode(await source.node(["v"]));
    const label = section.element.querySelector<HTMLElement>(".tdview-preview-heatmap-label");
    expect(label?.hidden).toBe(true);
  });

  it("is nothing without the kernel's cells", async () => {
    const source = new MemoryDataSource(tree);
    const data = await source.preview(["v"], 5);
    expect(renderHeatmap(data)).toBeNull();
  });
});

describe("the heatmap after a theme switch", () => {
  const tree = {
    key: "",
    children: [
      { key: "w", shape: [4, 4], dtype: "float32", data: Array.from({ length: 16 }, (_, i) => i) },
    ],
  };
  const ramp = (section: PreviewSection) =>
    section.element.querySelector<HTMLElement>(".tdview-heatmap-ramp");

  async function drawn(): Promise<PreviewSection> {
    const source = new MemoryDataSource(tree);
    const section = new PreviewSection(source);
    section.element.style.setProperty("--jp-layout-color1", "#ffffff");
    document.body.append(section.element);
    section.setNode(await source.node(["w"]));
    const toggle = section.element.querySelector<HTMLInputElement>(".tdview-preview-heatmap");
    if (!toggle) throw new Error("no heatmap toggle");
    toggle.checked = true;
    section.openPreview();
    await tick();
    return section;
  }

  /** What JupyterLab does once a theme's CSS is in: new variables, then <body>'s marks. */
  async function switchTheme(section: PreviewSection, low: string): Promise<void> {
    section.element.style.setProperty("--jp-layout-color1", low);
    document.body.setAttribute("data-jp-theme-light", "false");
    document.body.setAttribute("data-jp-theme-name", "JupyterLab Dark");
    await tick();
  }

  it("is drawn again with the new theme's colours", async () => {
    const section = await drawn();
    expect(ramp(section)?.style.background).toContain("rgb(255,255,255)");
    await switchTheme(section, "#111111");
    expect(ramp(section)?.style.background).toContain("rgb(17,17,17)");
    section.dispose();
  });

  it("is left alone once its view is disposed (the observer is gone)", async () => {
    const section = await drawn();
    const before = ramp(section);
    section.dispose();
    await switchTheme(section, "#222222");
    expect(ramp(section)).toBe(before);
    expect(before?.style.background).toContain("rgb(255,255,255)");
  });
});
