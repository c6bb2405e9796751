import { describe, expect, it } from "vitest";
import type { PreviewStats } from "../src/protocol";
import { shortDtype, shortNumber, tensorSummary } from "../src/tensor-summary";

const stats = (over: Partial<PreviewStats>): PreviewStats => ({
  min: -1,
  max: 1,
  mean: 0,
  std: 0.5,
  nan: 0,
  inf: 0,
  count: 4,
  ...over,
});

describe("shortDtype", () => {
  it.each([
    ["float32", "f32"],
    ["float16", "f16"],
    ["bfloat16", "bf16"],
    ["float64", "f64"],
    ["int64", "i64"],
    ["int8", "i8"],
    ["uint8", "u8"],
    ["uint16", "u16"],
    ["bool", "bool"],
    ["complex64", "c64"],
    ["float8_e4m3fn", "f8_e4m3fn"],
    ["qint8", "qint8"],
  ])("%s → %s", (dtype, short) => {
    expect(shortDtype(dtype)).toBe(short);
  });
});

describe("shortNumber", () => {
  it.each([
    [-0.125, "-0.125"],
    [0.0724, "0.072"],
    [-0.00013, "-1.3e-4"],
    [0.0001, "1e-4"],
    [2.5, "2.5"],
    [1000, "1000"],
    [2_500_000, "2.5e6"],
    [0, "0"],
    [Number.NaN, "nan"],
    [-Infinity, "-inf"],
  ])("%s → %s", (value, text) => {
    expect(shortNumber(value)).toBe(text);
  });
});

describe("tensorSummary", () => {
  it("writes the issue's example", () => {
    const s = stats({ min: -0.125, max: 0.125, mean: -0.00013, std: 0.0722, count: 16384 });
    expect(tensorSummary({ dtype: "float32", shape: [256, 64], bytes: 65536, stats: s })).toBe(
      "f32[256,64] n=16,384 65.5 KB x∈[-0.125, 0.125] μ=-1.3e-4 σ=0.072",
    );
  });

  it("stops after the size while no statistics are known", () => {
    expect(tensorSummary({ dtype: "bfloat16", shape: [8000, 256], bytes: 4_096_000 })).toBe(
      "bf16[8000,256] n=2,048,000 4.10 MB",
    );
  });

  it("flags NaN and infinity after the range of the finite values", () => {
    const s = stats({ min: -2, max: 3, mean: 0.5, std: 1.25, nan: 2, inf: 1, count: 10 });
    expect(tensorSummary({ dtype: "float16", shape: [10], bytes: 20, stats: s })).toBe(
      "f16[10] n=10 20 B x∈[-2, 3] μ=0.5 σ=1.25 nan! inf!",
    );
  });

  it("says all zeros instead of a range", () => {
    const s = stats({ min: 0, max: 0, mean: 0, std: 0, count: 6 });
    expect(tensorSummary({ dtype: "int64", shape: [2, 3], bytes: 48, stats: s })).toBe(
      "i64[2,3] n=6 48 B all zeros",
    );
  });

  it("is not all zeros when the only finite values are zeros beside a NaN", () => {
    const s = stats({ min: 0, max: 0, mean: 0, std: 0, nan: 1, count: 2 });
    expect(tensorSummary({ dtype: "float32", shape: [2], bytes: 8, stats: s })).toBe(
      "f32[2] n=2 8 B x∈[0, 0] μ=0 σ=0 nan!",
    );
  });

  it("gives a scalar's value, a bool's range without mean, an empty tensor's emptiness", () => {
    const one = stats({ min: 1000, max: 1000, mean: 1000, std: null, count: 1 });
    expect(tensorSummary({ dtype: "int64", shape: [], bytes: 8, stats: one })).toBe(
      "i64[] n=1 8 B x=1000",
    );
    const flags = stats({ min: 0, max: 1, mean: null, std: null, nan: null, inf: null });
    expect(tensorSummary({ dtype: "bool", shape: [4], bytes: 4, stats: flags })).toBe(
      "bool[4] n=4 4 B x∈[0, 1]",
    );
    expect(tensorSummary({ dtype: "uint8", shape: [0, 3], bytes: 0, stats: null })).toBe(
      "u8[0,3] n=0 0 B empty",
    );
  });

  it("leaves out a size it does not know", () => {
    expect(tensorSummary({ dtype: "float64", shape: [3], bytes: null })).toBe("f64[3] n=3");
  });
});
