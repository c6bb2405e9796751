// @vitest-environment happy-dom
/**
 * torchrl replay-buffer storages: the rows written of a storage (`rows` of a node's
 * details and of a preview), the `rows_scope` param, and the preview's toggle.
 */
import { afterEach, describe, expect, it } from "vitest";
import { CommDataSource } from "../src/comm-data-source";
import { type PreviewData, resolvePreview } from "../src/data-source";
import { MemoryDataSource, type MemoryNode } from "../src/memory-data-source";
import { makeRequest, parseRequest, parseResult } from "../src/protocol";
import { detailFields, rowsText } from "../src/render-details";
import { PreviewSection, rowsToggle, tableCaption } from "../src/render-preview";
import { attachKernel } from "./fake-kernel";
import { FakeModel } from "./fake-model";
import { loadGolden, mutate } from "./golden";
import { tick } from "./trees";

/** A storage of capacity 10 with 4 rows written (values 7, 8, 9, 10, then zeros). */
function storageTree(): MemoryNode {
  return {
    key: "",
    batch_size: [10],
    rows: { written: 4, capacity: 10 },
    children: [
      { key: "step_count", shape: [10], dtype: "int64", data: [7, 8, 9, 10, 0, 0, 0, 0, 0, 0] },
      {
        key: "next",
        batch_size: [10],
        children: [
          { key: "reward", shape: [10, 2], data: Array.from({ length: 20 }, (_, i) => i) },
        ],
      },
      { key: "other", shape: [3], data: [1, 2, 3] },
    ],
  };
}

const big = { written: 20_000, capacity: 100_000 };
const storageDetails = (rows: typeof big | null) => ({
  ...parseResult("node", (loadGolden("reply_node_storage").message as { result: unknown }).result),
  rows,
});

afterEach(() => {
  document.body.replaceChildren();
});

describe("the protocol", () => {
  const request = loadGolden("request_preview").message;

  it("takes rows_scope on a preview only as written or all, and only when given", () => {
    for (const scope of ["written", "all"]) {
      const message = { ...request, params: { ...(request.params as object), rows_scope: scope } };
      expect(parseRequest(message)?.params).toMatchObject({ rows_scope: scope });
    }
    expect(parseRequest(request)?.params).not.toHaveProperty("rows_scope");
    for (const bad of ["some", 42, null, true]) {
      const message = { ...request, params: { ...(request.params as object), rows_scope: bad } };
      expect(parseRequest(message), String(bad)).toBeNull();
    }
    const built = makeRequest(3, "preview", { path: ["a"], rows: 4, rows_scope: "all" });
    expect(parseRequest(built)?.params).toEqual({ path: ["a"], rows: 4, rows_scope: "all" });
  });

  it("reads the rows of a storage's details and of a preview", () => {
    const node = loadGolden("reply_node_storage").message as { result: unknown };
    expect(parseResult("node", node.result).rows).toEqual(big);
    const bad = mutate(node, ["result", "rows", "written"], (parent, key) => {
      parent[key] = -1;
    });
    expect(() => parseResult("node", bad.result)).toThrow(/result\.rows\.written/);
    const preview = loadGolden("reply_preview_storage").message as { result: unknown };
    expect(parseResult("preview", preview.result).rows).toEqual({
      written: 4,
      capacity: 10,
      scope: "written",
    });
    const odd = mutate(preview, ["result", "rows", "scope"], (parent, key) => {
      parent[key] = "some";
    });
    expect(() => parseResult("preview", odd.result)).toThrow(/result\.rows\.scope/);
    const plain = loadGolden("reply_preview").message as { result: unknown };
    expect(parseResult("preview", plain.result).rows).toBeNull();
  });
});

describe("MemoryDataSource below a storage", () => {
  it("previews the written rows unless asked for all, as the kernel does", async () => {
    const source = new MemoryDataSource(storageTree());
    const written = await source.preview(["step_count"], 20);
    expect([...written.slice.data].map(Number)).toEqual([7, 8, 9, 10]);
    expect(written.stats).toMatchObject({ min: 7, max: 10, count: 4 });
    expect(written.shape).toEqual([10]);
    expect(written.rows).toEqual({ written: 4, capacity: 10, scope: "written" });
    const all = await source.preview(["step_count"], 20, { rowsScope: "all" });
    expect(all.slice.shape).toEqual([10]);
    expect(all.stats).toMatchObject({ min: 0, count: 10 });
    expect(all.rows?.scope).toBe("all");
    const nested = await source.preview(["next", "reward"], 20);
    expect(nested.slice.shape).toEqual([4, 2]);
    expect(source.calls("preview").map((c) => c.params.rows_scope)).toEqual([
      undefined,
      "all",
      undefined,
    ]);
  });

  it("leaves a leaf of another dim 0 whole, with no rows", async () => {
    const source = new MemoryDataSource(storageTree());
    const other = await source.preview(["other"], 20);
    expect(other.rows).toBeNull();
    expect(other.slice.shape).toEqual([3]);
    expect((await source.node([])).rows).toEqual({ written: 4, capacity: 10 });
    expect((await source.node(["next"])).rows).toBeNull();
  });
});

