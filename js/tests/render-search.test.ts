// @vitest-environment happy-dom
import { afterEach, describe, expect, it } from "vitest";
import { ProtocolError, type SearchOptions } from "../src/data-source";
import { MemoryDataSource } from "../src/memory-data-source";
import type { Path } from "../src/protocol";
import { matchMeta, SearchBox, searchStatus } from "../src/render-search";
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
  });

  it("shows the true number of matches and pages through all of them", async () => {
    const { box, q, paths } = setup(50);
    await box.search("wide/*");
    expect(q(".tdview-search-status")?.textContent).toBe("matches 1–50 of 120");
    expect(paths()[0]).toBe(`wide / ${wideKey(0)}`);
    const prev = q<HTMLButtonElement>(".tdview-search-prev");
    const next = q<HTMLButtonElement>(".tdview-search-next");
    expect(prev?.hidden).toBe(false);
    expect(prev?.disabled).toBe(true);
    expect(next?.disabled).toBe(false);
    next?.click();
    await tick();
    expect(q(".tdview-search-status")?.textContent).toBe("matches 51–100 of 120");
    expect(paths()[0]).toBe(`wide / ${wideKey(50)}`);
    next?.click();
    await tick();
    expect(q(".tdview-search-status")?.textContent).toBe("matches 101–120 of 120");
    expect(paths()).toHaveLength(20);
    expect(next?.disabled).toBe(true);
    await box.page(1); // past the end: stays
    expect(paths()[0]).toBe(`wide / ${wideKey(100)}`);
    prev?.click();
    await tick();
    expect(paths()[0]).toBe(`wide / ${wideKey(50)}`);
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
  it("wraps at its separators only", async () => {
    const { box } = setup();
    await box.search("a/y/deep");
    const path = box.element.querySelector(".tdview-search-path");
    expect(path?.classList.contains("tdview-path-text")).toBe(true);
    expect(path?.textContent).toBe("a / y / deep");
    expect(path?.querySelectorAll("wbr")).toHaveLength(2);
  });
});
