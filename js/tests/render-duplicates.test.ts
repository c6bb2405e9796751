// @vitest-environment happy-dom
import { describe, expect, it } from "vitest";
import type { DataSource, ProgressInfo } from "../src/data-source";
import { type DuplicatesResult, mayHaveParam } from "../src/duplicates-protocol";
import type { NodeDetails, Path } from "../src/protocol";
import { RelatedSection } from "../src/render-duplicates";
import { tick } from "./trees";

/** A leaf's details, as `node` gives them (only what the section reads matters). */
function leaf(path: Path, extra: Partial<NodeDetails> = {}): NodeDetails {
  return { key: path[path.length - 1], path, kind: "leaf", bytes: 4096, ...extra } as NodeDetails;
}

/** A source answering `duplicates` from `answer(read)`, recording what it was asked. */
function source(answer: (read: boolean) => DuplicatesResult) {
  const asked: boolean[] = [];
  const ds = {
    async duplicates(
      path: Path,
      read: boolean,
      onProgress?: (p: ProgressInfo) => void,
    ): Promise<DuplicatesResult> {
      asked.push(read);
      if (read) onProgress?.({ done: 1, total: 2, label: "hashing" });
      return { ...answer(read), path };
    },
  } as unknown as DataSource;
  return { ds, asked };
}

const decoder = ["model", "decoder", "weight"];
const embed = ["model", "embed", "weight"];

describe("RelatedSection", () => {
  it("says the same bytes at once where the answer is free, links selecting the key", async () => {
    const { ds, asked } = source(() => ({
      path: [],
      same: [embed],
      bytes: 4096,
      confirmed: false,
      searched: true,
    }));
    const section = new RelatedSection(ds);
    const opened: Path[] = [];
    section.onOpen = (p) => opened.push(p);
    section.setNode(leaf(decoder));
    await tick();
    expect(asked).toEqual([false]); // browsing reads nothing
    expect(section.element.hidden).toBe(false);
    expect(section.element.textContent).toContain("Same bytes as model/embed/weight");
    expect(section.element.textContent).toContain("CRC-32");
    section.element.querySelector<HTMLButtonElement>(".tdview-link")?.click();
    expect(opened).toEqual([embed]);
  });

  it("offers to read a folder's candidates, then says what it found", async () => {
    const { ds, asked } = source((read) => ({
      path: [],
      same: read ? [embed] : [],
      bytes: read ? 4096 : null,
      confirmed: read,
      searched: read,
    }));
    const section = new RelatedSection(ds);
    section.setNode(leaf(decoder));
    await tick();
    const find = section.element.querySelector<HTMLButtonElement>(".tdview-find-same");
    expect(find?.textContent).toBe("Find leaves with the same bytes");
    find?.click();
    await tick();
    expect(asked).toEqual([false, true]);
    expect(section.element.textContent).toContain("compared byte by byte");
    expect(section.element.querySelector(".tdview-find-same")).toBeNull();
  });

  it("shows nothing for a leaf no other shares, and for an empty one asks nothing", async () => {
    const { ds, asked } = source(() => ({
      path: [],
      same: [],
      bytes: null,
      confirmed: false,
      searched: true,
    }));
    const section = new RelatedSection(ds);
    section.setNode(leaf(decoder));
    await tick();
    expect(section.element.hidden).toBe(true);
    section.setNode(leaf(decoder, { bytes: 0 }));
    await tick();
    expect(asked).toEqual([false]);
  });

  it("names an optimizer state's parameter, or says why it is not known", () => {
    const { ds } = source(() => ({
      path: [],
      same: [],
      bytes: null,
      confirmed: false,
      searched: true,
    }));
    const section = new RelatedSection(ds);
    const state = { kind: "tensordict", path: ["optim", "state", "0"] } as NodeDetails;
    section.setNode({ ...state, param: { name: "embed.weight", path: embed, reason: null } });
    expect(section.element.textContent).toBe("Parameter embed.weight");
    section.setNode({ ...state, param: { name: null, path: null, reason: "2 parameters fit" } });
    expect(section.element.textContent).toBe("Parameter not known: 2 parameters fit");
  });
});

describe("mayHaveParam", () => {
  it("is a tensordict keyed by a number below a state", () => {
    expect(mayHaveParam({ kind: "tensordict", path: ["optim", "state", "12"] })).toBe(true);
    expect(mayHaveParam({ kind: "leaf", path: ["optim", "state", "12"] })).toBe(false);
    expect(mayHaveParam({ kind: "tensordict", path: ["optim", "state", "w"] })).toBe(false);
    expect(mayHaveParam({ kind: "tensordict", path: ["state"] })).toBe(false);
  });
});
