import { describe, expect, it } from "vitest";
import {
  identifierProblem,
  isIdentifier,
  keyTuple,
  loadCode,
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
