// @vitest-environment happy-dom
import { afterEach, describe, expect, it, vi } from "vitest";
import { ProtocolError, type SearchOptions } from "../src/data-source";
import { MemoryDataSource } from "../src/memory-data-source";
import { measureFor } from "../src/middle-cut";
import type { NodeSummary, Path } from "../src/protocol";
import { type Pick, SearchBox, searchStatus } from "../src/render-search";
import { fitMatchRow, matchMeta, matchPath, matchRow, pathCut, ROW_GAP } from "../src/search-rows";
import { sampleTree, tick, wideKey } from "./trees";

function setup(limit = 50) {
  const source = new MemoryDataSource(sampleTree(120));
  const picked: Path[] = [];
  const box = new SearchBox(source, (path) => picked.push(path), { debounceMs: 0, limit });
  document.body.append(box.element);
  const q = <T extends Element>(sel: string) => box.element.querySelector<T>(sel);
  const paths = () =>
    [...box.element.querySelectorAll(".tdview-search-path")].map((e) => e.textContent);
  return { box, source, picked, q, paths };
}

afterEach(() => {
  document.body.replaceChildren();
});

describe("SearchBox", () => {
  it("says what it takes in its placeholder and tooltip", () => {
    const { box } = setup();
    expect(box.input.placeholder).toContain("*.bias");
    expect(box.input.title).toContain("state_dict key");
    expect(box.input.title).toContain("**/exp_avg");
    expect(box.input.title).toContain("module. and _orig_mod. prefixes are ignored");
  });

  it("shows the true number of matches and pages through all of them", async () => {
    const { box, q, paths } = setup(50);
    await box.search("wide/*");
    expect(q(".tdview-search-status")?.textContent).toBe("matches 1–50 of 120");
    expect(paths()[0]).toBe(`wide/${wideKey(0)}`);
    const prev = q<HTMLButtonElement>(".tdview-search-prev");
    const next = q<HTMLButtonElement>(".tdview-search-next");
    expect(prev?.hidden).toBe(false);
    expect(prev?.disabled).toBe(true);
    expect(next?.disabled).toBe(false);
    next?.click();
    await tick();
    expect(q(".tdview-search-status")?.textContent).toBe("matches 51–100 of 120");
    expect(paths()[0]).toBe(`wide/${wideKey(50)}`);
    next?.click();
    await tick();
    expect(q(".tdview-search-status")?.textContent).toBe("matches 101–120 of 120");
    expect(paths()).toHaveLength(20);
    expect(next?.disabled).toBe(true);
    await box.page(1); // past the end: stays
    expect(paths()[0]).toBe(`wide/${wideKey(100)}`);
    prev?.click();
    await tick();
    expect(paths()[0]).toBe(`wide/${wideKey(50)}`);
  });

  it("hides the pager when every match is on one page", async () => {
    const { box, q } = setup();
    await box.search("zeta");
    expect(q(".tdview-search-status")?.textContent).toBe("1 match");
    expect(q<HTMLButtonElement>(".tdview-search-next")?.hidden).toBe(true);
  });

  it("shows each match's shape, dtype and size", async () => {
    const { box, q } = setup();
    await box.search("zulu");
    expect(q(".tdview-search-meta")?.textContent).toBe("[10, 2] bfloat16 · 40 B");
  });

  it("picks the clicked match on any page", async () => {
    const { box, picked } = setup(50);
    await box.search("wide/*");
    await box.page(1);
    box.element.querySelector<HTMLButtonElement>('[data-match="3"]')?.click();
    expect(picked).toEqual([["wide", wideKey(53)]]);
  });
});

/** A source whose count-only searches (limit 0) wait for `release()`: the page comes
 * first, as from a kernel still walking a fresh checkpoint. */
class HeldCount extends MemoryDataSource {
  readonly held: { release: () => void; signal: AbortSignal | undefined }[] = [];

  override async search(pattern: string, limit: number, opts?: SearchOptions) {
    if (limit === 0) {
      await new Promise<void>((release) => this.held.push({ release, signal: opts?.signal }));
    }
    return super.search(pattern, limit, opts);
  }
}

function held(limit = 50) {
  const source = new HeldCount(sampleTree(120));
  const box = new SearchBox(source, () => undefined, { debounceMs: 0, limit });
  document.body.append(box.element);
  const status = () => box.element.querySelector(".tdview-search-status")?.textContent;
  const next = () => box.element.querySelector<HTMLButtonElement>(".tdview-search-next");
  return { source, box, status, next };
}

