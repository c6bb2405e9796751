/**
 * The index expression of a preview (`[50000:50020, :8]`): the TypeScript twin of
 * `tdview/protocol/_selection.py`, checked against the same cases
 * (`tests/preview_index_cases.json`). Parsed, never evaluated:
 *
 *     index  := "[" parts "]" | parts
 *     parts  := (part ("," part)* ","?)?          -- at most 64 parts
 *     part   := int | [int] ":" [int] [":" [int]] | "..."
 *     int    := ["+" | "-"] digit{1,19}          -- ASCII digits, |value| < 2**63
 *
 * One part per dim from dim 0 (dims without one are shown whole); one `...` at most
 * stands for the dims the other parts leave (the parts after it index the last dims); a
 * slice's step is at least 1 and its bounds are clipped as Python clips them; an integer
 * picks one position and drops its dim (negative: from the end), and past the dim's size
 * it is an error naming the part and the leaf's shape, as is an index with more parts
 * than the leaf has dims.
 */

import type { PreviewDim } from "./protocol";

export const MAX_INDEX_TEXT = 256;
export const MAX_INDEX_PARTS = 64;

/** An integer, `[start, stop, step]` with null for an omitted bound, or "..." (an
 * ellipsis). */
export type IndexPart = number | [number | null, number | null, number | null] | "...";

/** The index text does not follow the grammar (the kernel's `RequestError`). */
export class IndexSyntaxError extends Error {
  override name = "IndexSyntaxError";
}

/** The index does not fit the leaf (the kernel's `PreviewIndexError`). */
export class PreviewIndexError extends Error {
  override name = "PreviewIndexError";
}

const INT = "[+-]?[0-9]{1,19}";
/** White space an index may hold: ASCII, as the kernel takes it. */
const S = "[ \\t\\n\\r\\f\\v]*";
const DOTS = new RegExp(`^${S}\\.\\.\\.${S}$`);
const ONE = new RegExp(`^${S}(${INT})${S}$`);
const SLICE = new RegExp(`^${S}(${INT})?${S}:${S}(${INT})?${S}(?::${S}(${INT})?${S})?$`);
const LIMIT = 2n ** 63n;

function integer(text: string | undefined, where: string): number | null {
  if (text === undefined) return null;
  const value = BigInt(text);
  if (value <= -LIMIT || value >= LIMIT) {
    throw new IndexSyntaxError(`${where}: ${text} is out of range (below 2**63)`);
  }
  return Number(value);
}

/** Python's `str.strip()` of the white space an index may hold. */
function strip(text: string): string {
  return text.replace(/^[ \t\n\r\f\v]+|[ \t\n\r\f\v]+$/g, "");
}

/** The parts of an index expression; throws `IndexSyntaxError` naming the part. */
export function parseIndex(text: string): IndexPart[] {
  const where = "index";
  if (text.length > MAX_INDEX_TEXT) {
    throw new IndexSyntaxError(`${where}: longer than ${MAX_INDEX_TEXT} characters`);
  }
  let body = strip(text);
  if (body.startsWith("[")) {
    if (!body.endsWith("]")) throw new IndexSyntaxError(`${where}: a [ that no ] closes`);
    body = body.slice(1, -1);
  } else if (body.endsWith("]")) {
    throw new IndexSyntaxError(`${where}: a ] that no [ opens`);
  }
  if (strip(body) === "") return [];
  const pieces = body.split(",");
  if (pieces.length > 1 && strip(pieces[pieces.length - 1] as string) === "") pieces.pop();
  if (pieces.length > MAX_INDEX_PARTS) {
    throw new IndexSyntaxError(`${where}: more than ${MAX_INDEX_PARTS} parts`);
  }
  const parts = pieces.map((piece, i) => part(piece, `${where} part ${i}`));
  if (parts.filter((p) => p === "...").length > 1) {
    throw new IndexSyntaxError(`${where}: ${JSON.stringify(strip(text))} has more than one '...'`);
  }
  return parts;
}

function part(piece: string, where: string): IndexPart {
  if (DOTS.test(piece)) return "...";
  const one = ONE.exec(piece);
  if (one) return integer(one[1], where) as number;
  const found = SLICE.exec(piece);
  if (!found) {
    throw new IndexSyntaxError(
      `${where}: ${JSON.stringify(strip(piece))} is not an integer, a slice or '...'`,
    );
  }
  const [start, stop, step] = [found[1], found[2], found[3]].map((t) => integer(t, where));
  if (step !== null && step !== undefined && step < 1) {
    throw new IndexSyntaxError(`${where}: the step ${step} must be at least 1`);
  }
  return [start ?? null, stop ?? null, step ?? null];
}

