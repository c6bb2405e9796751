/** Text for people: sizes, shapes, kinds. */

import type { NodeKind, NodeSummary, Rollup, StackSchema } from "./protocol";

const UNITS = ["B", "KB", "MB", "GB", "TB", "PB"];

/**
 * Bytes in powers of 1000, three significant digits.
 *
 * @example humanBytes(1536) === "1.54 KB"
 */
export function humanBytes(bytes: number | null): string {
  if (bytes === null) return "";
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < UNITS.length - 1) {
    value /= 1000;
    unit++;
  }
  if (unit === 0) return `${value} B`;
  const digits = sizeDigits(value);
  const rounded = Number(value.toFixed(digits));
  // 999,999 B is 999.999 kB, which rounds to "1000 KB": show it as the next unit
  if (rounded >= 1000 && unit < UNITS.length - 1) {
    return `${(value / 1000).toFixed(2)} ${UNITS[unit + 1]}`;
  }
  // 9,999 B rounds to 10 KB: three digits of that ("10.0 KB", not "10.00 KB")
  return `${value.toFixed(sizeDigits(rounded))} ${UNITS[unit]}`;
}

/** Decimals that leave three significant digits (`tdview._units` does the same). */
function sizeDigits(value: number): number {
  return value >= 100 ? 0 : value >= 10 ? 1 : 2;
}

export function formatShape(shape: readonly number[] | null): string {
  return shape === null ? "" : `[${shape.join(", ")}]`;
}

/** Integer with thin group separators: 1234567 → "1,234,567". */
export function formatCount(n: number | null): string {
  return n === null ? "" : n.toLocaleString("en-US");
}

function counted(n: number, one: string): string {
  return `${formatCount(n)} ${one}${n === 1 ? "" : "s"}`;
}

/**
 * What a subtree's size is made of (as `tdview tree` says it, with tensors for leaves).
 *
 * @example rollupContents({ bytes: 9, numel: 2, leaves: 1, by_dtype: {}, pickles: 1 })
 *   === "1 tensor and 1 pickled value"
 */
export function rollupContents(r: Rollup): string {
  const pickles = r.pickles ?? 0;
  const made = r.leaves > 0 || pickles === 0 ? [counted(r.leaves, "tensor")] : [];
  if (pickles > 0) made.push(counted(pickles, "pickled value"));
  return made.join(" and ");
}

const KIND_LABELS: Record<NodeKind, string> = {
  tensordict: "TD",
  tensorclass: "TC",
  lazy_stack: "stack",
  non_tensor: "data",
  non_tensor_stack: "data stack",
  view: "view",
  leaf: "tensor",
  collection: "folder of checkpoints",
  folder: "folder",
  checkpoint: "checkpoint",
  json: "JSON",
  pickle: "pickle",
};

export function kindLabel(kind: NodeKind): string {
  return KIND_LABELS[kind];
}

/**
 * A lazy stack's merged schema, a line per key, as `tdview.index.schema_lines` writes it.
 *
 * @example schemaText(schema) === "obs: float32[-1, 4]\nextra: float32[5, 2] (1 of 3 members)"
 */
export function schemaText(schema: StackSchema): string {
  const lines = schema.entries.map((e) => {
    const what = e.dtype ?? (e.kind === "leaf" ? "mixed dtypes" : e.class_name);
    const shape = e.shape === null ? "[?]" : formatShape(e.shape);
    const some = e.members === schema.members ? "" : ` (${e.members} of ${schema.members} members)`;
    return `${e.key.join("/")}: ${what}${shape}${some}`;
  });
  if (schema.truncated) lines.push(`… the first ${formatCount(schema.entries.length)} keys`);
  return lines.join("\n");
}

/**
 * A row's badge: its kind, and for a member checkpoint of a collection how it is saved.
 *
 * @example nodeLabel({ ...summary, kind: "checkpoint", member: { container: "archive", … } })
 *   === "checkpoint · archive"
 */
export function nodeLabel(node: NodeSummary): string {
  const container = node.kind === "checkpoint" ? node.member?.container : undefined;
  return container ? `${KIND_LABELS.checkpoint} · ${container}` : KIND_LABELS[node.kind];
}

/** "[1000, 84, 84] uint8" for a leaf, "batch [1000]" for a node (nothing for an empty
 * batch size, the default that says nothing), "3 entries" for a folder of a collection. */
export function describeShape(node: NodeSummary): string {
  if (node.kind === "folder" || node.kind === "collection") {
    return `${formatCount(node.n_children)} ${node.n_children === 1 ? "entry" : "entries"}`;
  }
  if (node.kind === "leaf") return [formatShape(node.shape), node.dtype ?? ""].join(" ").trim();
  const batch = node.batch_size;
  return batch === null || batch.length === 0 ? "" : `batch ${formatShape(batch)}`;
}
