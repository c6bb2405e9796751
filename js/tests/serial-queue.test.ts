import { describe, expect, it } from "vitest";
import { SerialQueue } from "../src/serial-queue";
import { tick } from "./trees";

function setup() {
  const started: string[] = [];
  let running = 0;
  let maxRunning = 0;
  const queue = new SerialQueue<string>(async (item) => {
    started.push(item);
    maxRunning = Math.max(maxRunning, ++running);
    await tick(1);
    running--;
    if (item === "bad") throw new Error("task failed");
  });
  return { queue, started, max: () => maxRunning };
}

describe("SerialQueue", () => {
  it("runs one task at a time, in order", async () => {
    const { queue, started, max } = setup();
    await Promise.all(["a", "b", "c"].map((x) => queue.add(x, x, true)));
    expect(started).toEqual(["a", "b", "c"]);
    expect(max()).toBe(1);
  });

  it("merges a task asked for twice, pinning it if either asks", async () => {
    const { queue, started } = setup();
    void queue.add("a", "a", true);
    void queue.add("b", "b", false);
    const again = queue.add("b", "b", true);
    queue.prune(() => false);
    await again;
    expect(started).toEqual(["a", "b"]);
  });

  it("prunes unpinned queued tasks, resolving their promises", async () => {
    const { queue, started } = setup();
    void queue.add("a", "a", false);
    const b = queue.add("b", "b", false);
    const c = queue.add("c", "c", false);
    queue.prune((item) => item === "c");
    await Promise.all([b, c]);
    expect(started).toEqual(["a", "c"]);
  });

  it("goes on after a failing task, and stops when closed", async () => {
    const { queue, started } = setup();
    await Promise.all([queue.add("bad", "bad", true), queue.add("ok", "ok", true)]);
    expect(started).toEqual(["bad", "ok"]);
    void queue.add("x", "x", true);
    const y = queue.add("y", "y", true);
    queue.close();
    await y;
    await tick(5);
    expect(started).toEqual(["bad", "ok", "x"]);
    await queue.add("z", "z", true);
    expect(started).toEqual(["bad", "ok", "x"]);
  });
});
