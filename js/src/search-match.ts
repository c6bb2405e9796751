/**
 * What a search pattern matches: the TypeScript twin of `tdview/index/_match.py`, used by
 * the in-memory data source. Both are checked against the same cases
 * (`tests/search_cases.json`), so the two cannot drift.
 *
 * A node of path `[k1, ..., kn]` has two spellings: its subpath `k1/.../kn` and its
 * state_dict key `k1. ... .kn`. The pattern is trimmed (an empty one matches nothing) and
 * case is ignored (both sides lower-cased).
 *
 * - A glob (a pattern holding `*`, `?` or `[`) matches when it matches, whole, the end of
 *   either spelling from a key boundary: `*.bias`, `layers/*\/norm1/*`, `**\/exp_avg`.
 *   `*` is any run of characters but the separator (`/`, or `.` in the state_dict
 *   spelling), `?` one such character, `[abc]`/`[a-z]`/`[!abc]` one character (never the
 *   separator) of or not of the set, `**` any run with separators, and `**` followed by
 *   the separator also none. A leading `/` anchors the glob at the root.
 * - Any other pattern matches a node whose key contains it, whose subpath ends with it at
 *   a key boundary (when it holds a `/`; empty parts dropped, a leading `/` anchors it at
 *   the root), or whose state_dict key ends with it at a key boundary (when it holds a
 *   `.`; a leading `.` is that boundary).
 *
 * Matches come depth-first in the checkpoint's load order; there is no other ranking.
 */

import type { Path } from "./protocol";

type Token =
  | { kind: "lit"; char: string }
  | { kind: "star" }
  | { kind: "any" }
  | { kind: "one" }
  | { kind: "set"; negated: boolean; ranges: [string, string][] };

const GLOB_CHARS = ["*", "?", "["];

/** The glob's tokens, over code points (as Python's strings are). */
function tokens(glob: string): Token[] {
  const chars = Array.from(glob);
  const out: Token[] = [];
  let i = 0;
  while (i < chars.length) {
    const c = chars[i] as string;
    if (c === "*") {
      if (chars[i + 1] === "*") {
        while (chars[i] === "*") i++;
        out.push({ kind: "any" });
        continue;
      }
      out.push({ kind: "star" });
    } else if (c === "?") {
      out.push({ kind: "one" });
    } else if (c === "[") {
      const set = charSet(chars, i);
      if (set === null) {
        out.push({ kind: "lit", char: c });
      } else {
        out.push({ kind: "set", negated: set.negated, ranges: set.ranges });
        i = set.end;
      }
    } else {
      out.push({ kind: "lit", char: c });
    }
    i++;
  }
  return out;
}

/** The set opened by `[` at `start` (its `]`'s index, negated, ranges), or null. */
function charSet(
  chars: string[],
  start: number,
): { end: number; negated: boolean; ranges: [string, string][] } | null {
  let j = start + 1;
  const negated = chars[j] === "!";
  if (negated) j++;
  const bodyStart = j;
  if (chars[j] === "]") j++;
  while (j < chars.length && chars[j] !== "]") j++;
  if (j >= chars.length) return null;
  const body = chars.slice(bodyStart, j);
  const ranges: [string, string][] = [];
  let k = 0;
  while (k < body.length) {
    const a = body[k] as string;
    if (k + 2 < body.length && body[k + 1] === "-") {
      const b = body[k + 2] as string;
      if ((a.codePointAt(0) ?? 0) <= (b.codePointAt(0) ?? 0)) ranges.push([a, b]);
      k += 3;
    } else {
      ranges.push([a, a]);
      k += 1;
    }
  }
  return { end: j, negated, ranges };
}

const SYNTAX = new Set([..."^$\\.*+?()[]{}|/"]);

/** A character as a regular-expression literal (Unicode mode). */
function literalOf(c: string, inSet = false): string {
  return SYNTAX.has(c) || (inSet && c === "-") ? `\\${c}` : c;
}

/** The regular expression of `toks` over a spelling whose separator is `sep`. */
function body(toks: Token[], sep: string): string {
  const s = literalOf(sep);
  const parts: string[] = [];
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i] as Token;
    if (t.kind === "lit") parts.push(literalOf(t.char));
    else if (t.kind === "star") parts.push(`[^${s}]*`);
    else if (t.kind === "one") parts.push(`[^${s}]`);
    else if (t.kind === "any") {
      const next = toks[i + 1];
      if (next?.kind === "lit" && next.char === sep) {
        parts.push(`(?:.*${s})?`); // `**/`: any levels, none included
        i++;
      } else {
        parts.push(".*");
      }
    } else {
      const ranges = t.ranges
        .map(([a, b]) =>
          a === b ? literalOf(a, true) : `${literalOf(a, true)}-${literalOf(b, true)}`,
        )
        .join("");
      if (t.negated) parts.push(`[^${ranges}${s}]`);
      else parts.push(ranges ? `(?!${s})[${ranges}]` : "(?!)");
    }
  }
  return parts.join("");
}

/** A glob over one spelling, applied to the spelling with a separator in front. */
function globTest(toks: Token[], sep: string, anchored: boolean): RegExp {
  const s = literalOf(sep);
  const start = anchored ? `^${s}` : `(?<=${s})`;
  return new RegExp(`${start}${body(toks, sep)}$`, "su");
}

/** A compiled search pattern: `matcher(path)` says whether the node at `path` matches. */
export type Matcher = ((path: Path) => boolean) & { readonly empty: boolean };

/**
 * Compiles `pattern` (the rules of the module comment).
 *
 * @example
 * compileSearch("linear1.weight")(["model", "layers", "0", "linear1", "weight"]); // true
 */
export function compileSearch(pattern: string): Matcher {
  const text = pattern.trim().toLowerCase();
  const empty = text === "";
  let test: (key: string, slash: string, dot: string) => boolean;
  if (GLOB_CHARS.some((c) => text.includes(c))) {
    const anchored = text.startsWith("/");
    const toks = tokens(text.replace(/^\/+/, ""));
    const bySlash = globTest(toks, "/", anchored);
    const byDot = globTest(toks, ".", anchored);
    test = (_key, slash, dot) => bySlash.test(slash) || byDot.test(dot);
  } else {
    const parts = text.split("/").filter((p) => p !== "");
    const slashTarget = text.includes("/") && parts.length ? `/${parts.join("/")}` : null;
    const slashAnchored = text.startsWith("/");
    const dotTarget = text.includes(".") ? (text.startsWith(".") ? text : `.${text}`) : null;
    test = (key, slash, dot) =>
      key.includes(text) ||
      (slashTarget !== null &&
        (slashAnchored ? slash === slashTarget : slash.endsWith(slashTarget))) ||
      (dotTarget !== null && dot.endsWith(dotTarget));
  }
  const matcher = (path: Path): boolean => {
    if (empty || path.length === 0) return false;
    const lower = path.map((k) => k.toLowerCase());
    return test(lower[lower.length - 1] as string, `/${lower.join("/")}`, `.${lower.join(".")}`);
  };
  return Object.assign(matcher, { empty });
}
