/**
 * A tensor in one line, in the style ML engineers paste into chats (lovely-tensors):
 * `f32[256,64] n=16,384 65.5 KB x∈[-0.125, 0.125] μ=-1.3e-4 σ=0.072`, with `nan!`,
 * `inf!` and `all zeros` flags. Without statistics (before a preview computed them) it
 * stops after the size.
 */

import { formatCount, humanBytes } from "./format";
import type { PreviewStats } from "./protocol";

/** What the line says of a tensor: the leaf's facts, and its statistics once known. */
export interface SummaryInput {
  dtype: string;
  shape: readonly number[];
  /** Bytes of the tensor (null: not known). */
  bytes: number | null;
  /** Statistics of the whole tensor (null: not computed yet). */
  stats?: PreviewStats | null;
}

const PREFIXES: [RegExp, string][] = [
  [/^bfloat/, "bf"],
  [/^float/, "f"],
  [/^complex/, "c"],
  [/^uint/, "u"],
  [/^int/, "i"],
];

/**
 * The dtype's short name: float32 → f32, bfloat16 → bf16, int64 → i64, uint8 → u8,
 * complex64 → c64, float8_e4m3fn → f8_e4m3fn; bool and the rest as they are.
 */
export function shortDtype(dtype: string): string {
  for (const [prefix, short] of PREFIXES) {
    if (prefix.test(dtype)) return dtype.replace(prefix, short);
  }
  return dtype;
}

/** A statistic in few characters: 3 decimals (trailing zeros dropped), or 2 significant
 * digits in e-notation below 0.001 or from 100,000 up: 0.125, 0.072, -1.3e-4, 2.5e+6. */
export function shortNumber(value: number): string {
  if (Number.isNaN(value)) return "nan";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  if (value === 0) return "0";
  const size = Math.abs(value);
  if (size < 1e-3 || size >= 1e5) {
    const [mantissa = "", exponent = ""] = value.toExponential(1).split("e");
    return `${mantissa.replace(/\.0$/, "")}e${exponent.replace("+", "")}`;
  }
  return String(Number(value.toFixed(3)));
}

/** A min or max: whole numbers exactly (every min and max of an integer tensor). */
function extreme(value: number): string {
  return Number.isSafeInteger(value) ? String(value) : shortNumber(value);
}

/** The statistics' part of the line ("" when there are none). */
function statsPart(stats: PreviewStats, numel: number): string[] {
  const parts: string[] = [];
  const { min, max, mean, std } = stats;
  const finite = numel - (stats.nan ?? 0) - (stats.inf ?? 0);
  if (min === 0 && max === 0 && finite === numel) parts.push("all zeros");
  else if (min !== null && max !== null) {
    parts.push(
      min === max && numel === 1 ? `x=${extreme(min)}` : `x∈[${extreme(min)}, ${extreme(max)}]`,
    );
    if (mean !== null && numel > 1) parts.push(`μ=${shortNumber(mean)}`);
    if (std !== null && numel > 1) parts.push(`σ=${shortNumber(std)}`);
  }
  if (stats.nan) parts.push("nan!");
  if (stats.inf) parts.push("inf!");
  return parts;
}

/**
 * The one-line summary of a tensor.
 *
 * @example tensorSummary({ dtype: "float32", shape: [256, 64], bytes: 65536, stats })
 *   === "f32[256,64] n=16,384 65.5 KB x∈[-0.125, 0.125] μ=-1.3e-4 σ=0.072"
 */
export function tensorSummary(input: SummaryInput): string {
  const numel = input.shape.reduce((a, b) => a * b, 1);
  const parts = [`${shortDtype(input.dtype)}[${input.shape.join(",")}]`, `n=${formatCount(numel)}`];
  if (input.bytes !== null) parts.push(humanBytes(input.bytes));
  if (numel === 0) parts.push("empty");
  else if (input.stats) parts.push(...statsPart(input.stats, numel));
  return parts.join(" ");
}
