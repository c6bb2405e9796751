/**
 * Python source text built in the browser: string literals, nested-key tuples,
 * identifier checks, and the `tdview.load_memmap(...)` line of a load.
 *
 * `loadCode` mirrors `tdview.protocol._load.load_code` character for character, so the
 * code shown before a load is the code the kernel returns after it.
 */

import type { MemberInfo, Mode, Path } from "./protocol";

/**
 * A Python string literal, as Python's `json.dumps` writes it (ASCII only).
 *
 * @example pyString('a"b') === '"a\\"b"'
 */
export function pyString(text: string): string {
  return JSON.stringify(text).replace(
    /[^\x20-\x7e]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

/**
 * A nested key as a Python tuple literal.
 *
 * @example keyTuple(["a", "b"]) === '("a", "b")'; keyTuple(["a"]) === '("a",)'
 */
export function keyTuple(path: Path): string {
  if (path.length === 1) return `(${pyString(path[0] ?? "")},)`;
  return `(${path.map(pyString).join(", ")})`;
}

/** The `"a/b"` subpath literal, or null when a key holds a "/" (it would not round-trip). */
export function subpathLiteral(path: Path): string | null {
  if (path.some((key) => key.includes("/") || key === "")) return null;
  return pyString(path.join("/"));
}

/** Python's hard keywords: never a valid variable name. */
export const PY_KEYWORDS: ReadonlySet<string> = new Set([
  "False",
  "None",
  "True",
  "and",
  "as",
  "assert",
  "async",
  "await",
  "break",
  "class",
  "continue",
  "def",
  "del",
  "elif",
  "else",
  "except",
  "finally",
  "for",
  "from",
  "global",
  "if",
  "import",
  "in",
  "is",
  "lambda",
  "nonlocal",
  "not",
  "or",
  "pass",
  "raise",
  "return",
  "try",
  "while",
  "with",
  "yield",
]);

const IDENTIFIER = /^[\p{XID_Start}_][\p{XID_Continue}]*$/u;

/** Names Python and IPython use (the kernel refuses them too, see `_messages.py`):
 * dunders, IPython's input and output history, and its own names. */
const RESERVED = /^(?:__\w*__|_+|_i+|_i\d+|_\d+|_[oid]h|In|Out|get_ipython|exit|quit)$/u;

/** Why `name` is not a usable Python variable name, or null when it is. Python reads
 * identifiers in NFKC form ("ｘ" is x), so that is the form checked. */
export function identifierProblem(name: string): string | null {
  if (name === "") return "empty";
  const read = name.normalize("NFKC");
  if (!IDENTIFIER.test(read)) return `${JSON.stringify(name)} is not a Python identifier`;
  if (PY_KEYWORDS.has(read)) return `${JSON.stringify(name)} is a Python keyword`;
  if (RESERVED.test(read)) return `${JSON.stringify(name)} is a name Python or IPython uses`;
  return null;
}

export function isIdentifier(name: string): boolean {
  return identifierProblem(name) === null;
}

/** A variable name for the subtree at `path`: its key when that is an identifier. */
export function suggestVariable(path: Path): string {
  const key = path[path.length - 1];
  if (key === undefined) return "td";
  let name = key.replace(/[^\p{XID_Continue}]+/gu, "_").replace(/^_+|_+$/g, "");
  if (name === "") return "value";
  if (!/^[\p{XID_Start}_]/u.test(name)) name = `v_${name}`;
  if (PY_KEYWORDS.has(name)) name = `${name}_`;
  return isIdentifier(name) ? name : "value";
}

export interface LoadCodeArgs {
  source: string;
  path: Path;
  device: string;
  mode: Mode;
  allowPickle: boolean;
  variable: string | null;
  /** The path names a tensor leaf: it loads with `Checkpoint.load_leaf`. */
  leaf?: boolean;
  /** A format `load_memmap` refuses (safetensors...): it loads with `Checkpoint.load`. */
  foreign?: boolean;
}

/**
 * What a load of `path` reads, as the kernel's code line names it: a node inside a member
 * checkpoint of a collection is loaded from the member's own path, with the keys after
 * the member's (`_dispatch._run_collection`); any other node from `source` itself.
 *
 * @example loadTarget("run", ["step_1000", "model"], {source: "run/step_1000", depth: 1,
 *   container: "directory"}) → {source: "run/step_1000", path: ["model"]}
 */
export function loadTarget(
  source: string,
  path: Path,
  member: MemberInfo | undefined,
): { source: string; path: Path } {
  return member ? { source: member.source, path: path.slice(member.depth) } : { source, path };
}

/**
 * The line that loads the same subtree (or tensor leaf) with tdview (as `_load.load_code`
 * writes it): the subpath as `"a/b"`, or as a tuple when a key holds a "/".
 *
 * @example loadCode({source: "ckpt.tdz", path: ["replay"], device: "cpu", mode: "r",
 *   allowPickle: false, variable: "replay"}) ===
 *   'replay = tdview.load_memmap("ckpt.tdz", subpath="replay", device="cpu", mode="r")'
 */
export function loadCode(args: LoadCodeArgs): string {
  const where = args.path.length > 0 ? (subpathLiteral(args.path) ?? keyTuple(args.path)) : "";
  const options = [
    `device=${pyString(args.device)}`,
    `mode=${args.mode === null ? "None" : pyString(args.mode)}`,
  ];
  let call: string;
  if (args.leaf) {
    // a tensor has no pickles
    call = `tdview.Checkpoint(${pyString(args.source)}).load_leaf(${[where, ...options].join(", ")})`;
  } else {
    const parts = [pyString(args.source), ...(where ? [`subpath=${where}`] : []), ...options];
    if (args.allowPickle) parts.push("allow_pickle=True");
    call = args.foreign
      ? `tdview.Checkpoint(${parts[0]}).load(${parts.slice(1).join(", ")})`
      : `tdview.load_memmap(${parts.join(", ")})`;
  }
  return args.variable ? `${args.variable} = ${call}` : call;
}
