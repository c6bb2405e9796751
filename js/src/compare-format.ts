/**
 * Text of the compare view: a key's mark and verdict, a subtree's counts, the statistics
 * of a leaf pair, a scalar's change (`1000 → 2000`). The words keep to what was compared:
 * two leaves of one dtype and shape whose values were not compared are "same shape and
 * dtype — values not compared", an equal CRC-32 is "CRC equal" (strong evidence, not
 * proof), and only bytes or values compared are "equal".
 */

import type {
  DiffFacts,
  DiffItem,
  DiffRollup,
  DiffStatus,
  Fingerprint,
  Scalar,
  Side,
  ValueStats,
} from "./compare-protocol";
import { formatCount, formatShape, humanBytes } from "./format";
import type { Path } from "./protocol";

/** A key's mark, as `tdview diff` prints it (`!`: a side could not be read). */
export const MARKS: Record<DiffStatus, string> = {
  same: "",
  changed: "~",
  added: "+",
  removed: "-",
  renamed: "R",
};

export const STATUS_WORDS: Record<DiffStatus, string> = {
  same: "same",
  changed: "changed",
  added: "added",
  removed: "removed",
  renamed: "renamed",
};

export const FINGERPRINT_TEXT: Record<Fingerprint, string> = {
  equal: "bytes equal",
  crc_equal: "CRC equal",
  differs: "bytes differ",
};

/** A leaf the same by its shape and dtype alone (its values were not compared). */
export const UNVERIFIED_TEXT = "same shape and dtype — values not compared";
/** The same, in a row (the details and the row's title say it whole). */
export const UNVERIFIED_SHORT = "values not compared";
/** A pickled value the same by its size alone. */
export const UNVERIFIED_PICKLE = "same size — value not compared";

/** What `crc_equal` means, for a title. */
export const CRC_EQUAL_TITLE =
  "Size and CRC-32 are equal on both sides: strong evidence that the bytes agree, not proof. " +
  "Compare values to be sure.";

const CHANGE_WORDS: Record<string, string> = {
  kind: "kind",
  class: "class",
  batch_size: "batch size",
  names: "names",
  dtype: "dtype",
  shape: "shape",
  bytes: "size",
  value: "value",
  content: "content",
};

export function markOf(item: DiffItem): string {
  return item.problem ? "!" : MARKS[item.status];
}

/** The path as the view shows it: "a / b", "(root)" for []. */
export function showPath(path: Path): string {
  return path.length ? path.join(" / ") : "(root)";
}

/** A finite statistic with 4 significant digits ("n/a" when undefined). */
export function statNumber(value: number | null, digits = 4): string {
  if (value === null) return "n/a";
  if (value !== 0 && (Math.abs(value) >= 1e6 || Math.abs(value) < 1e-4)) {
    return value.toExponential(digits - 1).replace(/\.?0+e/, "e");
  }
  return String(Number(value.toPrecision(digits)));
}

/** "12 of 12 elements differ" / "values equal" / "bytes equal" … */
export function valuesVerdict(stats: ValueStats): string {
  if (stats.bytes_only) return stats.equal ? "bytes equal" : "bytes differ";
  if (stats.numel === 0) return "no elements";
  if (!stats.differing) return "values equal";
  return `${formatCount(stats.differing)} of ${formatCount(stats.numel)} elements differ`;
}

/** What a leaf's own comparison found, in a few words (its row's verdict). */
export function verdict(item: DiffItem): string {
  if (item.problem) return "not read";
  switch (item.status) {
    case "added":
    case "removed":
      return STATUS_WORDS[item.status];
    case "renamed":
      return item.renamed_from ? `renamed from ${item.renamed_from.join("/")}` : "renamed";
    case "changed": {
      const [a, b] = item.scalars ?? [null, null];
      if (a !== null && b !== null && a !== b && item.changes.join() === "content") {
        return "value changed";
      }
      const words = item.changes.map((c) => CHANGE_WORDS[c] ?? c);
      if (item.values && !item.values.bytes_only && item.values.differing) {
        return valuesVerdict(item.values);
      }
      return words.length ? `${words.join(", ")} changed` : "changed";
    }
    case "same":
      return sameVerdict(item);
  }
}