describe("SearchBox counting after the first page", () => {
  it("shows the page at once, then the true count", async () => {
    const { source, box, status, next } = held();
    const done = box.search("wide/*");
    await tick();
    expect(status()).toBe("50+ matches, counting…");
    expect(box.element.querySelectorAll(".tdview-search-result")).toHaveLength(50);
    expect(next()?.disabled).toBe(false);
    expect(source.log.map((e) => e.params)).toEqual([
      { pattern: "wide/*", limit: 50, count: false },
    ]);
    expect(source.held).toHaveLength(1); // the count, asked after the page
    next()?.click(); // paging while the count runs asks no second count
    await tick();
    expect(status()).toBe("matches 51–100 of 100+, counting…");
    source.held[0]?.release();
    await done;
    await tick();
    expect(status()).toBe("matches 51–100 of 120");
    expect(source.log.filter((e) => e.params.limit === 0)).toEqual([
      { method: "search", params: { pattern: "wide/*", limit: 0 } },
    ]);
    await box.search("wide/*"); // the count is kept for the pattern's pages
    expect(status()).toBe("matches 1–50 of 120");
    expect(source.log.filter((e) => e.params.limit === 0)).toHaveLength(1);
  });

  it("cancels the count of an older query", async () => {
    const { source, box, status } = held();
    void box.search("wide/*");
    await tick();
    const older = source.held[0];
    expect(older?.signal?.aborted).toBe(false);
    await box.search("zeta"); // one match: the page's walk counted it, no count asked
    expect(older?.signal?.aborted).toBe(true);
    expect(status()).toBe("1 match");
    older?.release();
    await tick();
    expect(status()).toBe("1 match");
    expect(source.held).toHaveLength(1);
  });

  it("keeps a failed page's message when the count comes after it", async () => {
    const { source, box, status, next } = held();
    void box.search("wide/*");
    await tick();
    const search = source.search.bind(source);
    source.search = (pattern, limit, opts) =>
      limit !== 0 && opts?.offset
        ? Promise.reject(new ProtocolError("OSError", "disk gone"))
        : search(pattern, limit, opts);
    next()?.click(); // the next page fails while the count still runs
    await tick();
    expect(status()).toBe("search failed: disk gone");
    source.held[0]?.release();
    await tick();
    await tick();
    expect(status()).toBe("search failed: disk gone");
    expect(box.element.querySelectorAll(".tdview-search-result")).toHaveLength(0);
  });

  it("says so when the count fails, and keeps the page", async () => {
    const { source, box, status } = held();
    const search = source.search.bind(source);
    source.search = (pattern, limit, opts) =>
      limit === 0
        ? Promise.reject(new ProtocolError("OSError", "disk gone"))
        : search(pattern, limit, opts);
    await box.search("wide/*");
    expect(status()).toBe("50+ matches, count failed: disk gone");
    expect(box.element.querySelectorAll(".tdview-search-result")).toHaveLength(50);
  });
});

describe("searchStatus", () => {
  it("counts every match, not only the page's", () => {
    expect(searchStatus({ offset: 0, total: 0, matches: [] })).toBe("no match");
    expect(searchStatus({ offset: 0, total: 2, matches: [1, 2] })).toBe("2 matches");
    expect(searchStatus({ offset: 1000, total: 1234, matches: [1] })).toBe(
      "matches 1,001–1,001 of 1,234",
    );
    const uncounted = { offset: 0, total: 51, matches: Array(50), counted: false };
    expect(searchStatus(uncounted)).toBe("50+ matches, counting…");
    expect(searchStatus({ ...uncounted, offset: 1000, total: 1051 })).toBe(
      "matches 1,001–1,050 of 1,050+, counting…",
    );
  });
});

describe("matchMeta", () => {
  it("leaves out what a node does not have", () => {
    const node = { kind: "tensordict", batch_size: null, bytes: null } as never;
    expect(matchMeta(node)).toBe("");
  });
});

