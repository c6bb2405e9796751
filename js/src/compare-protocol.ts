/**
 * The compare view's part of protocol v1 (`TDView(a, compare=b)`): the TypeScript mirror
 * of `tdview/protocol/_diff.py`, `_diff_params.py` and `_compare.py`. protocol.ts merges
 * these methods into `Methods` and its decoders.
 *
 * - `diff_children` `{path, offset, limit, only_changed?}` → `DiffPage`: a page of the
 *   keys of the union below `path` (`only_changed`: those that differ or hold a
 *   difference below them);
 * - `diff_node` `{path}` → `DiffItem` with its subtree's `rollup` (a leaf's too);
 * - `diff_refine` `{path, level, rtol?, atol?, allow_pickle?}` → `DiffSummary`: the subtree
 *   compared again at `level` (progress: bytes read; cancellable);
 * - `diff_preview` `{path, rows}` → `{path, a, b}`: a `PreviewResult` of each side (null
 *   where the side lacks the leaf), buffers numbered across both;
 * - `diff_load` `{side, path, device, mode, allow_pickle, variable, replace?}` → `LoadResult`: a load
 *   from one side's checkpoint (`path` is that side's own key).
 *
 * Paths of the other methods are paths of the diff, relative to the compared roots (the
 * new path of a renamed key; the old one is `renamed_from`). The synced `compare` trait
 * holds a `CompareState`.
 *
 * A fingerprint "crc_equal" says the size and CRC-32 agree: strong evidence, never proof,
 * and the view says "CRC equal", never "equal".
 */

import { loadFields, withReplace } from "./load-params";
import type { LoadParams, LoadResult, Path, PreviewResult } from "./protocol";
import {
  array,
  bool,
  count,
  type Decoder,
  isPlainObject,
  literal,
  nullable,
  num,
  object,
  pair,
  ShapeError,
  str,
  tryDecode,
  unknownValue,
} from "./validate";

export const DIFF_METHODS = [
  "diff_children",
  "diff_node",
  "diff_refine",
  "diff_preview",
  "diff_load",
] as const;

/** What a subtree can be compared again by. */
export const DIFF_LEVELS = ["metadata", "fingerprint", "values"] as const;
export type DiffLevel = (typeof DIFF_LEVELS)[number];
/** A diff's level: "mixed" once a subtree was compared at another level. */
export type SummaryLevel = DiffLevel | "mixed";

export const DIFF_STATUSES = ["same", "changed", "added", "removed", "renamed"] as const;
export type DiffStatus = (typeof DIFF_STATUSES)[number];

/** "equal": bytes compared; "crc_equal": size and CRC-32 equal (not proof); "differs". */
export const FINGERPRINTS = ["equal", "crc_equal", "differs"] as const;
export type Fingerprint = (typeof FINGERPRINTS)[number];

export const SIDES = ["a", "b"] as const;
export type Side = (typeof SIDES)[number];

/** What the metadata says of one side of a key (keys a kind lacks are left out). */
export interface DiffFacts {
  kind: string;
  class: string;
  dtype?: string;
  shape?: number[];
  nested?: boolean;
  bytes?: number;
  batch_size?: number[];
  names?: (string | null)[];
  /** A non-tensor value kept in meta.json (free-form JSON). */
  value?: unknown;
  pickled?: boolean;
}

/** Element-wise comparison of a leaf pair in float64 (null: undefined, e.g. no finite
 * position or a zero norm). */
export interface ValueStats {
  numel: number;
  equal: boolean;
  differing: number | null;
  max_abs: number | null;
  mean_abs: number | null;
  rel_l2: number | null;
  cosine: number | null;
  nan_a: number;
  nan_b: number;
  nan_appeared: number;
  nan_disappeared: number;
  inf_a: number;
  inf_b: number;
  inf_appeared: number;
  inf_disappeared: number;
  /** Only `equal` is known (a dtype without numbers). */
  bytes_only: boolean;
}

/** Totals of the rows at and below a path. */
export interface DiffRollup {
  same: number;
  changed: number;
  added: number;
  removed: number;
  renamed: number;
  problems: number;
  leaves: number;
  bytes_changed: number;
  bytes_added: number;
  bytes_removed: number;
  elements_changed: number;
  /** changed + added + removed + renamed. */
  differences: number;
  /** The leaves among `same`. */
  same_leaves: number;
  /** Of `same_leaves`: those the same by shape and dtype alone (values not compared). */
  same_metadata: number;
  /** Of `same_leaves`: those the same by size and CRC-32 alone (strong evidence, not proof). */
  same_crc: number;
}

