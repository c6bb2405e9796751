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
 *
 * What users paste is read first (`readPattern`, the twin of `tdview/index/_pasted.py`):
 * a key tuple `("model", "layers", "0")` or a bracket form `state_dict['layers.0.w']`
 * (the name before `[` is a variable) is a key path, matched whole: a node matches when
 * its state_dict key ends with the keys joined by `.` at a key boundary. The `module.`
 * (DistributedDataParallel) and `_orig_mod.` (torch.compile) prefixes are dropped from
 * the start of any pattern. `notes` say what the reading did.
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

// ---------------------------------------------------------------- pasted forms

const STRING = String.raw`'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"`;
const WS = "[ \\t\\r\\n]*";
const ITEMS = `${WS}(?:${STRING})(?:${WS},${WS}(?:${STRING}))*${WS},?${WS}`;
const TUPLE = new RegExp(String.raw`^(?:\(${ITEMS}\)|\[${ITEMS}\])$`, "s");
const NAME = "[A-Za-z_][A-Za-z0-9_]*";
const SUBSCRIPT = String.raw`${WS}\[${WS}(?:${STRING}|[0-9]+)${WS}\]`;
const BRACKETS = new RegExp(String.raw`^(${NAME}(?:\.${NAME})*)((?:${SUBSCRIPT})+)$`, "s");
const PART = new RegExp(`${STRING}|[0-9]+`, "gs");
const ESCAPE = /\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)/gs;
const SIMPLE: Record<string, string> = {
  n: "\n",
  t: "\t",
  r: "\r",
  "0": "\0",
  "\\": "\\",
  "'": "'",
  '"': '"',
};
/** Prefixes of parameter names added by PyTorch wrappers, and who adds them. */
export const PREFIXES: Record<string, string> = {
  module: "DistributedDataParallel",
  _orig_mod: "torch.compile",
};
const PREFIX = /^(module|_orig_mod)[./]/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** A pattern as read: `text` for the rules, `keys` (a key path's keys joined by `.`,
 * matched whole) or null, and `notes` for people. */
export interface Reading {
  text: string;
  keys: string | null;
  notes: string[];
}

/** The text of a string literal token (a run of digits: itself, an index). */
function literal(token: string): string {
  if (token[0] !== "'" && token[0] !== '"') return token;
  const text = token.slice(1, -1).replace(ESCAPE, (whole, code: string) => {
    if ("xuU".includes(code[0] as string) && code.length > 1) {
      const point = Number.parseInt(code.slice(1), 16);
      if (point <= 0x10ffff) return String.fromCodePoint(point);
    }
    return SIMPLE[code] ?? whole; // an unknown escape keeps its backslash
  });
  return text.replace(LONE_SURROGATE, "\ufffd"); // as Python's decode does
}

function keyPath(text: string): [string[], string] | null {
  if (TUPLE.test(text)) {
    const keys = Array.from(text.slice(1, -1).matchAll(PART), (m) => literal(m[0]));
    return [keys, `read as the key ${keys.join("/")}`];
  }
  const found = BRACKETS.exec(text);
  if (found) {
    const keys = Array.from((found[2] as string).matchAll(PART), (m) => literal(m[0]));
    return [keys, `read as the key ${keys.join("/")} (${found[1]} is a variable)`];
  }
  return null;
}

function dropPrefixes(text: string): [string, string[]] {
  const anchor = text.startsWith("/") ? "/" : "";
  let body = text.slice(anchor.length);
  const dropped: string[] = [];
  for (let found = PREFIX.exec(body); found; found = PREFIX.exec(body)) {
    const rest = body.slice(found[0].length);
    if (rest.replace(/^[./]+|[./]+$/g, "") === "") break;
    body = rest;
    if (!dropped.includes(found[1] as string)) dropped.push(found[1] as string);
  }
  return [anchor + body, dropped];
}

/**
 * What `pattern` asks for: a pasted key tuple or bracket form read as a key path, the
 * prefixes of wrapped models dropped (`tdview/index/_pasted.py`'s `read_pattern`).
 *
 * @example readPattern("module.layers.0.weight").text === "layers.0.weight"
 */
export function readPattern(pattern: string): Reading {
  let text = pattern.trim();
  const notes: string[] = [];
  const path = keyPath(text);
  if (path) {
    text = path[0].join(".");
    notes.push(path[1]);
  }
  const [rest, dropped] = dropPrefixes(text);
  for (const name of dropped) notes.push(`matched without the ${name}. prefix (${PREFIXES[name]})`);
  return { text: rest, keys: path ? rest : null, notes };
}

// ---------------------------------------------------------------- the matcher

/** A compiled search pattern: `matcher(path)` says whether the node at `path` matches;
 * `notes` say how the pattern was read. */
export type Matcher = ((path: Path) => boolean) & {
  readonly empty: boolean;
  readonly notes: readonly string[];
};

/**
 * Compiles `pattern` (the rules of the module comment).
 *
 * @example
 * compileSearch("linear1.weight")(["model", "layers", "0", "linear1", "weight"]); // true
 */
export function compileSearch(pattern: string): Matcher {
  const reading = readPattern(pattern);
  const text = (reading.keys ?? reading.text.trim()).toLowerCase();
  const empty = text === "";
  let test: (key: string, slash: string, dot: string) => boolean;
  if (reading.keys !== null) {
    const target = `.${text}`; // its state_dict spelling's end, nothing else
    test = (_key, _slash, dot) => dot.endsWith(target);
  } else if (GLOB_CHARS.some((c) => text.includes(c))) {
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
  return Object.assign(matcher, { empty, notes: reading.notes });
}
