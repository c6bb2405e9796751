// @vitest-environment happy-dom
import { afterEach, describe, expect, it } from "vitest";
import { MemoryDataSource, type MemoryNode } from "../src/memory-data-source";
import type { Options } from "../src/protocol";
import { LoadPanel } from "../src/render-load";
import { RanksView, rankShares, ranksScript, splittableRows } from "../src/render-ranks";
import { tick } from "./trees";

const OPTIONS: Options = { device: "cpu", mode: "r", allow_pickle: false, robust_key: true };

/** `tdview.distributed.rows_of_rank`, written out as Python computes it. */
function rowsOfRank(n: number, rank: number, world: number): [number, number] {
  return [Math.floor((rank * n) / world), Math.floor(((rank + 1) * n) / world)];
}

function tree(): MemoryNode {
  return {
    key: "",
    children: [
      {
        key: "replay",
        batch_size: [1000],
        rollup: { bytes: 4_000_000, numel: 1, leaves: 2, by_dtype: {} },
        children: [
          { key: "obs", shape: [1000, 8] },
          { key: "reward", shape: [1000] },
        ],
      },
      { key: "x", shape: [4] },
    ],
  };
}

afterEach(() => document.body.replaceChildren());

describe("rankShares", () => {
  it("splits the rows as rows_of_rank does: contiguous, sizes one apart, every row once", () => {
    for (const [n, world] of [
      [10, 3],
      [2, 3],
      [0, 4],
      [301, 2],
      [1_000_003, 7],
    ] as const) {
      const shares = rankShares(n, 1000, world);
      expect(shares.map((s) => [s.start, s.stop])).toEqual(
        Array.from({ length: world }, (_, r) => rowsOfRank(n, r, world)),
      );
      expect(shares.reduce((sum, s) => sum + (s.stop - s.start), 0)).toBe(n);
    }
  });

  it("gives each rank its share of the bytes, unknown when the size is", () => {
    expect(rankShares(10, 1000, 4).map((s) => s.bytes)).toEqual([200, 300, 200, 300]);
    expect(rankShares(10, null, 2).map((s) => s.bytes)).toEqual([null, null]);
  });
});

describe("ranksScript", () => {
  it("is the torchrun script of load_shard on the selection", () => {
    expect(ranksScript("rb.tdz", ["storage"], 4)).toBe(
      [
        "# torchrun --nproc_per_node=4 load_rows.py",
        "import torch.distributed as dist",
        "import tdview.distributed",
        "",
        "# gloo on CPUs, nccl on GPUs",
        'dist.init_process_group("gloo")',
        'rows = tdview.distributed.load_shard("rb.tdz", "storage")',
      ].join("\n"),
    );
    expect(ranksScript("a b", [], 2)).toContain('load_shard("a b")');
    expect(ranksScript("x", ["a/b", "c"], 2)).toContain('load_shard("x", ("a/b", "c"))');
  });
});

describe("RanksView in the load form", () => {
  async function setup() {
    const source = new MemoryDataSource(tree(), { source: "demo_ckpt.tdz", latencyMs: 0 });
    const panel = new LoadPanel(source, { source: "demo_ckpt.tdz", options: OPTIONS, open: true });
    document.body.append(panel.element);
    const q = <T extends Element = HTMLElement>(selector: string) => {
      const found = panel.element.querySelector<T>(selector);
      if (!found) throw new Error(`no ${selector}`);
      return found;
    };
    const show = async (key: string) => panel.setNode(await source.node([key]));
    return { q, show };
  }

  it("shows each rank's rows and bytes and the script once ticked", async () => {
    const { q, show } = await setup();
    await show("replay");
    await tick();
    expect(q(".tdview-ranks").hidden).toBe(false);
    expect(q(".tdview-ranks-body").hidden).toBe(true);
    const toggle = q<HTMLInputElement>(".tdview-ranks-toggle");
    toggle.checked = true;
    toggle.dispatchEvent(new Event("change"));
    const rows = [...q(".tdview-ranks-table").querySelectorAll("tbody tr")].map((tr) =>
      [...tr.querySelectorAll("td")].map((td) => td.textContent),
    );
    expect(rows).toEqual([
      ["0", "0:250 (250)", "1.00 MB"],
      ["1", "250:500 (250)", "1.00 MB"],
      ["2", "500:750 (250)", "1.00 MB"],
      ["3", "750:1,000 (250)", "1.00 MB"],
    ]);
    expect(q(".tdview-ranks-code").textContent).toContain(
      'rows = tdview.distributed.load_shard("demo_ckpt.tdz", "replay")',
    );
    const count = q<HTMLInputElement>(".tdview-ranks-count");
    count.value = "3";
    count.dispatchEvent(new Event("input"));
    expect(q(".tdview-ranks-table").querySelectorAll("tbody tr")).toHaveLength(3);
    expect(q(".tdview-ranks-code").textContent).toContain("--nproc_per_node=3");
    count.value = "100";
    count.dispatchEvent(new Event("input"));
    const cells = [...q(".tdview-ranks-table").querySelectorAll("tbody tr")].map((tr) =>
      [...tr.querySelectorAll("td")].map((td) => td.textContent),
    );
    expect(cells).toHaveLength(8);
    expect(cells[6]).toEqual(["… 93 more"]);
    expect(cells[7]).toEqual(["99", "990:1,000 (10)", "40.0 KB"]);
  });

  it("hides for a leaf and for a node without batch dims", async () => {
    const { q, show } = await setup();
    await show("x");
    expect(q(".tdview-ranks").hidden).toBe(true);
    expect(splittableRows(null)).toBeNull();
  });

  it("keeps the rank count within 1..4096", () => {
    const view = new RanksView();
    const count = view.element.querySelector<HTMLInputElement>(".tdview-ranks-count");
    if (!count) throw new Error("no count");
    count.value = "0";
    expect(view.ranks).toBe(1);
    count.value = "99999";
    expect(view.ranks).toBe(4096);
  });
});