/** A number of a one-element leaf (non-finite floats as "NaN", "Infinity", "-Infinity"). */
export type Scalar = number | string | boolean;

export interface DiffItem {
  key: string;
  path: Path;
  status: DiffStatus;
  /** "kind", "class", "batch_size", "names", "dtype", "shape", "bytes", "value", "content". */
  changes: string[];
  renamed_from: Path | null;
  /** Each side's real path of the key (null where the side has no node for it): keys pair
   * across spellings, `layers.0.w` in a against `layers/0/w` in b. */
  path_a: Path | null;
  path_b: Path | null;
  kind: string | null;
  a: DiffFacts | null;
  b: DiffFacts | null;
  fingerprint: Fingerprint | null;
  values: ValueStats | null;
  /** Two pickled values compared as values (null: not compared). */
  value_equal: boolean | null;
  note: string | null;
  problem: string | null;
  has_children: boolean;
  /** Null for a leaf in a page (`diff_node` gives it for every key). */
  rollup: DiffRollup | null;
  /** The same by its metadata alone: its values (or bytes) were not compared. */
  unverified: boolean;
  /** `[a, b]`: the number a one-element leaf holds on each side (null on a side without
   * one); null for other keys. */
  scalars: [Scalar | null, Scalar | null] | null;
}

export interface DiffPage {
  path: Path;
  offset: number;
  total: number;
  items: DiffItem[];
}

export interface DiffSummary {
  a: string;
  b: string;
  subpath_a: Path;
  subpath_b: Path;
  level: SummaryLevel;
  rtol: number;
  atol: number;
  equal: boolean;
  summary: DiffRollup;
}

export interface DiffPreviewResult {
  path: Path;
  a: PreviewResult | null;
  b: PreviewResult | null;
}

/** The `compare` trait: the sources as the user gave them, the summary, the root. */
export interface CompareState {
  source_a: string;
  source_b: string;
  summary: DiffSummary;
  root: DiffItem;
}

export interface DiffChildrenParams {
  path: Path;
  offset: number;
  limit: number;
  only_changed?: boolean;
}
export interface DiffNodeParams {
  path: Path;
}
export interface DiffRefineParams {
  path: Path;
  level: DiffLevel;
  rtol?: number;
  atol?: number;
  allow_pickle?: boolean;
}
export interface DiffPreviewParams {
  path: Path;
  rows: number;
}
export interface DiffLoadParams extends LoadParams {
  side: Side;
}

export interface DiffMethods {
  diff_children: { params: DiffChildrenParams; result: DiffPage };
  diff_node: { params: DiffNodeParams; result: DiffItem };
  diff_refine: { params: DiffRefineParams; result: DiffSummary };
  diff_preview: { params: DiffPreviewParams; result: DiffPreviewResult };
  diff_load: { params: DiffLoadParams; result: LoadResult };
}
type DiffMethod = keyof DiffMethods;

// ---------------------------------------------------------------- decoders

const path = array(str);
const shape = array(count);
const stat = nullable(num);

/** Facts: `kind` and `class` always; a leaf's `dtype`, `shape` and `bytes` too; the other
 * keys when the side has them. */
export const decodeFacts: Decoder<DiffFacts> = (v, at) => {
  const facts: DiffFacts = object({ kind: str, class: str })(v, at);
  const raw = v as Record<string, unknown>;
  const leaf = facts.kind === "leaf";
  const take = <K extends keyof DiffFacts>(
    key: K,
    decode: Decoder<Exclude<DiffFacts[K], undefined>>,
  ) => {
    if (Object.hasOwn(raw, key)) facts[key] = decode(raw[key], `${at}.${key}`);
    else if (leaf && (key === "dtype" || key === "shape" || key === "bytes")) {
      throw new ShapeError(`${at}.${key}`, "a value (a leaf has one)", undefined);
    }
  };
  take("dtype", str);
  take("shape", shape);
  take("nested", bool);
  take("bytes", count);
  take("batch_size", array(count));
  take("names", array(nullable(str)));
  take("value", unknownValue);
  take("pickled", bool);
  return facts;
};