describe("a long match path", () => {
  it("wins over its shape, dtype and size, then is cut in the middle", async () => {
    const source = new MemoryDataSource({
      key: "",
      children: [
        {
          key: "decoder",
          children: [
            { key: "layers.0.self_attn.in_proj_weight", shape: [768, 256], dtype: "float32" },
          ],
        },
      ],
    });
    const box = new SearchBox(source, () => undefined, { debounceMs: 0 });
    document.body.append(box.element);
    // happy-dom lays nothing out: a row 200 px wide, its text measured at 12 px a char
    const width = vi.spyOn(HTMLElement.prototype, "clientWidth", "get").mockReturnValue(200);
    try {
      await box.search("in_proj");
      const path = box.element.querySelector<HTMLElement>(".tdview-search-path");
      const whole = "decoder/layers.0.self_attn.in_proj_weight";
      const [head, tail, ...more] = (path?.textContent ?? "").split("…");
      expect(more).toEqual([]); // one cut, its start and its end kept
      expect(head && whole.startsWith(head)).toBe(true);
      expect(tail && whole.endsWith(tail) && tail.endsWith("proj_weight")).toBe(true);
      expect(path?.title).toBe(whole);
      const meta = box.element.querySelector(".tdview-search-meta");
      expect(meta?.textContent).toBe(""); // everything else gave way first
      const full = "[768, 256] float32 · 786 KB";
      const row = box.element.querySelector<HTMLElement>(".tdview-search-result");
      expect(row?.title).toBe(`${whole}\n${full}`);
      // room for the path and some of the rest: the path whole, the rest shortened
      const measure = measureFor(row as HTMLElement); // as the box measures
      width.mockReturnValue(measure(whole) + measure("[…] · 786 KB") + 3 * ROW_GAP);
      await box.search("in_proj_");
      expect(path?.isConnected).toBe(false);
      const now = box.element.querySelector<HTMLElement>(".tdview-search-path");
      expect(now?.textContent).toBe(whole);
      expect(now?.title).toBe("");
      const shown = box.element.querySelector(".tdview-search-meta")?.textContent ?? "";
      expect(shown).not.toBe("");
      expect(shown.length).toBeLessThan(full.length);
      expect(shown.endsWith("786 KB")).toBe(true);
      // room for the size alone (no " · " before it): it is shown
      width.mockReturnValue(measure(whole) + ROW_GAP + measure("786 KB") + 1);
      await box.search("in_proj_w");
      expect(box.element.querySelector(".tdview-search-meta")?.textContent).toBe("786 KB");
      width.mockReturnValue(1000); // room for all
      await box.search("in_proj");
      expect(box.element.querySelector(".tdview-search-meta")?.textContent).toBe(full);
      expect(box.element.querySelector(".tdview-search-result")?.hasAttribute("title")).toBe(false);
    } finally {
      width.mockRestore();
    }
  });

  it("loses whole keys of its middle first, so that its end stays", () => {
    const chars = (t: string) => [...t].length;
    const path = "model/decoder/layers/3/multihead_attn/in_proj_weight";
    expect(pathCut(path, 60, chars)).toBe(path);
    expect(pathCut(path, 48, chars)).toBe("model/…layers/3/multihead_attn/in_proj_weight");
    expect(pathCut(path, 40, chars)).toBe("model/…3/multihead_attn/in_proj_weight");
    const flat = "state_dict/decoder.layers.3.multihead_attn.in_proj_weight";
    expect(pathCut(flat, 46, chars)).toBe("state_dict/…3.multihead_attn.in_proj_weight");
    // not even the first key and the last: anywhere in the middle
    const cut = pathCut(path, 12, chars);
    expect(chars(cut)).toBeLessThanOrEqual(12);
    expect(cut).toContain("…");
  });

  it("is the subpath, or its keys apart where a key holds a /", () => {
    expect(matchPath(["model", "layers.0.weight"])).toBe("model/layers.0.weight");
    expect(matchPath(["openai/clip", "blobs"])).toBe("openai/clip / blobs");
  });

  it("is left whole where the list has no width yet", async () => {
    const { box } = setup();
    await box.search("a/y/deep");
    const path = box.element.querySelector<HTMLElement>(".tdview-search-path");
    expect(path?.textContent).toBe("a/y/deep");
    expect(path?.title).toBe("");
  });
});