/** A "same" key: only as equal as what was compared. */
function sameVerdict(item: DiffItem): string {
  if (item.values) return valuesVerdict(item.values);
  if (item.value_equal !== null) return item.value_equal ? "values equal" : "values differ";
  const [a, b] = item.scalars ?? [null, null];
  if (a !== null && b !== null) return a === b ? "value equal" : "value differs";
  if (item.fingerprint) return FINGERPRINT_TEXT[item.fingerprint];
  if (item.has_children) return "";
  if (item.unverified) return unverifiedText(item);
  const facts = item.b ?? item.a;
  if (facts && Object.hasOwn(facts, "value")) return "same value";
  return facts?.kind === "leaf" ? "same (no elements)" : "same";
}

/** What a key the same by metadata alone says it is (a leaf, or a pickled value). */
export function unverifiedText(item: DiffItem): string {
  return (item.b ?? item.a)?.kind === "leaf" ? UNVERIFIED_TEXT : UNVERIFIED_PICKLE;
}

/** A verdict as a row shows it: "values not compared" for a key the same by its
 * metadata alone, nothing for a scalar whose numbers show the change. */
export function rowVerdict(item: DiffItem): string {
  if (item.unverified && !item.problem) return UNVERIFIED_SHORT;
  const change = scalarChange(item);
  const [a, b] = item.scalars ?? [null, null];
  const onlyContent = item.changes.length === 1 && item.changes[0] === "content";
  if (change && item.status === "changed" && onlyContent && a !== b) return "";
  return verdict(item);
}

/** One number of a scalar, short: integers whole, others to 6 significant digits. */
export function scalarText(value: Scalar | null): string {
  if (value === null) return "—";
  if (typeof value === "number") {
    return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(6)));
  }
  return String(value);
}

/** A small value kept in meta.json as a scalar, or undefined (an object, long text). */
function metaScalar(facts: DiffFacts | null): Scalar | null | undefined {
  if (!facts || !Object.hasOwn(facts, "value")) return undefined;
  const v = facts.value;
  if (typeof v === "number" || typeof v === "boolean") return v;
  if (typeof v === "string" && v.length <= 24) return JSON.stringify(v);
  return undefined;
}

/**
 * A scalar's value inline: `1000 → 2000` when it changed, `1000` when the same, the one
 * side's number when added or removed; "" for a key that is no scalar. The numbers of a
 * one-element leaf (`scalars`, read by the kernel) or a small value kept in meta.json.
 */
export function scalarChange(item: DiffItem): string {
  let a: Scalar | null | undefined;
  let b: Scalar | null | undefined;
  if (item.scalars) [a, b] = item.scalars;
  else {
    a = metaScalar(item.a);
    b = metaScalar(item.b);
    if (a === undefined && b === undefined) return "";
  }
  const hasA = item.a !== null && a !== undefined && a !== null;
  const hasB = item.b !== null && b !== undefined && b !== null;
  if (hasA && hasB && a !== b) return `${scalarText(a ?? null)} → ${scalarText(b ?? null)}`;
  if (hasB) return scalarText(b ?? null);
  return hasA ? scalarText(a ?? null) : "";
}

/** The counts of a subtree's differences: `[mark, count, word]` for each that is not 0. */
export function rollupCounts(r: DiffRollup): [string, number, string][] {
  const counts: [string, number, string][] = [
    ["~", r.changed, "changed"],
    ["+", r.added, "added"],
    ["-", r.removed, "removed"],
    ["R", r.renamed, "renamed"],
    ["!", r.problems, "not read"],
  ];
  return counts.filter(([, n]) => n > 0);
}

/** Differences below a node, its own excluded (what expanding it shows). */
export function differencesBelow(item: DiffItem): number {
  const r = item.rollup;
  if (!r || !item.has_children) return 0;
  const own = (item.status === "same" ? 0 : 1) + (item.problem ? 1 : 0);
  return Math.max(0, r.differences + r.problems - own);
}

/** How the leaves of a rollup that are the same were found the same: `[count, words,
 * title]` each not 0 — compared (bytes or values, or nothing more to compare), by CRC-32
 * alone, by shape and dtype alone. */
export function sameParts(r: DiffRollup): [number, string, string][] {
  const compared = r.same_leaves - r.same_crc - r.same_metadata;
  const parts: [number, string, string][] = [
    [compared, "same", "Leaves compared and the same"],
    [r.same_crc, "CRC equal", CRC_EQUAL_TITLE],
    [
      r.same_metadata,
      UNVERIFIED_TEXT,
      "Same dtype and shape on both sides; their values were not read. Compare values to know.",
    ],
  ];
  return parts.filter(([n]) => n > 0);
}

