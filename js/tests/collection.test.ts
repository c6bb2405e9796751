// @vitest-environment happy-dom
/**
 * A folder of checkpoints (a collection) in the widget: its rows, the details of its
 * folders, side files and members, and loads from inside a member, which name the
 * member's own path as the kernel's `load_code` does.
 */
import { afterEach, describe, expect, it } from "vitest";
import { describeShape, nodeLabel } from "../src/format";
import { MemoryDataSource, type MemoryNode } from "../src/memory-data-source";
import type { MemberInfo, Options } from "../src/protocol";
import { DetailsPanel, detailFields } from "../src/render-details";
import { loadRefusal } from "../src/render-load";
import { TreeView } from "../src/render-tree";
import { TreeModel } from "../src/tree-model";
import { loadGolden } from "./golden";
import { tick } from "./trees";

const OPTIONS: Options = { device: "cpu", mode: "r", allow_pickle: false, robust_key: true };
const DIRECTORY: MemberInfo = { source: "run/step_1000", depth: 1, container: "directory" };
const ARCHIVE: MemberInfo = { source: "run/ckpts/step_2000.tdz", depth: 2, container: "archive" };

function model(): MemoryNode[] {
  return [
    { key: "step", shape: [], dtype: "int64", data: [7] },
    { key: "model", children: [{ key: "w", shape: [2, 3], data: [1, 2, 3, 4, 5, 6] }] },
  ];
}

/** As the kernel sends it for `TDView("run")`. */
function run(): MemoryNode {
  return {
    key: "",
    kind: "collection",
    children: [
      {
        key: "config.json",
        kind: "json",
        bytes: 31,
        value: { lr: 0.001, layers: [4, 3] },
      },
      {
        key: "ckpts",
        kind: "folder",
        children: [
          { key: "step_2000.tdz", kind: "checkpoint", member: ARCHIVE, children: model() },
        ],
      },
      {
        key: "prefetch.pkl",
        kind: "pickle",
        bytes: 25,
        pickle: { bytes: 25, globals: [["collections", "OrderedDict"]] },
      },
      { key: "step_1000", kind: "checkpoint", member: DIRECTORY, children: model() },
    ],
  };
}

function setup() {
  const source = new MemoryDataSource(run(), { source: "run" });
  const panel = new DetailsPanel(source, { source: "run", options: OPTIONS, totalsDelayMs: 0 });
  panel.loader.setOpen(true);
  document.body.append(panel.element);
  const q = <T extends Element = HTMLElement>(selector: string) => {
    const found = panel.element.querySelector<T>(selector);
    if (!found) throw new Error(`no ${selector}`);
    return found;
  };
  const field = (label: string) => {
    if (!panel.details) throw new Error("no details on show");
    return detailFields(panel.details).find(([name]) => name === label)?.[1];
  };
  return { source, panel, q, field };
}

afterEach(() => {
  document.body.replaceChildren();
});

describe("a collection's rows", () => {
  it("say what each node is: a folder of checkpoints, a folder, a checkpoint, a file", async () => {
    const { children } = loadGolden("reply_children_collection").message.result as {
      children: Parameters<typeof nodeLabel>[0][];
    };
    expect(children.map(nodeLabel)).toEqual([
      "JSON",
      "folder",
      "pickle",
      "checkpoint · directory",
      "checkpoint · archive",
    ]);
    expect(children.map(describeShape)).toEqual(["", "1 entry", "", "", ""]);

    const source = new MemoryDataSource(run(), { source: "run" });
    const tree = new TreeModel(source, source.root, { rootLabel: "run" });
    const view = new TreeView(tree, { rowHeight: 24, height: 480 });
    document.body.append(view.element);
    await tree.expand(0);
    await tick();
    const rows = [...view.element.querySelectorAll('[role="treeitem"]')].map((row) =>
      [".tdview-key", ".tdview-badge", ".tdview-shape"].map(
        (part) => row.querySelector(part)?.textContent,
      ),
    );
    expect(rows).toEqual([
      ["run", "folder of checkpoints", "4 entries"],
      ["config.json", "JSON", ""],
      ["ckpts", "folder", "1 entry"],
      ["prefetch.pkl", "pickle", ""],
      ["step_1000", "checkpoint · directory", ""],
    ]);
    expect(view.element.querySelector(".tdview-badge.tdview-kind-pickle")).not.toBeNull();
    view.dispose();
  });

  it("a side file's size, left out of the first page, is asked for in the background", async () => {
    const source = new MemoryDataSource(run(), { source: "run" });
    const tree = new TreeModel(source, source.root, { rootLabel: "run", totalsDelayMs: 0 });
    await tree.expand(0);
    expect(tree.row(1)?.node?.bytes).toBeNull(); // config.json, as the kernel sends it
    await tick(20);
    expect(tree.row(1)?.node?.bytes).toBe(31);
    expect(tree.row(3)?.node?.bytes).toBe(25); // prefetch.pkl
    const asked = source.calls("children").filter((c) => c.params.limit === 1);
    expect(asked.map((c) => c.params.offset).sort()).toEqual([0, 1, 2, 3]);
    tree.dispose();
  });
});

