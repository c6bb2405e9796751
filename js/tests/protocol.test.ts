import { describe, expect, it } from "vitest";
import { parseCompareState } from "../src/compare-protocol";
import { ProtocolError } from "../src/data-source";
import {
  decodeBuffer,
  isProgress,
  METHODS,
  makeCancel,
  makeRequest,
  PROTOCOL_VERSION,
  parseCancel,
  parseProgress,
  parseReply,
  parseRequest,
  parseResult,
  parseState,
} from "../src/protocol";
import { type Golden, getAt, goldenNames, keyPaths, loadGolden, mutate } from "./golden";

/** Whether the parser for this golden file's kind accepts `message`. */
function accepts(golden: Golden, message: unknown): boolean {
  const { name } = golden;
  if (name === "state_compare") {
    const compare = (message as Record<string, unknown> | null)?.compare;
    return parseState(message) !== null && parseCompareState(compare) !== null;
  }
  if (name.startsWith("state")) return parseState(message) !== null;
  if (name.startsWith("request_")) return parseRequest(message) !== null;
  if (name === "cancel") return parseCancel(message) !== null;
  if (name === "progress") return isProgress(message);
  if (!name.startsWith("reply_") || !golden.method) throw new Error(`unknown golden ${name}`);
  const reply = parseReply(message);
  if (reply === null) return false;
  if (!reply.ok) return true;
  try {
    parseResult(golden.method, reply.result);
    return true;
  } catch {
    return false;
  }
}

const names = goldenNames();
const goldens = names.map(loadGolden);

/** Request params that may be absent (a request without them is the one before they
 * existed): a search's page offset and count, a preview's view. */
const OPTIONAL_PARAMS = new Set([
  "offset",
  "count",
  "index",
  "stats",
  "heatmap",
  "plane",
  "col_offset",
  "rows_scope",
  "replace",
  "read",
  "values",
]);
/** Key paths with free-form content: inside a non-tensor value, or a file's metadata. */
const freeForm = (path: (string | number)[]) => path.includes("value") || path.includes("metadata");
/** Keys that may be absent: the dtype names of a rollup, anything inside a value, and a
 * node's `member` (only a collection's member checkpoints have one). */
const optionalKey = (path: (string | number)[]) =>
  freeForm(path.slice(0, -1)) ||
  ["by_dtype", "by_section"].includes(String(path[path.length - 2])) ||
  path[path.length - 1] === "member" ||
  path[path.length - 1] === "metadata" || // a root's, where the file records some
  (path.length === 2 && path[0] === "params" && OPTIONAL_PARAMS.has(String(path[1])));

describe("golden files", () => {
  it("cover every message kind and method", () => {
    const required = [
      "state",
      "cancel",
      "progress",
      "reply_error",
      ...METHODS.flatMap((m) => [`request_${m}`, `reply_${m}`]),
    ];
    expect(names).toEqual(expect.arrayContaining(required));
  });

  it("request the current protocol version", () => {
    for (const g of goldens) {
      const v = g.name.startsWith("state") ? g.message._protocol_version : g.message.v;
      expect(v, g.name).toBe(PROTOCOL_VERSION);
    }
  });

  it.each(names)("%s is accepted", (name) => {
    const golden = loadGolden(name);
    expect(golden.description.length).toBeGreaterThan(0);
    expect(accepts(golden, golden.message)).toBe(true);
  });

  it.each(names)("%s is rejected without any one of its keys", (name) => {
    const golden = loadGolden(name);
    const paths = keyPaths(golden.message).filter(
      (p) => typeof p[p.length - 1] === "string" && !optionalKey(p),
    );
    expect(paths.length).toBeGreaterThan(0);
    for (const path of paths) {
      const mutated = mutate(golden.message, path, (parent, key) => {
        delete parent[key];
      });
      expect(accepts(golden, mutated), `without ${path.join(".")}`).toBe(false);
    }
  });

  it.each(names)("%s is rejected with any one value of the wrong type", (name) => {
    const golden = loadGolden(name);
    const paths = keyPaths(golden.message).filter((p) => {
      const v = getAt(golden.message, p);
      return !freeForm(p) && (v === null || typeof v !== "object");
    });
    for (const path of paths) {
      const mutated = mutate(golden.message, path, (parent, key) => {
        const v = parent[key];
        parent[key] =
          v === null ? {} : typeof v === "string" ? 42 : typeof v === "number" ? "42" : "true";
      });
      expect(accepts(golden, mutated), `with ${path.join(".")} mistyped`).toBe(false);
    }
  });

  it.each(names)("%s still parses with keys added (a compatible change)", (name) => {
    const golden = loadGolden(name);
    const extended: Record<string, unknown> = { ...golden.message, added_later: { x: 1 } };
    for (const key of ["params", "result", "error", "root", "options"]) {
      const inner = extended[key];
      if (inner && typeof inner === "object") extended[key] = { ...inner, added_later: [1] };
    }
    expect(accepts(golden, extended)).toBe(true);
  });

  it.each(names.filter((n) => !n.startsWith("state")))("%s is rejected at v=2", (name) => {
    const golden = loadGolden(name);
    expect(accepts(golden, { ...golden.message, v: 2 })).toBe(false);
    expect(accepts(golden, { ...golden.message, kind: "tdview:other" })).toBe(false);
  });
});