/** "3 changed, 1 added, 1 removed" (or "no differences"). */
export function rollupText(r: DiffRollup): string {
  const parts = rollupCounts(r).map(([, n, word]) => `${formatCount(n)} ${word}`);
  return parts.length ? parts.join(", ") : "no differences";
}

/** One side's facts of a key in a few words: "float32 [4, 3] · 48 B", "TensorDict batch []". */
export function factsText(facts: DiffFacts | null): string {
  if (!facts) return "—";
  if (facts.kind === "leaf") {
    const shape = facts.shape ? formatShape(facts.shape) : "";
    const bytes = facts.bytes === undefined ? "" : ` · ${humanBytes(facts.bytes)}`;
    return `${facts.dtype ?? "?"} ${facts.nested ? "nested " : ""}${shape}${bytes}`.trim();
  }
  const batch = facts.batch_size ? ` batch ${formatShape(facts.batch_size)}` : "";
  return `${facts.class || facts.kind}${batch}`;
}

/** A JSON value as short text (a non-tensor value kept in meta.json). */
export function valueText(value: unknown, limit = 200): string {
  let text: string;
  try {
    text = typeof value === "string" ? value : (JSON.stringify(value) ?? String(value));
  } catch {
    text = String(value);
  }
  return text.length > limit ? `${text.slice(0, limit)}…` : text;
}

type FieldRow = [label: string, a: string, b: string];

/** The facts of both sides, field by field (rows neither side has are left out). */
export function factRows(a: DiffFacts | null, b: DiffFacts | null): FieldRow[] {
  const both = (get: (f: DiffFacts) => string): [string, string] => [
    a ? get(a) : "—",
    b ? get(b) : "—",
  ];
  const rows: FieldRow[] = [
    ["Kind", ...both((f) => f.kind)],
    ["Class", ...both((f) => f.class)],
    ["Dtype", ...both((f) => f.dtype ?? "")],
    ["Shape", ...both((f) => (f.shape ? formatShape(f.shape) : ""))],
    ["Size", ...both((f) => (f.bytes === undefined ? "" : `${humanBytes(f.bytes)}`))],
    ["Batch size", ...both((f) => (f.batch_size ? formatShape(f.batch_size) : ""))],
    ["Names", ...both((f) => (f.names ? f.names.map((n) => n ?? "None").join(", ") : ""))],
    ["Value", ...both((f) => (Object.hasOwn(f, "value") ? valueText(f.value) : ""))],
    ["Pickled", ...both((f) => (f.pickled ? "yes" : ""))],
  ];
  return rows.filter(([, x, y]) => (x !== "" && x !== "—") || (y !== "" && y !== "—"));
}

/** The value statistics of a leaf pair as label/value pairs. */
export function statsRows(stats: ValueStats): [string, string][] {
  if (stats.bytes_only) return [["Bytes", stats.equal ? "equal" : "differ"]];
  const rows: [string, string][] = [
    ["Differing", `${formatCount(stats.differing)} of ${formatCount(stats.numel)}`],
    ["max |a−b|", statNumber(stats.max_abs)],
    ["mean |a−b|", statNumber(stats.mean_abs)],
    ["‖a−b‖ / ‖a‖", statNumber(stats.rel_l2)],
    ["cosine", statNumber(stats.cosine, 7)],
  ];
  const events: [keyof ValueStats, string][] = [
    ["nan_appeared", "NaN appeared"],
    ["nan_disappeared", "NaN gone"],
    ["inf_appeared", "Inf appeared"],
    ["inf_disappeared", "Inf gone"],
  ];
  for (const [key, label] of events) {
    const n = stats[key] as number;
    if (n) rows.push([label, formatCount(n)]);
  }
  return rows;
}

/** The sides whose real path of a key is not its path in the diff (`layers.0.w` against
 * `layers/0/w`: keys pair across spellings), with that path; a rename's old path is not
 * counted (it says so itself). */
export function spelledPaths(item: DiffItem): [Side, Path][] {
  const found: [Side, Path][] = [];
  const same = (p: Path) => p.length === item.path.length && p.every((k, i) => k === item.path[i]);
  if (item.path_a && !item.renamed_from && !same(item.path_a)) found.push(["a", item.path_a]);
  if (item.path_b && !same(item.path_b)) found.push(["b", item.path_b]);
  return found;
}