describe("a collection's details", () => {
  it("a JSON file shows its value like a non-tensor's, and is not loaded", async () => {
    const { panel, q, field } = setup();
    await panel.show(["config.json"]);
    expect(field("Value")).toBe(JSON.stringify({ lr: 0.001, layers: [4, 3] }, null, 2));
    expect(field("Key")).toBeUndefined(); // a side file has no key in a checkpoint
    expect(q<HTMLButtonElement>(".tdview-load-button").disabled).toBe(true);
    expect(q(".tdview-load-refusal").textContent).toContain("tdview does not load it");
    expect(q(".tdview-code-row").hidden).toBe(true);
  });

  it("a pickle file says it is never unpickled, with no unlock", async () => {
    const { panel, q } = setup();
    await panel.show(["prefetch.pkl"]);
    const box = q(".tdview-side-pickle");
    expect(box.textContent).toContain("tdview never unpickles it");
    expect(box.textContent).toContain("collections.OrderedDict");
    expect(panel.element.querySelector(".tdview-unlock-button")).toBeNull();
    expect(q(".tdview-unlock-field").hidden).toBe(true);
    const load = q<HTMLButtonElement>(".tdview-load-button");
    expect(load.disabled).toBe(true);
    expect(load.title).toContain("never unpickles");
    expect(await panel.loader.load()).toBeNull();
  });

  it("folders and the collection itself are not loaded whole", async () => {
    const { panel, q, source } = setup();
    for (const path of [[], ["ckpts"]]) {
      await panel.show(path);
      expect(q<HTMLButtonElement>(".tdview-load-button").disabled).toBe(true);
      expect(q(".tdview-load-refusal").textContent).toContain("select a checkpoint in it");
    }
    await expect(
      source.load({
        path: ["ckpts"],
        device: "cpu",
        mode: "r",
        allow_pickle: false,
        variable: null,
      }),
    ).rejects.toMatchObject({ type: "SubpathError" });
    expect(loadRefusal({ ...(await source.node(["step_1000"])) })).toBeNull();
  });
});

describe("loads inside a member", () => {
  it("a directory member loads whole from its own folder, the same line after the load", async () => {
    const { panel, q, field } = setup();
    await panel.show(["step_1000"]);
    expect(field("Checkpoint")).toBe("run/step_1000 (directory)");
    expect(field("Kind")).toBe("checkpoint · directory");
    const before = 'step_1000 = tdview.load_memmap("run/step_1000", device="cpu", mode="r")';
    expect(q(".tdview-code").textContent).toBe(before);
    expect(q<HTMLButtonElement>(".tdview-load-button").disabled).toBe(false);
    const result = await panel.loader.load();
    expect(result?.code).toBe(before);
    expect(result?.path).toEqual(["step_1000"]);
    expect(q(".tdview-code").textContent).toBe(before);
  });

  it("a leaf of an archive member: its key and subpath are the member's", async () => {
    const { panel, q, field } = setup();
    const path = ["ckpts", "step_2000.tdz", "model", "w"];
    await panel.show(path);
    expect(panel.details?.member).toEqual(ARCHIVE);
    expect(field("Checkpoint")).toBe("run/ckpts/step_2000.tdz (archive)");
    expect(field("Key")).toBe('("model", "w")');
    expect(field("Subpath")).toBe("model/w");
    const before =
      'w = tdview.Checkpoint("run/ckpts/step_2000.tdz").load_leaf("model/w", device="cpu", mode="r")';
    expect(q(".tdview-code").textContent).toBe(before);
    const result = await panel.loader.load();
    expect(result?.code).toBe(before);
    expect(q(".tdview-code").textContent).toBe(before);
  });
});
