// @vitest-environment happy-dom
import { describe, expect, it } from "vitest";
import { MemoryDataSource } from "../src/memory-data-source";
import type { NodeSummary } from "../src/protocol";
import { TreeView } from "../src/render-tree";
import { TreeModel } from "../src/tree-model";

const NAME = "decoder.layers.0.self_attn.in_proj_weight";

/** An optimizer state's row (`0 → NAME`) drawn `width` px wide: its key and label. */
async function stateRow(width: number): Promise<{ key: string; label: string }> {
  const source = new MemoryDataSource({
    key: "",
    children: [{ key: "0", kind: "tensordict", bytes: 786_432, children: [] }],
  });
  const tree = new TreeModel(source, source.root);
  const inlineValue = (n: NodeSummary) => (n.key === "0" ? `→ ${NAME}` : "");
  const view = new TreeView(tree, { width, inlineValue });
  await tree.expand(0);
  const row = view.element.querySelectorAll('[role="treeitem"]')[1];
  const found = {
    key: row?.querySelector(".tdview-key")?.textContent ?? "",
    label: row?.querySelector(".tdview-inline-value")?.textContent ?? "",
  };
  view.dispose();
  return found;
}

describe("an optimizer state's row", () => {
  it("shows its parameter whole where it fits, else cut in the middle, its end kept", async () => {
    expect(await stateRow(1000)).toEqual({ key: "0", label: `→ ${NAME}` });
    const narrow = await stateRow(260);
    expect(narrow.key).toBe("0"); // the key wins
    expect(narrow.label).toMatch(/^→ decode.*….*_proj_weight$/); // start and end kept
    expect(narrow.label.length).toBeLessThan(NAME.length);
  });
});