describe("builders", () => {
  it.each(METHODS)("makeRequest reproduces request_%s.json", (method) => {
    const { message } = loadGolden(`request_${method}`);
    const parsed = parseRequest(message);
    expect(parsed).not.toBeNull();
    if (!parsed) return;
    expect(makeRequest(parsed.id, parsed.method, parsed.params)).toEqual(message);
  });

  it("makeCancel reproduces cancel.json", () => {
    const { message } = loadGolden("cancel");
    expect(makeCancel(message.id as number)).toEqual(message);
  });
});

describe("parsers", () => {
  it("reject what is not a message", () => {
    for (const junk of [null, undefined, "x", 3, [], [1], {}]) {
      expect(parseReply(junk)).toBeNull();
      expect(parseRequest(junk)).toBeNull();
      expect(parseCancel(junk)).toBeNull();
      expect(parseProgress(junk)).toBeNull();
      expect(parseState(junk)).toBeNull();
    }
  });

  it("reject unknown methods, negative counts and non-integer ids", () => {
    const { message } = loadGolden("request_children");
    expect(parseRequest({ ...message, method: "delete" })).toBeNull();
    expect(parseRequest({ ...message, id: 1.5 })).toBeNull();
    expect(parseRequest({ ...message, id: 2 ** 53 })).toBeNull();
    expect(parseRequest({ ...message, params: { path: [], offset: -1, limit: 200 } })).toBeNull();
    expect(parseRequest({ ...message, params: { path: [1], offset: 0, limit: 200 } })).toBeNull();
  });

  it("accept a negative stack_dim but not a negative size", () => {
    const { message } = loadGolden("state");
    const root = message.root as Record<string, unknown>;
    expect(parseState({ ...message, root: { ...root, stack_dim: -1 } })).not.toBeNull();
    expect(parseState({ ...message, root: { ...root, bytes: -1 } })).toBeNull();
    // a ragged lazy stack's batch size, as tensordict gives it; no other negative dim
    expect(parseState({ ...message, root: { ...root, batch_size: [2, -1] } })).not.toBeNull();
    expect(parseState({ ...message, root: { ...root, batch_size: [2, -2] } })).toBeNull();
    expect(parseState({ ...message, root: { ...root, kind: "directory" } })).toBeNull();
    expect(parseState({ ...message, root: { ...root, kind: "collection" } })).not.toBeNull();
  });

  it("keep a lazy stack's schema when it is sent, and check it", () => {
    const { message } = loadGolden("reply_node_tensordict");
    const result = message.result as Record<string, unknown>;
    const entry = { key: ["obs"], kind: "leaf", class_name: "Tensor", dtype: "float32" };
    const schema = {
      members: 2,
      stack_dim: 0,
      truncated: false,
      entries: [{ ...entry, shape: [-1, 4], members: 2 }],
    };
    expect(parseResult("node", { ...result, schema }).schema).toEqual(schema);
    expect(parseResult("node", { ...result, schema: null }).schema).toBeNull();
    expect(parseResult("node", result).schema).toBeUndefined();
    const bad = { ...schema, entries: [{ ...entry, shape: [-2], members: 2 }] };
    expect(() => parseResult("node", { ...result, schema: bad })).toThrow(/schema.entries/);
  });

  it("keep a rollup's pickles when there are some, and check them", () => {
    const { message } = loadGolden("reply_node_tensordict");
    const result = message.result as Record<string, unknown>;
    const rollup = { ...(result.rollup as object), pickles: 1, pickle_bytes: 82_338 };
    expect(parseResult("node", { ...result, rollup }).rollup).toMatchObject({
      pickles: 1,
      pickle_bytes: 82_338,
    });
    const bad = { ...result, rollup: { ...rollup, pickles: -1 } };
    expect(() => parseResult("node", bad)).toThrow(/rollup.pickles/);
  });

  it("decode a collection's children: folders, side files, members and where they are", () => {
    const { message } = loadGolden("reply_children_collection");
    const result = parseResult("children", message.result);
    const kinds = Object.fromEntries(result.children.map((c) => [c.key, c.kind]));
    expect(kinds).toEqual({
      "config.json": "json",
      logs: "folder",
      "prefetch.pkl": "pickle",
      step_1000: "checkpoint",
      "step_2000.tdz": "checkpoint",
    });
    const members = result.children.map((c) => c.member);
    expect(members.slice(0, 3)).toEqual([undefined, undefined, undefined]);
    expect(members.slice(3)).toEqual([
      { source: "run/step_1000", depth: 1, container: "directory" },
      { source: "run/step_2000.tdz", depth: 1, container: "archive" },
    ]);
    // `member` is checked where it is sent; a node's details keep it too
    const child = result.children[4] as unknown as Record<string, unknown>;
    const bad = { ...child, member: { source: "run/x", depth: 1, container: "zip" } };
    expect(() => parseResult("children", { ...result, children: [bad] })).toThrow(
      "result.children[0].member.container",
    );
    const details = loadGolden("reply_node").message.result as Record<string, unknown>;
    const inside = { ...details, member: child.member };
    expect(parseResult("node", inside).member).toEqual(child.member);
    expect(parseResult("node", details)).not.toHaveProperty("member");
  });

  it("reject a reply with ok but no result, or an error without a message", () => {
    const { message } = loadGolden("reply_error");
    const error = message.error as Record<string, unknown>;
    expect(parseReply({ ...message, ok: true })).toBeNull();
    expect(parseReply({ ...message, error: { ...error, message: undefined } })).toBeNull();
    expect(parseReply({ ...message, ok: "false" })).toBeNull();
  });

  it("turn an error reply into a ProtocolError", () => {
    const reply = parseReply(loadGolden("reply_error").message);
    expect(reply?.ok).toBe(false);
    if (!reply || reply.ok) return;
    const error = ProtocolError.from(reply.error);
    expect(error.type).toBe("LeafDataError");
    expect(error.path).toEqual(["obs", "pixels"]);
    expect(error.message).toContain("21168000");
  });

  it("reject non-finite statistics (JSON has none; the server sends null)", () => {
    const golden = loadGolden("reply_preview");
    const result = parseReply(golden.message);
    if (!result?.ok) throw new Error("golden reply is not ok");
    const stats = { ...(result.result.stats as object), min: Number.NaN };
    expect(() => parseResult("preview", { ...result.result, stats })).toThrow(/result.stats.min/);
    const nulls = { ...(result.result.stats as object), min: null, max: null };
    expect(parseResult("preview", { ...result.result, stats: nulls }).stats?.min).toBeNull();
  });

  it("name the offending field", () => {
    const { message } = loadGolden("reply_children");
    const bad = mutate(message, ["result", "children", 1, "shape", 0], (p, k) => {
      p[k] = -3;
    });
    const reply = parseReply(bad);
    if (!reply?.ok) throw new Error("envelope should parse");
    expect(() => parseResult("children", reply.result)).toThrow(
      "result.children[1].shape[0]: expected a non-negative integer, got number -3",
    );
  });
});

describe("preview buffers", () => {
  it("decode to the arrays the golden reply describes", () => {
    const golden = loadGolden("reply_preview");
    const reply = parseReply(golden.message);
    if (!reply?.ok) throw new Error("golden reply is not ok");
    const result = parseResult("preview", reply.result);
    const slice = decodeBuffer(result.slice, golden.buffers);
    expect(slice).toBeInstanceOf(Float32Array);
    expect(slice.length).toBe(24);
    expect(slice[0]).toBe(0.5);
    expect(slice[3]).toBe(0.9921875);
    const hist = result.histogram;
    if (!hist) throw new Error("golden preview has a histogram");
    const edges = decodeBuffer(hist.edges, golden.buffers);
    const counts = decodeBuffer(hist.counts, golden.buffers);
    expect(edges).toBeInstanceOf(Float64Array);
    expect(edges[0]).toBe(-1);
    expect(counts).toBeInstanceOf(BigInt64Array);
    const total = [...(counts as BigInt64Array)].reduce((a, b) => a + b, 0n);
    expect(Number(total)).toBe(result.stats?.count);
  });
});
