import { describe, expect, it } from "vitest";
import { type Measure, shapeForms } from "../src/middle-cut";
import { type FitPart, fitRow } from "../src/row-fit";

const chars: Measure = (t) => [...t].length;
const KEY = "decoder.layers.0.self_attn.in_proj_weight";

/** badge, shape, dtype, size: the tree's order of giving way. */
function parts(): { parts: FitPart[]; steps: number[] } {
  const shape = shapeForms([768, 256]);
  return {
    parts: [
      { forms: ["tensor"], measure: chars, pad: 2 },
      { forms: shape, measure: chars },
      { forms: ["float32"], measure: chars },
      { forms: ["786 KB"], measure: chars },
    ],
    steps: [0, 1, 1, 2, 1, 3],
  };
}

describe("fitRow", () => {
  it("shows everything when it fits", () => {
    const { parts: p, steps } = parts();
    const fit = fitRow(KEY, chars, p, steps, 200, 1);
    expect(fit).toEqual({ key: KEY, texts: ["tensor", "[768, 256]", "float32", "786 KB"] });
  });

  it("lets the badge go first, then the shape's last dims, the dtype, the shape, the size", () => {
    const { parts: p, steps } = parts();
    const whole = KEY.length;
    // the key and each annotation with a gap of 1
    const fits = (w: number) => fitRow(KEY, chars, p, steps, w, 1);
    expect(fits(whole + 9 + 11 + 8 + 7).texts).toEqual([
      "tensor",
      "[768, 256]",
      "float32",
      "786 KB",
    ]);
    expect(fits(whole + 11 + 8 + 7).texts).toEqual(["", "[768, 256]", "float32", "786 KB"]);
    expect(fits(whole + 9 + 8 + 7).texts).toEqual(["", "[768, …]", "float32", "786 KB"]);
    expect(fits(whole + 4 + 8 + 7).texts).toEqual(["", "[…]", "float32", "786 KB"]);
    expect(fits(whole + 4 + 7).texts).toEqual(["", "[…]", "", "786 KB"]);
    expect(fits(whole + 7).texts).toEqual(["", "", "", "786 KB"]);
    expect(fits(whole).texts).toEqual(["", "", "", ""]);
    expect(fits(whole).key).toBe(KEY);
  });

  it("cuts the key in the middle only when every annotation has gone", () => {
    const { parts: p, steps } = parts();
    const fit = fitRow(KEY, chars, p, steps, 32, 1);
    expect(fit).toEqual({ key: "decoder.layers.0.…in_proj_weight", texts: ["", "", "", ""] });
  });

  it("never gives a key its room to an annotation: config stays config", () => {
    const fit = fitRow("config", chars, [{ forms: ["= {lr: 0.001}"], measure: chars }], [0], 8, 1);
    expect(fit).toEqual({ key: "config", texts: [""] });
  });

  it("keeps at most maxWidth for a part that cuts itself", () => {
    const value: FitPart = {
      forms: ["= {lr: 0.001, betas: [0.9, 0.999]}"],
      measure: chars,
      maxWidth: 5,
    };
    expect(fitRow("config", chars, [value], [0], 12, 1).texts).toEqual([value.forms[0]]);
    expect(fitRow("config", chars, [value], [0], 11, 1).texts).toEqual([""]);
  });
});
