import { afterEach, describe, expect, it, vi } from "vitest";
import { CommDataSource, KERNEL_RESTARTED } from "../src/comm-data-source";
import { ProtocolError } from "../src/data-source";
import { parseCancel, parseRequest } from "../src/protocol";
import { FakeModel } from "./fake-model";
import { loadGolden } from "./golden";

const FIRST = 1000;

function setup(timeoutMs = 60_000) {
  const model = new FakeModel();
  const source = new CommDataSource(model, { firstId: FIRST, timeoutMs });
  return { model, source };
}

/** The golden reply of `name`, re-addressed to `id`. */
function golden(name: string, id: number) {
  const g = loadGolden(name);
  return { message: { ...g.message, id }, buffers: g.buffers };
}

async function rejection(promise: Promise<unknown>): Promise<ProtocolError> {
  try {
    await promise;
  } catch (e) {
    if (e instanceof ProtocolError) return e;
    throw e;
  }
  throw new Error("expected a rejection");
}

afterEach(() => {
  vi.useRealTimers();
});

describe("CommDataSource", () => {
  it("sends valid v1 requests with increasing ids", () => {
    const { model, source } = setup();
    void source.children(["obs"], 200, 200);
    void source.search("pix", 10);
    const [a, b] = model.sent.map(parseRequest);
    expect(a).toEqual({
      kind: "tdview:request",
      v: 1,
      id: FIRST,
      method: "children",
      params: { path: ["obs"], offset: 200, limit: 200 },
    });
    expect(b?.id).toBe(FIRST + 1);
    expect(b?.method).toBe("search");
    expect(b?.params).toEqual({ pattern: "pix", limit: 10 });
    void source.search("pix", 10, { count: false });
    expect(parseRequest(model.sent[2])?.params).toEqual({
      pattern: "pix",
      limit: 10,
      count: false,
    });
  });

  it("resolves each call with its own reply, in any order", async () => {
    const { model, source } = setup();
    const children = source.children([], 0, 200);
    const search = source.search("o", 3);
    const s = golden("reply_search", FIRST + 1);
    const c = golden("reply_children", FIRST);
    model.emit("msg:custom", s.message, s.buffers);
    model.emit("msg:custom", c.message, c.buffers);
    expect((await children).children.map((n) => n.key)).toEqual([
      "obs",
      "action",
      "reward",
      "done",
      "info",
    ]);
    expect((await search).truncated).toBe(true);
    expect(source.pendingCount).toBe(0);
  });

  it("ignores other ids, other kinds and junk", async () => {
    const { model, source } = setup();
    const node = source.node(["obs", "pixels"]);
    for (const junk of [
      null,
      "x",
      42,
      [],
      { kind: "tdview:reply" },
      { id: FIRST, kind: "other" },
    ]) {
      model.emit("msg:custom", junk, []);
    }
    model.emit("msg:custom", golden("reply_node", FIRST + 7).message, []);
    expect(source.pendingCount).toBe(1);
    model.emit("msg:custom", golden("reply_node", FIRST).message, []);
    expect((await node).storage?.cost).toBe("map");
  });

  it("turns an error reply into a ProtocolError with type, message and path", async () => {
    const { model, source } = setup();
    const preview = source.preview(["obs", "pixels"], 4);
    model.emit("msg:custom", golden("reply_error", FIRST).message, []);
    const error = await rejection(preview);
    expect(error.type).toBe("LeafDataError");
    expect(error.path).toEqual(["obs", "pixels"]);
    expect(error.message).toMatch(/needs 21168000/);
  });

  it("rejects a malformed reply as BadReply, naming the field", async () => {
    const { model, source } = setup();
    const children = source.children([], 0, 200);
    const bad: Record<string, unknown> = golden("reply_children", FIRST).message;
    bad.result = { ...(bad.result as object), total: "five" };
    model.emit("msg:custom", bad, []);
    const error = await rejection(children);
    expect(error.type).toBe("BadReply");
    expect(error.message).toContain("result.total");

    const node = source.node([]);
    model.emit("msg:custom", { kind: "tdview:reply", v: 1, id: FIRST + 1, ok: true }, []);
    expect((await rejection(node)).type).toBe("BadReply");
  });

  it("decodes the buffers of a preview", async () => {
    const { model, source } = setup();
    const preview = source.preview(["action"], 4);
    const g = golden("reply_preview", FIRST);
    model.emit("msg:custom", g.message, g.buffers);
    const data = await preview;
    expect(data.display_dtype).toBe("float32");
    expect(data.slice.shape).toEqual([4, 6]);
    expect(data.slice.data).toBeInstanceOf(Float32Array);
    expect(data.histogram?.counts.data).toBeInstanceOf(BigInt64Array);
  });

  it("rejects a preview whose buffers are missing", async () => {
    const { model, source } = setup();
    const preview = source.preview(["action"], 4);
    model.emit("msg:custom", golden("reply_preview", FIRST).message, []);
    const error = await rejection(preview);
    expect(error.type).toBe("BadReply");
    expect(error.message).toContain("buffer 0 is missing");
  });

  it("cancels on abort: rejects, sends a cancel, ignores the late reply", async () => {
    const { model, source } = setup();
    const abort = new AbortController();
    const children = source.children([], 0, 200, { signal: abort.signal });
    abort.abort();
    expect((await rejection(children)).type).toBe("Cancelled");
    expect(parseCancel(model.sent[1])).toEqual({ kind: "tdview:cancel", v: 1, id: FIRST });
    model.emit("msg:custom", golden("reply_children", FIRST).message, []);
    expect(source.pendingCount).toBe(0);
  });

  it("does not send when the signal has already fired", async () => {
    const { model, source } = setup();
    const abort = new AbortController();
    abort.abort();
    expect((await rejection(source.devices({ signal: abort.signal }))).cancelled).toBe(true);
    expect(model.sent).toEqual([]);
  });

  it("times out without a reply, and sends a cancel", async () => {
    vi.useFakeTimers();
    const { model, source } = setup(5000);
    const node = source.node([]);
    vi.advanceTimersByTime(4999);
    expect(source.pendingCount).toBe(1);
    vi.advanceTimersByTime(1);
    const error = await rejection(node);
    expect(error.type).toBe("Timeout");
    expect(error.message).toBe("no reply to node within 5 s");
    expect(model.sentOf("tdview:cancel")).toHaveLength(1);
  });

  it("reports load progress, each message restarting the timeout", async () => {
    vi.useFakeTimers();
    const { model, source } = setup(1000);
    const seen: string[] = [];
    const params = { path: ["obs"], device: "cpu", mode: "r" as const, allow_pickle: false };
    const load = source.load({ ...params, variable: "obs" }, (p) =>
      seen.push(`${p.done}/${p.total} ${p.label}`),
    );
    const progress = loadGolden("progress").message;
    for (let i = 0; i < 3; i++) {
      vi.advanceTimersByTime(900);
      model.emit("msg:custom", { ...progress, id: FIRST, done: i }, []);
    }
    model.emit("msg:custom", golden("reply_load", FIRST).message, []);
    const result = await load;
    expect(result.variable).toBe("obs");
    expect(seen).toEqual(["0/2 obs/pixels", "1/2 obs/pixels", "2/2 obs/pixels"]);
  });

  it.each(["comm:close", "destroy"])("rejects everything pending on %s", async (event) => {
    const { model, source } = setup();
    const calls = [source.node([]), source.children([], 0, 200), source.devices()];
    model.emit(event);
    for (const call of calls) expect((await rejection(call)).type).toBe("ConnectionLost");
    expect((await rejection(source.node([]))).type).toBe("ConnectionLost");
    expect(model.sentOf("tdview:cancel")).toEqual([]);
  });

  it("dispose rejects pending calls and removes its listeners", async () => {
    const { model, source } = setup();
    const call = source.search("x", 5);
    expect(model.listenerCount()).toBe(3);
    source.dispose();
    expect((await rejection(call)).type).toBe("ConnectionLost");
    expect(model.listenerCount()).toBe(0);
  });

  it("rejects when the message cannot be sent", async () => {
    const { model, source } = setup();
    model.failSend = true;
    const error = await rejection(source.node([]));
    expect(error.type).toBe("ConnectionLost");
    expect(error.message).toBe(KERNEL_RESTARTED);
    expect(source.pendingCount).toBe(0);
  });

  it("after a send throws (a kernel restart), says so once and stops sending", async () => {
    const model = new FakeModel();
    const lost: string[] = [];
    const source = new CommDataSource(model, { onLost: (e) => lost.push(e.message) });
    const waiting = source.children([], 0, 10);
    model.failSend = true;
    const errors = await Promise.all([
      rejection(waiting),
      rejection(source.node([])),
      rejection(source.search("x", 5)),
    ]);
    expect(errors.map((e) => e.message)).toEqual([
      KERNEL_RESTARTED,
      KERNEL_RESTARTED,
      KERNEL_RESTARTED,
    ]);
    expect(lost).toEqual([KERNEL_RESTARTED]);
    model.failSend = false;
    await rejection(source.node([]));
    expect(model.sent).toHaveLength(1); // only the first children request went out
    source.dispose();
    expect(lost).toHaveLength(1); // a dispose is not a loss to report
  });

  it("gives views that share a model different ids by default", () => {
    const model = new FakeModel();
    const a = new CommDataSource(model);
    const b = new CommDataSource(model);
    void a.node([]);
    void b.node([]);
    const [ra, rb] = model.sent.map(parseRequest);
    expect(ra?.id).not.toBe(rb?.id);
    expect(Number.isSafeInteger(ra?.id)).toBe(true);
  });
});
