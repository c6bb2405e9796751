// @vitest-environment happy-dom
/**
 * A match picked in the search box, in the whole view: a folder shows expanded with its
 * children, a row picked from the list hands the tree the keys.
 */
import { afterEach, describe, expect, it } from "vitest";
import { MemoryDataSource } from "../src/memory-data-source";
import { parseState } from "../src/protocol";
import { App } from "../src/render-app";
import { loadGolden } from "./golden";
import { sampleTree, tick } from "./trees";

function setup() {
  const source = new MemoryDataSource(sampleTree(30));
  const parsed = parseState(loadGolden("state").message);
  if (!parsed) throw new Error("golden state does not parse");
  const app = new App({
    source,
    state: { ...parsed, selected: [], root: source.root },
    detailsDelayMs: 0,
  });
  document.body.append(app.element);
  const input = app.element.querySelector<HTMLInputElement>(".tdview-search-input");
  if (!input) throw new Error("no search box");
  return { app, input };
}

const key = (event: string, target: EventTarget) =>
  target.dispatchEvent(new KeyboardEvent("keydown", { key: event, bubbles: true }));

/** The labels of the tree's rows below the root, as the model has them. */
function rows(app: App): string[] {
  const tree = app.tree;
  if (!tree) return [];
  return Array.from({ length: tree.rowCount }, (_, i) => tree.row(i)?.label ?? "");
}

function expandedSelection(app: App): boolean {
  return app.tree?.row(app.tree.selectedIndex)?.expanded === true;
}

async function until(test: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !test(); i++) await tick();
}

afterEach(() => {
  document.body.replaceChildren();
});

describe("a folder picked in the search box", () => {
  it("shows expanded with its children on Enter in the box", async () => {
    const { app, input } = setup();
    await until(() => (app.tree?.rowCount ?? 0) > 1);
    expect(rows(app)).not.toContain("y");
    input.value = '("a", "y")'; // the widget's own copied key
    input.focus();
    key("Enter", input);
    await until(() => app.tree?.selectedPath?.length === 2 && expandedSelection(app));
    expect(app.tree?.selectedPath).toEqual(["a", "y"]);
    const at = app.tree?.selectedIndex ?? -1;
    expect(app.tree?.row(at)?.expanded).toBe(true);
    expect(app.tree?.row(at + 1)?.node?.path).toEqual(["a", "y", "deep"]);
    expect(document.activeElement).toBe(input); // typed and Enter: the box keeps the keys
  });

  it("shows expanded from the list, and the tree takes the keys", async () => {
    const { app, input } = setup();
    input.value = "wide";
    input.dispatchEvent(new Event("input"));
    await until(() => app.element.querySelectorAll(".tdview-search-result").length > 0);
    input.focus();
    key("ArrowDown", input);
    const focused = document.activeElement as HTMLElement;
    expect(focused.classList.contains("tdview-search-result")).toBe(true);
    key("Enter", focused);
    await until(() => app.tree?.selectedPath?.length === 1 && expandedSelection(app));
    expect(app.tree?.selectedPath).toEqual(["wide"]);
    expect(rows(app)).toContain("k000029");
    expect(document.activeElement).toBe(app.view?.element);
  });

  it("leaves a leaf picked as it is", async () => {
    const { app, input } = setup();
    input.value = "a/x";
    key("Enter", input);
    await until(() => app.tree?.selectedPath?.length === 2);
    expect(app.tree?.selectedPath).toEqual(["a", "x"]);
    expect(app.tree?.row(app.tree.selectedIndex)?.expanded).toBe(false);
  });
});
