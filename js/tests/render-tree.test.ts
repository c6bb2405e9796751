// @vitest-environment happy-dom
import { afterEach, describe, expect, it, vi } from "vitest";
import { MemoryDataSource } from "../src/memory-data-source";
import type { NodeSummary } from "../src/protocol";
import { TreeView } from "../src/render-tree";
import { TreeModel } from "../src/tree-model";
import { sampleTree, tick, WIDE, wideKey } from "./trees";

const ROW = 24;

async function setup(onActivate?: (path: string[]) => void) {
  const source = new MemoryDataSource(sampleTree());
  const tree = new TreeModel(source, source.root, { rootLabel: "ckpt" });
  const view = new TreeView(tree, {
    rowHeight: ROW,
    height: 480,
    ...(onActivate && { onActivate }),
  });
  document.body.append(view.element);
  await tree.expand(0);
  await tick();
  return { source, tree, view, el: view.element };
}

const items = (el: HTMLElement) => [...el.querySelectorAll<HTMLElement>('[role="treeitem"]')];
const selected = (el: HTMLElement) => el.querySelector<HTMLElement>('[aria-selected="true"]');
const key = (el: HTMLElement | null) => el?.querySelector(".tdview-key")?.textContent;

function press(el: HTMLElement, k: string) {
  el.dispatchEvent(new KeyboardEvent("keydown", { key: k, bubbles: true, cancelable: true }));
}

afterEach(() => {
  document.body.replaceChildren();
});

