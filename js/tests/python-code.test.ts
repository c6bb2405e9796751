import { describe, expect, it } from "vitest";
import {
  identifierProblem,
  isIdentifier,
  keyTuple,
  loadCode,
  loadTarget,
  pyString,
  subpathLiteral,
  suggestVariable,
} from "../src/python-code";

describe("pyString", () => {
  it("writes what Python's json.dumps writes (ASCII only)", () => {
    expect(pyString("replay")).toBe('"replay"');
    expect(pyString('a"b\\c')).toBe('"a\\"b\\\\c"');
    expect(pyString("tab\there\n")).toBe('"tab\\there\\n"');
    expect(pyString("\x01\x7f")).toBe('"\\u0001\\u007f"');
    expect(pyString("é")).toBe('"\\u00e9"');
    expect(pyString("😀")).toBe('"\\ud83d\\ude00"');
  });
});

describe("keyTuple and subpathLiteral", () => {
  it("spell a nested key as a tuple literal", () => {
    expect(keyTuple([])).toBe("()");
    expect(keyTuple(["a"])).toBe('("a",)');
    expect(keyTuple(["a", "b"])).toBe('("a", "b")');
    expect(keyTuple(['q"', "é"])).toBe('("q\\"", "\\u00e9")');
  });

  it('spell it as an "a/b" subpath unless a key would not survive the split', () => {
    expect(subpathLiteral(["a", "b"])).toBe('"a/b"');
    expect(subpathLiteral([])).toBe('""');
    expect(subpathLiteral(["a/b"])).toBeNull();
    expect(subpathLiteral(["a", ""])).toBeNull();
  });
});

describe("identifiers", () => {
  it("accept Python identifiers, Unicode ones included", () => {
    for (const name of ["sub", "_x", "x1", "café", "données_2", "match", "type"]) {
      expect(isIdentifier(name), name).toBe(true);
    }
  });

  it("refuse the rest, saying why", () => {
    expect(identifierProblem("2x")).toBe('"2x" is not a Python identifier');
    expect(identifierProblem("a-b")).toMatch(/not a Python identifier/);
    expect(identifierProblem("a b")).toMatch(/not a Python identifier/);
    expect(identifierProblem("class")).toBe('"class" is a Python keyword');
    expect(identifierProblem("None")).toMatch(/keyword/);
    expect(identifierProblem("")).toBe("empty");
    for (const name of ["__builtins__", "In", "Out", "_", "_i3", "_7", "get_ipython"]) {
      expect(identifierProblem(name), name).toBe(
        `${JSON.stringify(name)} is a name Python or IPython uses`,
      );
    }
    expect(identifierProblem("ｒｅｐｌａｙ")).toBeNull(); // Python reads it as "replay"
    expect(identifierProblem("_private")).toBeNull();
  });

  it("suggest a variable name from the key", () => {
    expect(suggestVariable([])).toBe("td");
    expect(suggestVariable(["replay"])).toBe("replay");
    expect(suggestVariable(["model", "layers.0.weight"])).toBe("layers_0_weight");
    expect(suggestVariable(["episodes", "0"])).toBe("v_0");
    expect(suggestVariable(["class"])).toBe("class_");
    expect(suggestVariable(["!!"])).toBe("value");
  });
});