export const decodeValueStats: Decoder<ValueStats> = object({
  numel: count,
  equal: bool,
  differing: nullable(count),
  max_abs: stat,
  mean_abs: stat,
  rel_l2: stat,
  cosine: stat,
  nan_a: count,
  nan_b: count,
  nan_appeared: count,
  nan_disappeared: count,
  inf_a: count,
  inf_b: count,
  inf_appeared: count,
  inf_disappeared: count,
  bytes_only: bool,
});

export const decodeDiffRollup: Decoder<DiffRollup> = object({
  same: count,
  changed: count,
  added: count,
  removed: count,
  renamed: count,
  problems: count,
  leaves: count,
  bytes_changed: count,
  bytes_added: count,
  bytes_removed: count,
  elements_changed: count,
  differences: count,
  same_leaves: count,
  same_metadata: count,
  same_crc: count,
});

const scalar: Decoder<Scalar> = (v, at) => {
  if (typeof v === "boolean" || typeof v === "string") return v;
  return num(v, at);
};

export const decodeDiffItem: Decoder<DiffItem> = object({
  key: str,
  path,
  status: literal(...DIFF_STATUSES),
  changes: array(str),
  renamed_from: nullable(path),
  path_a: nullable(path),
  path_b: nullable(path),
  kind: nullable(str),
  a: nullable(decodeFacts),
  b: nullable(decodeFacts),
  fingerprint: nullable(literal(...FINGERPRINTS)),
  values: nullable(decodeValueStats),
  value_equal: nullable(bool),
  note: nullable(str),
  problem: nullable(str),
  has_children: bool,
  rollup: nullable(decodeDiffRollup),
  unverified: bool,
  scalars: nullable(pair(nullable(scalar), nullable(scalar))),
});

export const decodeDiffSummary: Decoder<DiffSummary> = object({
  a: str,
  b: str,
  subpath_a: path,
  subpath_b: path,
  level: literal(...DIFF_LEVELS, "mixed"),
  rtol: num,
  atol: num,
  equal: bool,
  summary: decodeDiffRollup,
});

export const decodeCompareState: Decoder<CompareState> = object({
  source_a: str,
  source_b: str,
  summary: decodeDiffSummary,
  root: decodeDiffItem,
});

/** The `compare` trait; null when it is missing, null or malformed. */
export function parseCompareState(value: unknown): CompareState | null {
  return value === null || value === undefined ? null : tryDecode(decodeCompareState, value);
}

/** A tolerance: finite and non-negative. */
const tolerance: Decoder<number> = (v, at) => {
  const n = num(v, at);
  if (n < 0) throw new ShapeError(at, "a non-negative number", v);
  return n;
};

/** `decode`, with the optional keys of `optional` checked and kept when present. */
function withOptional<T extends object>(
  decode: Decoder<T>,
  optional: Record<string, Decoder<unknown>>,
): Decoder<T> {
  return (v, at) => {
    const out = decode(v, at) as Record<string, unknown>;
    if (!isPlainObject(v)) return out as T;
    for (const [key, check] of Object.entries(optional)) {
      if (Object.hasOwn(v, key)) out[key] = check(v[key], `${at}.${key}`);
    }
    return out as T;
  };
}

export const diffParamDecoders: { [M in DiffMethod]: Decoder<DiffMethods[M]["params"]> } = {
  diff_children: withOptional(object({ path, offset: count, limit: count }), {
    only_changed: bool,
  }),
  diff_node: object({ path }),
  diff_refine: withOptional(object({ path, level: literal(...DIFF_LEVELS) }), {
    rtol: tolerance,
    atol: tolerance,
    allow_pickle: bool,
  }),
  diff_preview: object({ path, rows: count }),
  diff_load: (v, at) =>
    withReplace(v, at, object({ side: literal(...SIDES), ...loadFields })(v, at)),
};

/** The result decoders; `preview` and `load` are protocol.ts's (given lazily). */
export function diffResultDecoders(
  preview: Decoder<PreviewResult>,
  load: Decoder<LoadResult>,
): { [M in DiffMethod]: Decoder<DiffMethods[M]["result"]> } {
  return {
    diff_children: object({ path, offset: count, total: count, items: array(decodeDiffItem) }),
    diff_node: decodeDiffItem,
    diff_refine: decodeDiffSummary,
    diff_preview: object({ path, a: nullable(preview), b: nullable(preview) }),
    diff_load: load,
  };
}
