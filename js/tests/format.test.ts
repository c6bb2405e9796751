import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { describeShape, formatCount, humanBytes, rollupContents, schemaText } from "../src/format";
import type { NodeSummary } from "../src/protocol";

describe("format", () => {
  it("writes sizes in powers of 1000 with three digits", () => {
    expect(humanBytes(null)).toBe("");
    expect(humanBytes(0)).toBe("0 B");
    expect(humanBytes(999)).toBe("999 B");
    expect(humanBytes(1536)).toBe("1.54 KB");
    expect(humanBytes(21_168_000)).toBe("21.2 MB");
    expect(humanBytes(123_456_789_012)).toBe("123 GB");
    expect(humanBytes(5e18)).toBe("5000 PB");
    // rounding to three digits reaches the next unit: say it in that unit
    expect(humanBytes(999_999)).toBe("1.00 MB");
    expect(humanBytes(999_499)).toBe("999 KB");
  });

  it("writes sizes as the kernel does (tests/units_cases.json)", () => {
    const file = join(
      dirname(fileURLToPath(import.meta.url)),
      "..",
      "..",
      "tests",
      "units_cases.json",
    );
    const doc = JSON.parse(readFileSync(file, "utf8")) as { cases: [number, string][] };
    expect(doc.cases.length).toBeGreaterThan(10);
    for (const [bytes, text] of doc.cases) expect(humanBytes(bytes)).toBe(text);
  });

  it("groups counts", () => {
    expect(formatCount(1_234_567)).toBe("1,234,567");
  });

  it("writes a lazy stack's schema a key a line, -1 where members differ", () => {
    const entry = { kind: "leaf", class_name: "Tensor", dtype: "float32", members: 3 };
    const schema = {
      members: 3,
      stack_dim: 0,
      truncated: false,
      entries: [
        { ...entry, key: ["obs"], shape: [-1, 4] },
        { ...entry, key: ["next", "obs"], shape: [-1, 4] },
        { ...entry, key: ["mixed"], dtype: null, shape: [-1] },
        {
          ...entry,
          key: ["info"],
          kind: "non_tensor",
          class_name: "NonTensorData",
          dtype: null,
          shape: [-1],
        },
        { ...entry, key: ["extra"], shape: [5, 2], members: 1 },
      ],
    };
    expect(schemaText(schema)).toBe(
      "obs: float32[-1, 4]\nnext/obs: float32[-1, 4]\nmixed: mixed dtypes[-1]\n" +
        "info: NonTensorData[-1]\nextra: float32[5, 2] (1 of 3 members)",
    );
    expect(schemaText({ ...schema, entries: schema.entries.slice(0, 1), truncated: true })).toBe(
      "obs: float32[-1, 4]\n… the first 1 keys",
    );
  });

  it("says what a size is made of: tensors and pickled values", () => {
    const r = { bytes: 0, numel: 0, leaves: 0, by_dtype: {} };
    expect(rollupContents(r)).toBe("0 tensors");
    expect(rollupContents({ ...r, leaves: 1 })).toBe("1 tensor");
    expect(rollupContents({ ...r, leaves: 1200 })).toBe("1,200 tensors");
    expect(rollupContents({ ...r, pickles: 1, pickle_bytes: 82_338 })).toBe("1 pickled value");
    expect(rollupContents({ ...r, leaves: 3, pickles: 2 })).toBe("3 tensors and 2 pickled values");
  });

  it("describes leaves by shape and dtype, nodes by batch size", () => {
    const base: NodeSummary = {
      key: "k",
      path: ["k"],
      kind: "leaf",
      class_name: "Tensor",
      has_children: false,
      n_children: 0,
      shape: [2, 3],
      dtype: "float32",
      batch_size: null,
      stack_dim: null,
      bytes: 24,
      numel: 6,
      pickled: false,
      problems: [],
    };
    expect(describeShape(base)).toBe("[2, 3] float32");
    expect(describeShape({ ...base, shape: [] })).toBe("[] float32");
    expect(describeShape({ ...base, kind: "lazy_stack", batch_size: [4, 2] })).toBe("batch [4, 2]");
    expect(describeShape({ ...base, kind: "non_tensor", batch_size: null })).toBe("");
  });
});

describe("describeShape of a node's batch size", () => {
  it("says nothing for an empty batch size", () => {
    const node = { kind: "tensordict", batch_size: [], n_children: 2 } as never;
    expect(describeShape(node)).toBe("");
    expect(describeShape({ kind: "tensordict", batch_size: [1000] } as never)).toBe("batch [1000]");
  });
});