describe("CommDataSource", () => {
  it("sends rows_scope only when it is all, and keeps the reply's rows", async () => {
    const model = new FakeModel();
    const source = new CommDataSource(model, { firstId: 1 });
    void source.preview(["step_count"], 4);
    const all = source.preview(["step_count"], 4, { rowsScope: "all" });
    const [first, second] = model.sent.map(parseRequest);
    expect(first?.params).toEqual({ path: ["step_count"], rows: 4 });
    expect(second?.params).toEqual({ path: ["step_count"], rows: 4, rows_scope: "all" });
    const g = loadGolden("reply_preview_storage");
    model.emit("msg:custom", { ...g.message, id: 2 }, g.buffers);
    expect((await all).rows).toEqual({ written: 4, capacity: 10, scope: "written" });
  });
});

describe("details", () => {
  it("say how many rows of a storage were written", () => {
    expect(rowsText(big)).toBe("20,000 of 100,000 rows written");
    expect(detailFields(storageDetails(big))).toContainEqual([
      "Replay buffer",
      "20,000 of 100,000 rows written",
    ]);
    const labels = detailFields(storageDetails(null)).map(([label]) => label);
    expect(labels).not.toContain("Replay buffer");
  });
});

describe("the preview's rows toggle", () => {
  function goldenPreview(): PreviewData {
    const g = loadGolden("reply_preview_storage");
    return resolvePreview(
      parseResult("preview", (g.message as { result: unknown }).result),
      g.buffers,
    );
  }

  it("offers the written rows only and all rows, the current scope checked", () => {
    const picked: string[] = [];
    const toggle = rowsToggle({ ...big, scope: "written" }, (s) => picked.push(s));
    document.body.append(toggle);
    const labels = [...toggle.querySelectorAll("label")].map((l) => l.textContent);
    expect(labels).toEqual(["written rows only (20,000 of 100,000)", "all rows"]);
    const [written, all] = [...toggle.querySelectorAll<HTMLInputElement>("input")];
    expect(written?.checked).toBe(true);
    expect(all?.checked).toBe(false);
    all?.click();
    expect(picked).toEqual(["all"]);
  });

  it("says the table shows written rows", () => {
    const data = goldenPreview();
    expect(tableCaption(data)).toBe("4 written rows");
    expect(tableCaption({ ...data, rows: { written: 40, capacity: 100, scope: "written" } })).toBe(
      "first 4 of 40 written rows",
    );
    expect(tableCaption({ ...data, rows: null })).toBe("first 4 of 10 rows");
  });

  it("asks again for all rows, and keeps that choice for the next leaf", async () => {
    const source = new MemoryDataSource(storageTree());
    const section = new PreviewSection(source, { rows: 20 });
    document.body.append(section.element);
    section.setNode(await source.node(["step_count"]));
    await section.run();
    const el = section.element;
    const radio = (value: string) =>
      el.querySelector<HTMLInputElement>(`.tdview-rows-scope input[value="${value}"]`);
    expect(radio("written")?.checked).toBe(true);
    expect(el.querySelector(".tdview-rows-scope")?.textContent).toContain(
      "written rows only (4 of 10)",
    );
    expect(el.querySelectorAll("tbody tr")).toHaveLength(4);
    radio("all")?.click();
    // the toggle stays, disabled, while the other rows are read
    expect(el.querySelector<HTMLFieldSetElement>(".tdview-rows-scope")?.disabled).toBe(true);
    await tick();
    expect(source.calls("preview").at(-1)?.params).toEqual({
      path: ["step_count"],
      rows: 20,
      rows_scope: "all",
    });
    expect(radio("all")?.checked).toBe(true);
    expect(el.querySelectorAll("tbody tr")).toHaveLength(10);
    expect(section.rowsScope).toBe("all");
    section.setNode(await source.node(["next", "reward"]));
    await section.run();
    expect(source.calls("preview").at(-1)?.params.rows_scope).toBe("all");
    expect(el.querySelectorAll("tbody tr")).toHaveLength(10);
    radio("written")?.click();
    await tick();
    expect(el.querySelectorAll("tbody tr")).toHaveLength(4);
  });

  it("is absent outside a storage", async () => {
    const source = new MemoryDataSource(storageTree());
    const section = new PreviewSection(source, { rows: 20 });
    section.setNode(await source.node(["other"]));
    await section.run();
    expect(section.element.querySelector(".tdview-rows-scope")).toBeNull();
    expect(section.element.querySelector(".tdview-preview-table")).not.toBeNull();
  });

  it("reaches the kernel's rows_scope through the comm", async () => {
    const model = new FakeModel();
    const memory = new MemoryDataSource(storageTree());
    const kernel = attachKernel(model, memory);
    const section = new PreviewSection(new CommDataSource(model, { firstId: 1 }), { rows: 20 });
    document.body.append(section.element);
    section.setNode(await memory.node(["step_count"]));
    await section.run();
    section.element.querySelector<HTMLInputElement>('input[value="all"]')?.click();
    await tick();
    await tick();
    expect(kernel.requests.map((r) => (r.params as { rows_scope?: string }).rows_scope)).toEqual([
      undefined,
      "all",
    ]);
    expect(section.element.querySelectorAll("tbody tr")).toHaveLength(10);
  });
});
