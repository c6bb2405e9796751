import { describe, expect, it } from "vitest";
import {
  ELLIPSIS,
  estimateMeasure,
  fitShape,
  type Measure,
  middleCut,
  setMiddleCut,
} from "../src/middle-cut";

/** One px a character: widths read as character counts. */
const chars: Measure = (t) => [...t].length;
const KEY = "decoder.layers.0.self_attn.in_proj_weight";

describe("middleCut", () => {
  it("keeps a text that fits", () => {
    expect(middleCut(KEY, KEY.length, chars)).toBe(KEY);
    expect(middleCut("config", 6, chars)).toBe("config");
    expect(middleCut("", 0, chars)).toBe("");
  });

  it("cuts in the middle at dots and keeps the end", () => {
    expect(middleCut(KEY, 32, chars)).toBe("decoder.layers.0.…in_proj_weight");
    expect(middleCut(KEY, 24, chars)).toBe("decoder.…in_proj_weight");
    // a start snapped back to its dot leaves room for a whole part more of the end
    expect(middleCut("decoder.layers.1.norm1.bias", 22, chars)).toBe("decoder.…1.norm1.bias");
    expect(middleCut("decoder.layers.1.multihead_attn.out_proj.weight", 28, chars)).toBe(
      "decoder.…out_proj.weight",
    );
  });

  it("never exceeds the width and keeps the end", () => {
    for (let width = 1; width < KEY.length; width++) {
      const out = middleCut(KEY, width, chars);
      expect(out.length).toBeLessThanOrEqual(width);
      expect(out).toContain(ELLIPSIS);
      const [head = "", tail = ""] = out.split(ELLIPSIS);
      expect(KEY.startsWith(head)).toBe(true);
      expect(KEY.endsWith(tail)).toBe(true);
      expect(tail.length).toBeGreaterThanOrEqual(Math.floor((width - 1) / 3));
    }
  });

  it("cuts a key with no separator plainly, and gives … when nothing else fits", () => {
    expect(middleCut("abcdefghij", 5, chars)).toBe("a…hij");
    expect(middleCut("abcdefghij", 1, chars)).toBe(ELLIPSIS);
    expect(middleCut("abcdefghij", 0, chars)).toBe(ELLIPSIS);
  });

  it("does not split a character outside the basic plane", () => {
    const key = "😀😀😀😀😀😀.weight";
    const out = middleCut(key, 10, chars);
    expect(out).toBe("😀😀😀…weight");
    expect(out).not.toMatch(/[\uD800-\uDFFF](?![\uDC00-\uDFFF])/u);
  });

  it("measures in px with a proportional measure", () => {
    const wide: Measure = (t) => [...t].reduce((w, c) => w + (c === "w" || c === "m" ? 10 : 5), 0);
    const out = middleCut(KEY, 100, wide);
    expect(wide(out)).toBeLessThanOrEqual(100);
    expect(out.endsWith("weight")).toBe(true);
  });
});

describe("fitShape", () => {
  it("drops whole trailing dims, never part of a number", () => {
    expect(fitShape([768, 256], 10, chars)).toBe("[768, 256]");
    expect(fitShape([768, 256], 9, chars)).toBe("[768, …]");
    expect(fitShape([768, 256], 8, chars)).toBe("[768, …]");
    expect(fitShape([768, 256], 7, chars)).toBe("[…]");
    expect(fitShape([768, 256], 2, chars)).toBe("");
    expect(fitShape([], 2, chars)).toBe("[]");
    expect(fitShape([50000, 3, 84, 84], 14, chars)).toBe("[50000, 3, …]");
  });
});

describe("estimateMeasure and setMiddleCut", () => {
  it("estimates 0.6 em a character", () => {
    expect(estimateMeasure(10)("abcd")).toBe(24);
  });

  it("shows the cut text and the whole one as a tooltip", () => {
    const el = {
      textContent: "",
      title: "",
      removeAttribute(this: { title: string }) {
        this.title = "";
      },
    };
    const shown = setMiddleCut(el as unknown as HTMLElement, KEY, 32, chars);
    expect(shown).toBe("decoder.layers.0.…in_proj_weight");
    expect(el.textContent).toBe(shown);
    expect(el.title).toBe(KEY);
    setMiddleCut(el as unknown as HTMLElement, "config", 32, chars);
    expect(el.textContent).toBe("config");
    expect(el.title).toBe("");
  });
});