describe("the keyboard", () => {
  function keyOn(target: Element, key: string): KeyboardEvent {
    const event = new KeyboardEvent("keydown", { key, bubbles: true, cancelable: true });
    target.dispatchEvent(event);
    return event;
  }
  const focusedMatch = () => (document.activeElement as HTMLElement | null)?.dataset.match;

  it("goes from the box into the matches and back up", async () => {
    const { box } = setup();
    await box.search("wide/*");
    box.input.focus();
    expect(keyOn(box.input, "ArrowDown").defaultPrevented).toBe(true);
    expect(focusedMatch()).toBe("0");
    const down = keyOn(document.activeElement as Element, "ArrowDown");
    expect(focusedMatch()).toBe("1");
    expect(down.defaultPrevented).toBe(true); // JupyterLab leaves it alone
    keyOn(document.activeElement as Element, "End");
    expect(focusedMatch()).toBe("49");
    keyOn(document.activeElement as Element, "ArrowDown"); // stays on the last
    expect(focusedMatch()).toBe("49");
    keyOn(document.activeElement as Element, "Home");
    keyOn(document.activeElement as Element, "ArrowUp");
    expect(document.activeElement).toBe(box.input);
    keyOn(box.input, "ArrowDown");
    keyOn(document.activeElement as Element, "Escape");
    expect(document.activeElement).toBe(box.input);
  });

  it("picks the focused match with Enter, saying whether it is a folder", async () => {
    const source = new MemoryDataSource(sampleTree(3));
    const picked: [Path, Pick][] = [];
    const box = new SearchBox(source, (path, how) => picked.push([path, how]), {
      debounceMs: 0,
    });
    document.body.append(box.element);
    box.input.value = "a";
    await box.search("a");
    const paths = [...box.element.querySelectorAll(".tdview-search-path")].map(
      (e) => e.textContent,
    );
    expect(paths.slice(0, 1)).toEqual(["a"]);
    box.input.focus();
    keyOn(box.input, "ArrowDown");
    keyOn(document.activeElement as Element, "Enter");
    expect(picked).toEqual([[["a"], { folder: true, fromList: true }]]);
    keyOn(box.input, "Enter"); // in the box: the first match, the box keeps the focus
    await tick();
    expect(picked[1]).toEqual([["a"], { folder: true, fromList: false }]);
    await box.search("zeta");
    keyOn(box.input, "ArrowDown");
    keyOn(document.activeElement as Element, "Enter");
    expect(picked[2]).toEqual([["zeta"], { folder: false, fromList: true }]);
  });

  it("types on in the box from the list", async () => {
    const { box } = setup();
    box.input.value = "ze";
    await box.search("ze");
    keyOn(box.input, "ArrowDown");
    keyOn(document.activeElement as Element, "t");
    expect(document.activeElement).toBe(box.input);
    expect(box.input.value).toBe("zet");
    keyOn(box.input, "ArrowDown");
    keyOn(document.activeElement as Element, "Backspace");
    expect(box.input.value).toBe("ze");
  });
});

describe("what the reading of a pattern did", () => {
  it("is said under the count, and goes with the pattern", async () => {
    const { box, q, paths } = setup();
    await box.search('("a", "y", "deep")');
    expect(paths()).toEqual(["a/y/deep"]);
    const notes = q<HTMLElement>(".tdview-search-notes");
    expect(notes?.hidden).toBe(false);
    expect(notes?.textContent).toBe("read as the key a/y/deep");
    await box.search("td['a']['y']");
    expect(notes?.textContent).toBe("read as the key a/y (td is a variable)");
    await box.search("module.y.deep");
    expect(notes?.textContent).toBe("matched without the module. prefix (DistributedDataParallel)");
    expect(paths()).toEqual(["a/y/deep"]);
    await box.search("deep");
    expect(notes?.hidden).toBe(true);
    await box.search("module.y");
    await box.search("");
    expect(notes?.hidden).toBe(true);
  });
});

describe("an optimizer state's match", () => {
  const state = {
    key: "3",
    path: ["optimizer", "state", "3"],
    kind: "tensordict",
    batch_size: [],
    bytes: 2048,
  } as unknown as NodeSummary;
  const px = (text: string) => text.length * 7; // a code font's 7 px a character

  it("shows its parameter after its path, as the tree's row", () => {
    const row = matchRow(state.path, state, 0, "→ model.layers.0.weight");
    const button = row.querySelector("button") as HTMLElement;
    fitMatchRow(button, state.path, state, 400, px, "→ model.layers.0.weight");
    const said = button.querySelector(".tdview-search-inline")?.textContent;
    expect(said).toBe("→ model.layers.0.weight");
    expect(button.querySelector(".tdview-search-path")?.textContent).toBe("optimizer/state/3");
    expect(button.querySelector(".tdview-search-meta")?.textContent).toBe("2.05 KB");
    // narrower: the name is cut in the middle (its end kept), before the path or size
    fitMatchRow(button, state.path, state, 300, px, "→ model.layers.0.weight");
    const cut = button.querySelector(".tdview-search-inline")?.textContent ?? "";
    expect(cut).toContain("…");
    expect(cut.endsWith("weight")).toBe(true);
    expect(button.querySelector(".tdview-search-path")?.textContent).toBe("optimizer/state/3");
    expect(button.title).toContain("→ model.layers.0.weight");
  });

  it("asks the box's inline value, and shows it once known (refresh)", async () => {
    const source = new MemoryDataSource(sampleTree(3));
    const known = new Map<string, string>();
    const box = new SearchBox(source, () => {}, {
      debounceMs: 0,
      inlineValue: (node) => known.get(node.path.join("/")) ?? "",
    });
    document.body.append(box.element);
    await box.search("zulu");
    const said = () => box.element.querySelector(".tdview-search-inline")?.textContent;
    expect(said()).toBe("");
    const path = box.element.querySelector(".tdview-search-path")?.textContent ?? "";
    known.set(path, "→ encoder.0.weight");
    box.refresh();
    expect(said()).toBe("→ encoder.0.weight");
  });
});