describe("loadCode", () => {
  const base = {
    source: "ckpt.tdz",
    path: ["replay"],
    device: "cpu",
    mode: "r" as const,
    allowPickle: false,
    variable: "replay",
  };

  it("loads a tensor leaf with Checkpoint.load_leaf, as load_code does", () => {
    expect(loadCode({ ...base, path: ["replay", "reward"], variable: "r", leaf: true })).toBe(
      'r = tdview.Checkpoint("ckpt.tdz").load_leaf("replay/reward", device="cpu", mode="r")',
    );
    expect(
      loadCode({
        ...base,
        path: ["a/b"],
        mode: null,
        allowPickle: true,
        variable: null,
        leaf: true,
      }),
    ).toBe('tdview.Checkpoint("ckpt.tdz").load_leaf(("a/b",), device="cpu", mode=None)');
  });

  it("reads a format load_memmap refuses with Checkpoint.load, as load_code does", () => {
    // load_code's docstring example with foreign=True
    expect(
      loadCode({
        ...base,
        source: "m.safetensors",
        path: ["model"],
        mode: null,
        variable: "m",
        foreign: true,
      }),
    ).toBe('m = tdview.Checkpoint("m.safetensors").load(subpath="model", device="cpu", mode=None)');
  });

  it("matches tdview.protocol._load.load_code", () => {
    // The examples of load_code's docstring and of tests/test_protocol.py.
    expect(loadCode(base)).toBe(
      'replay = tdview.load_memmap("ckpt.tdz", subpath="replay", device="cpu", mode="r")',
    );
    expect(
      loadCode({ ...base, path: ["a/b"], mode: null, allowPickle: true, variable: null }),
    ).toBe(
      'tdview.load_memmap("ckpt.tdz", subpath=("a/b",), device="cpu", mode=None, allow_pickle=True)',
    );
    expect(loadCode({ ...base, source: "c.tdz", path: ["a", "b"], variable: "x" })).toBe(
      'x = tdview.load_memmap("c.tdz", subpath="a/b", device="cpu", mode="r")',
    );
    expect(
      loadCode({
        ...base,
        source: "c.tdz",
        path: ["a/b", "c"],
        device: "cuda:0",
        mode: null,
        allowPickle: true,
        variable: null,
      }),
    ).toBe(
      'tdview.load_memmap("c.tdz", subpath=("a/b", "c"), device="cuda:0", mode=None, allow_pickle=True)',
    );
  });

  it("leaves out the subpath of the root", () => {
    expect(loadCode({ ...base, path: [], mode: "r+", variable: "td" })).toBe(
      'td = tdview.load_memmap("ckpt.tdz", device="cpu", mode="r+")',
    );
  });
});

describe("loadTarget: a node inside a member checkpoint of a collection", () => {
  // the kernel's lines for the same loads (tests/test_collections.py, _dispatch)
  const options = { device: "cpu", mode: "r" as const, allowPickle: false };
  const line = (path: string[], member: Parameters<typeof loadTarget>[2], extra = {}) =>
    loadCode({ ...loadTarget("run", path, member), ...options, variable: null, ...extra });

  it("a directory member: its own folder, the keys after it", () => {
    const member = { source: "run/step_1000", depth: 1, container: "directory" as const };
    expect(line(["step_1000", "model"], member, { variable: "model" })).toBe(
      'model = tdview.load_memmap("run/step_1000", subpath="model", device="cpu", mode="r")',
    );
    expect(line(["step_1000"], member)).toBe(
      'tdview.load_memmap("run/step_1000", device="cpu", mode="r")',
    );
  });

  it("an archive member, deeper in the collection: a leaf loads with load_leaf", () => {
    const member = { source: "run/ckpts/step_2000.tdz", depth: 2, container: "archive" as const };
    expect(line(["ckpts", "step_2000.tdz", "model", "w"], member, { leaf: true })).toBe(
      'tdview.Checkpoint("run/ckpts/step_2000.tdz").load_leaf("model/w", device="cpu", mode="r")',
    );
    expect(loadTarget("run", ["ckpts", "step_2000.tdz"], member)).toEqual({
      source: "run/ckpts/step_2000.tdz",
      path: [],
    });
  });

  it("a node of no member (a side .memmap of the collection) loads from the collection", () => {
    expect(line(["sampler", "sumtree.memmap"], undefined, { leaf: true })).toBe(
      'tdview.Checkpoint("run").load_leaf("sampler/sumtree.memmap", device="cpu", mode="r")',
    );
  });
});