/** Python's `slice(start, stop, step).indices(size)` for a step of at least 1. */
function indices(start: number | null, stop: number | null, step: number, size: number) {
  const clip = (v: number | null, fallback: number) => {
    if (v === null) return fallback;
    const at = v < 0 ? v + size : v;
    return Math.min(Math.max(at, 0), size);
  };
  return [clip(start, 0), clip(stop, size), step] as const;
}

/** A part as it is written (`1:8`, `::2`, `...`). */
function partText(p: IndexPart): string {
  if (p === "..." || typeof p === "number") return String(p);
  const [start, stop, step] = p.map((v) => (v === null ? "" : String(v)));
  return `${start}:${stop}${step ? `:${step}` : ""}`;
}

/** `[which part, the part]` for each of `ndim` dims: a "..." stands for the dims the
 * other parts leave (a whole slice each). */
function perDim(parts: IndexPart[], ndim: number): [number, IndexPart][] {
  const whole: IndexPart = [null, null, null];
  const at = parts.indexOf("...");
  if (at < 0) return Array.from({ length: ndim }, (_, d) => [d, parts[d] ?? whole]);
  const before = parts.slice(0, at);
  const after = parts.slice(at + 1);
  const fill = ndim - before.length - after.length;
  return [
    ...before.map((p, i) => [i, p] as [number, IndexPart]),
    ...Array.from({ length: fill }, () => [at, whole] as [number, IndexPart]),
    ...after.map((p, i) => [at + 1 + i, p] as [number, IndexPart]),
  ];
}

/** What `parts` show of a leaf of `shape`, per dim; throws `PreviewIndexError` naming
 * the part and the leaf's shape (the kernel's words). */
export function selectIndex(parts: IndexPart[], shape: readonly number[]): PreviewDim[] {
  const written = `[${parts.map(partText).join(", ")}]`;
  const named = parts.filter((p) => p !== "...").length;
  if (named > shape.length) {
    throw new PreviewIndexError(
      `${written} has ${named} parts but the leaf has ${shape.length} ` +
        `${shape.length === 1 ? "dim" : "dims"}: its shape is [${shape.join(", ")}]`,
    );
  }
  return perDim(parts, shape.length).map(([i, p], d) => {
    const size = shape[d] as number;
    if (p === "...") throw new PreviewIndexError("unreachable");
    if (typeof p === "number") {
      const at = p < 0 ? p + size : p;
      if (at < 0 || at >= size) {
        throw new PreviewIndexError(
          `part ${i} of ${written}, ${p}, is out of range for dim ${d} of size ${size} ` +
            `(from ${-size} to ${size - 1}): the leaf's shape is [${shape.join(", ")}]`,
        );
      }
      return { start: at, stop: at + 1, step: 1, kept: false };
    }
    const [start, stop, step] = indices(p[0], p[1], p[2] ?? 1, size);
    return { start, stop: Math.max(stop, start), step, kept: true };
  });
}

/** The number of positions a dim shows. */
export function dimSize(dim: PreviewDim): number {
  return Math.max(0, Math.ceil((dim.stop - dim.start) / dim.step));
}

/** The index `dims` show, written back (`[50000:50020, 0:8]`), as the kernel writes it. */
export function indexText(dims: readonly PreviewDim[]): string {
  const parts = dims.map((d) =>
    d.kept ? `${d.start}:${d.stop}${d.step !== 1 ? `:${d.step}` : ""}` : String(d.start),
  );
  return `[${parts.join(", ")}]`;
}

/** An index that fits a leaf of `shape`, for the index field's placeholder: the middle
 * 20 rows of a vector, 20 rows and 8 columns of a matrix, the first position of dim 0
 * and 4 of the last dim of a wider leaf (with `...`); "" for a scalar. */
export function exampleIndex(shape: readonly number[]): string {
  const [first = 0] = shape;
  const last = shape[shape.length - 1] ?? 0;
  if (shape.length === 0 || shape.some((n) => n === 0)) return "";
  const from = Math.floor(first / 2);
  const rows = from + Math.min(20, first - from);
  if (shape.length === 1) return `[${from}:${rows}]`;
  if (shape.length === 2) return `[${from}:${rows}, :${Math.min(8, last)}]`;
  return `[${Math.min(1, first - 1)}, ..., :${Math.min(4, last)}]`;
}
