import { describe, expect, it } from "vitest";
import { inlineText } from "../src/inline-values";

describe("inlineText", () => {
  it("writes a value as a short line, cut with an ellipsis", () => {
    expect(inlineText("tiny")).toBe('"tiny"');
    expect(inlineText(1200)).toBe("1200");
    expect(inlineText(null)).toBe("None");
    expect(inlineText({ a: { b: { c: 1 } } })).toBe("{a: {b: {…}}}");
    const long = inlineText({ text: "x".repeat(100) });
    expect(long).toHaveLength(60);
    expect(long.endsWith("…")).toBe(true);
  });
});
