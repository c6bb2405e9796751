/**
 * The index expression of a preview (`[50000:50020, :8]`): the TypeScript twin of
 * `tdview/protocol/_selection.py`, checked against the same cases
 * (`tests/preview_index_cases.json`). Parsed, never evaluated:
 *
 *     index  := "[" parts "]" | parts
 *     parts  := (part ("," part)* ","?)?          -- at most 64 parts
 *     part   := int | [int] ":" [int] [":" [int]]
 *     int    := ["+" | "-"] digit{1,19}          -- ASCII digits, |value| < 2**63
 *
 * One part per dim from dim 0 (dims without one are shown whole); a slice's step is at
 * least 1 and its bounds are clipped as Python clips them; an integer picks one position
 * and drops its dim, and past the dim's size it is an error, as is an index with more
 * parts than the leaf has dims.
 */

import type { PreviewDim } from "./protocol";

export const MAX_INDEX_TEXT = 256;
export const MAX_INDEX_PARTS = 64;

/** An integer, or `[start, stop, step]` with null for an omitted bound. */
export type IndexPart = number | [number | null, number | null, number | null];

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
  return pieces.map((piece, i) => part(piece, `${where} part ${i}`));
}

function part(piece: string, where: string): IndexPart {
  const one = ONE.exec(piece);
  if (one) return integer(one[1], where) as number;
  const found = SLICE.exec(piece);
  if (!found) {
    throw new IndexSyntaxError(
      `${where}: ${JSON.stringify(strip(piece))} is not an integer or a slice`,
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

/** What `parts` show of a leaf of `shape`, per dim; throws `PreviewIndexError`. */
export function selectIndex(parts: IndexPart[], shape: readonly number[]): PreviewDim[] {
  if (parts.length > shape.length) {
    throw new PreviewIndexError(
      `the index has ${parts.length} parts but the leaf has ${shape.length} dims`,
    );
  }
  return shape.map((size, d) => {
    const p = parts[d] ?? [null, null, null];
    if (typeof p === "number") {
      const at = p < 0 ? p + size : p;
      if (at < 0 || at >= size) {
        throw new PreviewIndexError(`index ${p} is out of range for dim ${d} of size ${size}`);
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