describe("TreeView", () => {
  it("is an ARIA tree of treeitems with level, position and state", async () => {
    const { el } = await setup();
    expect(el.getAttribute("role")).toBe("tree");
    expect(el.tabIndex).toBe(0);
    const rows = items(el);
    expect(rows).toHaveLength(5);
    const [root, a, , zeta] = rows;
    expect(root?.getAttribute("aria-level")).toBe("1");
    expect(root?.getAttribute("aria-expanded")).toBe("true");
    expect(root?.getAttribute("aria-selected")).toBe("true");
    expect(a?.getAttribute("aria-level")).toBe("2");
    expect(a?.getAttribute("aria-expanded")).toBe("false");
    expect(a?.getAttribute("aria-posinset")).toBe("1");
    expect(a?.getAttribute("aria-setsize")).toBe("4");
    expect(zeta?.hasAttribute("aria-expanded")).toBe(false);
    expect(el.getAttribute("aria-activedescendant")).toBe(root?.id);
  });

  it("shows key, kind, shape and dtype, and size in each row", async () => {
    const { el } = await setup();
    const zulu = items(el)[4];
    expect(key(zulu ?? null)).toBe("zulu");
    expect(zulu?.querySelector(".tdview-badge")?.textContent).toBe("tensor");
    expect(zulu?.querySelector(".tdview-shape")?.textContent).toBe("[10, 2] bfloat16");
    expect(zulu?.querySelector(".tdview-bytes")?.textContent).toBe("40 B");
    const a = items(el)[1];
    expect(a?.querySelector(".tdview-badge")?.textContent).toBe("TD");
    expect(a?.querySelector(".tdview-shape")?.textContent).toBe("batch [10]");
  });

  it("keeps fewer than 100 row elements for 100,000 rows", async () => {
    const { tree, el, view } = await setup();
    await tree.expand(2);
    await tick();
    expect(tree.rowCount).toBe(5 + WIDE);
    const spacer = el.querySelector<HTMLElement>(".tdview-tree-spacer");
    expect(spacer?.style.height).toBe(`${(5 + WIDE) * ROW}px`);
    expect(items(el).length).toBeLessThan(100);
    expect(view.renderedRowCount).toBe(items(el).length);
  });

  it("renders the rows scrolled to, and fetches their page", async () => {
    const { source, el } = await setup();
    press(el, "ArrowDown");
    press(el, "ArrowDown");
    press(el, "ArrowRight");
    await tick();
    el.scrollTop = (3 + 60_000) * ROW;
    el.dispatchEvent(new Event("scroll"));
    expect(items(el).length).toBeLessThan(100);
    const first = items(el).find((r) => r.getAttribute("aria-posinset") === "60001");
    expect(first?.getAttribute("aria-busy")).toBe("true");
    await tick();
    expect(key(items(el).find((r) => r.getAttribute("aria-posinset") === "60001") ?? null)).toBe(
      wideKey(60_000),
    );
    const offsets = source
      .calls("children")
      .filter((c) => c.params.totals === false) // pages, not the background totals
      .map((c) => c.params.offset as number);
    expect(offsets.every((o) => o % 200 === 0)).toBe(true);
    expect(offsets).toContain(60_000);
  });

  it("moves the selection with the keyboard and keeps it in view", async () => {
    const { tree, el } = await setup();
    press(el, "ArrowDown");
    expect(key(selected(el))).toBe("a");
    expect(el.getAttribute("aria-activedescendant")).toBe(selected(el)?.id);
    press(el, "ArrowDown");
    press(el, "ArrowRight");
    await tick();
    press(el, "End");
    await tick();
    expect(tree.selectedIndex).toBe(5 + WIDE - 1);
    expect(key(selected(el))).toBe("zulu");
    expect(el.scrollTop).toBe((5 + WIDE) * ROW - 480);
    expect(items(el).length).toBeLessThan(100);
    press(el, "Home");
    expect(el.scrollTop).toBe(0);
    expect(selected(el)?.getAttribute("aria-level")).toBe("1");
  });

  it("prevents the default action of the keys it handles only", async () => {
    const { el } = await setup();
    const down = new KeyboardEvent("keydown", { key: "ArrowDown", cancelable: true });
    el.dispatchEvent(down);
    expect(down.defaultPrevented).toBe(true);
    const tab = new KeyboardEvent("keydown", { key: "Tab", cancelable: true });
    el.dispatchEvent(tab);
    expect(tab.defaultPrevented).toBe(false);
  });

  it("selects on click, toggles on the twisty, activates a leaf on double click", async () => {
    const activated = vi.fn();
    const { tree, el } = await setup(activated);
    items(el)[4]?.click();
    expect(tree.selectedPath).toEqual(["zulu"]);
    items(el)[1]?.querySelector<HTMLElement>(".tdview-twisty")?.click();
    await tick();
    expect(items(el)[1]?.getAttribute("aria-expanded")).toBe("true");
    expect(key(items(el)[2] ?? null)).toBe("x");
    items(el)[2]?.dispatchEvent(new MouseEvent("dblclick", { bubbles: true }));
    expect(activated).toHaveBeenCalledWith(["a", "x"]);
  });

  it("redraws a reused row element that now shows another node", async () => {
    const source = new MemoryDataSource({
      key: "",
      children: [
        { key: "p", children: [{ key: "x", shape: [1], dtype: "int8" }] },
        { key: "q", children: [{ key: "x", shape: [2, 2], dtype: "float64" }] },
      ],
    });
    const tree = new TreeModel(source, source.root);
    const view = new TreeView(tree);
    await tree.expand(0);
    await tree.expand(1);
    const shape = (i: number) =>
      items(view.element)[i]?.querySelector(".tdview-shape")?.textContent;
    expect(shape(2)).toBe("[1] int8");
    tree.collapse(1);
    await tree.expand(2);
    expect(shape(2)).toBe(""); // an empty batch size is not shown
    expect(shape(3)).toBe("[2, 2] float64");
  });

  it("fits a row to its width: annotations give way, then the key is cut in the middle", async () => {
    const long = "decoder.layers.0.self_attn.in_proj_weight";
    const source = new MemoryDataSource({
      key: "",
      children: [
        { key: long, shape: [768, 256], dtype: "float32", bytes: 786_432 },
        { key: "config", kind: "non_tensor", value: { lr: 0.001 } },
      ],
    });
    const tree = new TreeModel(source, source.root);
    // no layout here: the estimate of 0.6 em a character (code 12 px, badge 11, size 13)
    const rowAt = async (width: number) => {
      const inlineValue = (n: NodeSummary) => (n.key === "config" ? "= {lr: 0.001}" : "");
      const view = new TreeView(tree, { width, inlineValue });
      await tree.expand(0);
      const row = items(view.element)[1];
      const config = items(view.element)[2];
      view.dispose();
      return {
        key: key(row ?? null),
        badge: row?.querySelector(".tdview-badge")?.textContent,
        shape: row?.querySelector(".tdview-shape")?.textContent,
        bytes: row?.querySelector(".tdview-bytes")?.textContent,
        config: key(config ?? null),
      };
    };
    expect(await rowAt(1000)).toEqual({
      key: long,
      badge: "tensor",
      shape: "[768, 256] float32",
      bytes: "786 KB",
      config: "config",
    });
    // 48 px of indent, padding, twisty and slack, 41 characters of key (295.2 px), then
    // shape, dtype and size with their gaps (78 + 56.4 + 52.8 px): the badge goes first
    const bare = 48 + 295.2 + 78 + 56.4 + 52.8;
    expect(await rowAt(bare + 55.6)).toMatchObject({ badge: "tensor" });
    expect(await rowAt(bare + 1)).toMatchObject({
      key: long,
      badge: undefined,
      shape: "[768, 256] float32",
    });
    // then whole dims of the shape, never part of a number
    expect((await rowAt(bare - 14.4 + 1)).shape).toBe("[768, …] float32");
    // then everything: the key keeps its start and its end
    const narrow = await rowAt(48 + 32 * 7.2 + 1);
    expect(narrow).toEqual({
      key: "decoder.layers.0.…in_proj_weight",
      badge: undefined,
      shape: "",
      bytes: undefined,
      config: "config",
    });
  });

  it("writes keys as text, never as markup", async () => {
    const source = new MemoryDataSource({
      key: "",
      children: [{ key: '<img src=x onerror="alert(1)">' }],
    });
    const tree = new TreeModel(source, source.root);
    const view = new TreeView(tree);
    await tree.expand(0);
    expect(view.element.querySelector("img")).toBeNull();
    expect(key(items(view.element)[1] ?? null)).toBe('<img src=x onerror="alert(1)">');
  });

  it("stops listening when disposed", async () => {
    const { tree, el, view } = await setup();
    view.dispose();
    press(el, "ArrowDown");
    expect(tree.selectedIndex).toBe(0);
    await tree.expand(1);
    expect(items(el)).toHaveLength(5);
  });
});
