// @vitest-environment happy-dom
import { describe, expect, it, vi } from "vitest";
import type { CheckResult } from "../src/check-protocol";
import { type CallOptions, cancelledError, type ProgressInfo } from "../src/data-source";
import { humanBytes } from "../src/format";
import type { NodeDetails } from "../src/protocol";
import { type CheckFetch, CheckView, checkedText, verdictText } from "../src/render-check";
import { loadGolden } from "./golden";

const reply = loadGolden("reply_check").message as unknown as { result: CheckResult };

function node(path: string[], kind = "tensordict"): NodeDetails {
  return { path, kind } as unknown as NodeDetails;
}

describe("CheckView", () => {
  it("lists the golden reply's problems with their keys, and a key selects its node", async () => {
    const seen: { path: string[]; values: boolean }[] = [];
    const fetch: CheckFetch = async (path, values, onProgress) => {
      seen.push({ path, values });
      onProgress({ done: 10, total: 20, label: "CRC-32" });
      return reply.result;
    };
    const view = new CheckView(fetch, "ckpt.tdz");
    const revealed: string[][] = [];
    view.onReveal = (path) => revealed.push(path);
    view.setNode(node(["model"]));
    expect(view.toggle.hidden).toBe(false);
    view.toggle.click();
    await vi.waitFor(() =>
      expect(view.element.querySelector(".tdview-check-verdict")).toBeTruthy(),
    );
    expect(seen).toEqual([{ path: ["model"], values: false }]);
    expect(view.element.hidden).toBe(false);
    const rows = [...view.element.querySelectorAll(".tdview-check-problem")];
    expect(rows.map((r) => r.querySelector(".tdview-check-kind")?.textContent)).toEqual([
      "stale crc",
      "nan",
    ]);
    expect(rows[0]?.querySelector(".tdview-check-key")?.textContent).toBe("model/layers/1/w");
    rows[1]?.querySelector<HTMLButtonElement>(".tdview-check-key")?.click();
    expect(revealed).toEqual([["model", "weight"]]);
    // a group of duplicates: each key selects too
    const dup = view.element.querySelectorAll(".tdview-check-duplicates .tdview-check-key");
    expect([...dup].map((b) => b.textContent)).toEqual(["model/embed/weight", "model/head/weight"]);
    expect(view.element.querySelector(".tdview-check-verdict")?.textContent).toContain(
      "2 problems",
    );
    // the result stays on show when another node is selected
    view.setNode(node(["model", "weight"], "leaf"));
    expect(view.element.querySelectorAll(".tdview-check-problem")).toHaveLength(2);
    // "Read every value" runs it again, on the node checked, with values
    const values = view.element.querySelector<HTMLInputElement>(".tdview-check-values input");
    if (values) values.checked = true;
    values?.dispatchEvent(new Event("change"));
    await vi.waitFor(() => expect(seen).toHaveLength(2));
    expect(seen[1]).toEqual({ path: ["model"], values: true });
  });

  it("cancels a check that runs, and says so", async () => {
    let signal: AbortSignal | undefined;
    const fetch: CheckFetch = (_p, _v, _progress: (p: ProgressInfo) => void, opts?: CallOptions) =>
      new Promise((_resolve, reject) => {
        signal = opts?.signal;
        signal?.addEventListener("abort", () => reject(cancelledError()));
      });
    const view = new CheckView(fetch, "ckpt.tdz");
    view.setNode(node([]));
    const running = view.run();
    expect(view.isRunning).toBe(true);
    const cancel = view.element.querySelector<HTMLButtonElement>(".tdview-cancel-button");
    expect(cancel?.hidden).toBe(false);
    cancel?.click();
    expect(await running).toBeNull();
    expect(signal?.aborted).toBe(true);
    expect(view.element.textContent).toContain("Check of ckpt.tdz cancelled.");
    expect(view.isRunning).toBe(false);
  });

  it("has no button where the source cannot check, or for a side file", () => {
    const none = new CheckView(null);
    none.setNode(node([]));
    expect(none.toggle.hidden).toBe(true);
    const view = new CheckView(async () => reply.result);
    view.setNode(node(["config.json"], "json"));
    expect(view.toggle.hidden).toBe(true);
    view.setNode(node(["run.pkl"], "pickle"));
    expect(view.toggle.hidden).toBe(true);
    // a folder of checkpoints and its sub-folders: checked member by member
    for (const kind of ["collection", "folder", "checkpoint"]) {
      view.setNode(node(kind === "collection" ? [] : ["runs"], kind));
      expect(view.toggle.hidden).toBe(false);
    }
  });

  it("says healthy, and what was checked", () => {
    const healthy: CheckResult = {
      ...reply.result,
      healthy: true,
      problems: [],
      duplicates: [],
      checked: {
        checkpoints: 1,
        nodes: 3,
        leaves: 2,
        entries: 4,
        bytes: 2048,
        values: 0,
        no_crc: 0,
      },
      values: false,
    };
    expect(verdictText(healthy)).toBe("Healthy");
    expect(checkedText(healthy)).toBe(`2 leaves, 4 archive entries, ${humanBytes(2048)} read`);
    const folder = { ...healthy.checked, checkpoints: 3, entries: 0, bytes: 0, no_crc: 2 };
    expect(checkedText({ ...healthy, checked: folder })).toBe(
      "3 checkpoints, 2 leaves, sizes only for 2 leaves: no CRC-32 recorded",
    );
    expect(verdictText({ ...reply.result, more: 3 })).toBe("5 problems");
  });
});
