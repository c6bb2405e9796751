/** In-memory checkpoints for the tests. */

import type { MemoryNode } from "../src/memory-data-source";

export const WIDE = 100_000;

export function wideKey(i: number): string {
  return `k${String(i).padStart(6, "0")}`;
}

/**
 * root
 * ├── a            (TensorDict: x, y/deep)
 * ├── wide         (TensorDict with 100,000 leaves k000000 … k099999)
 * ├── zeta         (leaf)
 * └── zulu         (leaf)
 */
export function sampleTree(wide = WIDE): MemoryNode {
  return {
    key: "",
    batch_size: [10],
    children: [
      {
        key: "a",
        batch_size: [10],
        children: [
          {
            key: "x",
            shape: [10, 3],
            dtype: "float32",
            data: Array.from({ length: 30 }, (_, i) => i),
          },
          { key: "y", children: [{ key: "deep", shape: [10], dtype: "int64" }] },
        ],
      },
      {
        key: "wide",
        children: Array.from({ length: wide }, (_, i) => ({
          key: wideKey(i),
          shape: [10],
          dtype: "float32",
        })),
      },
      { key: "zeta", shape: [10], dtype: "bool", bytes: 10 },
      { key: "zulu", shape: [10, 2], dtype: "bfloat16", bytes: 40 },
    ],
  };
}

/** Lets every pending promise chain (and zero-delay timer) run. */
export function tick(ms = 0): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The checkpoint that the golden state.json describes. */
export function replayTree(): MemoryNode {
  return {
    key: "",
    batch_size: [1000],
    children: [
      {
        key: "obs",
        batch_size: [1000],
        children: [
          { key: "pixels", shape: [1000, 3, 84, 84], dtype: "uint8", bytes: 21_168_000 },
          { key: "state", shape: [1000, 17], dtype: "float32" },
        ],
      },
      { key: "action", shape: [1000, 6], dtype: "bfloat16", bytes: 12_000 },
      { key: "reward", shape: [1000, 1], dtype: "float32" },
      { key: "done", shape: [1000, 1], dtype: "bool", bytes: 1000 },
      { key: "info", kind: "non_tensor", class_name: "NonTensorData", value: { seed: 7 } },
    ],
  };
}
