// @vitest-environment happy-dom
import { describe, expect, it } from "vitest";
import { parseTolerance, ToleranceFields, toleranceText } from "../src/compare-tolerance";

describe("parseTolerance", () => {
  it("takes empty as 0 and decimal or exponent forms", () => {
    expect(parseTolerance("")).toBe(0);
    expect(parseTolerance("  ")).toBe(0);
    expect(parseTolerance("1e-5")).toBe(1e-5);
    expect(parseTolerance("0.001")).toBe(0.001);
    expect(parseTolerance(".5")).toBe(0.5);
    expect(parseTolerance("3.")).toBe(3);
    expect(parseTolerance("+2E3")).toBe(2000);
  });

  it("refuses negatives, words, hex and infinities, naming the text", () => {
    for (const text of ["-1", "abc", "0x10", "Infinity", "1e", "1e-5x", "NaN", "1,5"]) {
      const found = parseTolerance(text);
      expect(typeof found).toBe("object");
      expect((found as { error: string }).error).toContain(JSON.stringify(text.trim()));
    }
    expect(parseTolerance("1e400")).toEqual({ error: "too large: 1e400" });
  });

  it("writes 0 as an empty field", () => {
    expect(toleranceText(0)).toBe("");
    expect(toleranceText(1e-6)).toBe("0.000001");
  });
});

describe("ToleranceFields", () => {
  it("starts from the comparison's tolerances and reads what is typed", () => {
    const fields = new ToleranceFields({ rtol: 1e-5, atol: 0 });
    const [rtol, atol] = Array.from(fields.element.querySelectorAll("input"));
    if (!rtol || !atol) throw new Error("no tolerance fields");
    expect(rtol.value).toBe("0.00001");
    expect(atol.value).toBe("");
    atol.value = "0.5";
    atol.dispatchEvent(new Event("input"));
    expect(fields.values()).toEqual({ rtol: 1e-5, atol: 0.5 });
  });

  it("marks a bad field and says which one", () => {
    const fields = new ToleranceFields({ rtol: 0, atol: 0 });
    const atol = fields.element.querySelector<HTMLInputElement>(".tdview-atol");
    if (!atol) throw new Error("no atol field");
    atol.value = "-3";
    atol.dispatchEvent(new Event("input"));
    expect(atol.getAttribute("aria-invalid")).toBe("true");
    expect(fields.values()).toEqual({ error: 'atol: not a number ≥ 0: "-3"' });
    fields.disabled = true;
    expect(atol.disabled).toBe(true);
  });
});
