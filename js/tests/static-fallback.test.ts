// @vitest-environment happy-dom
import { afterEach, describe, expect, it } from "vitest";
import { MemoryDataSource } from "../src/memory-data-source";
import { STATIC_NOTE, StaticFallback } from "../src/static-fallback";
import widget from "../src/widget";
import { attachKernel } from "./fake-kernel";
import { FakeModel } from "./fake-model";
import { loadGolden } from "./golden";
import { replayTree, tick } from "./trees";

const STATIC =
  '<div class="tdview-static"><table><tbody><tr><td>replay</td><td>TensorDict</td></tr>' +
  "</tbody></table></div>";

/** A widget whose kernel holds its replies until `answer()` (none: a saved state). */
function setup(staticHtml = STATIC) {
  const model = new FakeModel({ ...loadGolden("state").message, _static_html: staticHtml });
  attachKernel(model, new MemoryDataSource(replayTree()));
  const reply = model.onSend;
  const held: unknown[] = [];
  model.onSend = (msg) => held.push(msg);
  const answer = () => {
    model.onSend = reply;
    for (const msg of held.splice(0)) reply?.(msg);
  };
  const el = document.createElement("div");
  document.body.append(el);
  const cleanup = widget.render({ model, el });
  const app = () => el.querySelector<HTMLElement>(".tdview-app");
  return { model, el, answer, cleanup, app };
}

async function settle() {
  for (let i = 0; i < 5; i++) await tick(30);
}

afterEach(() => {
  document.body.replaceChildren();
});

describe("static fallback in the widget", () => {
  it("shows the saved static tree when no kernel answers, then the live tree", async () => {
    const { el, answer, app } = setup();
    await settle();
    expect(el.querySelector(".tdview-static-fallback")).toBeNull(); // not before the delay
    await tick(1100);
    const fallback = el.querySelector(".tdview-static-fallback");
    expect(fallback?.querySelector(".tdview-static td")?.textContent).toBe("replay");
    expect(fallback?.querySelector(".tdview-static-note")?.textContent).toBe(
      `tdview: ${STATIC_NOTE}`,
    );
    expect(STATIC_NOTE).toBe("static view — no kernel has answered yet (run the cell to browse)");
    expect(app()?.style.display).toBe("none");
    answer(); // the kernel catches up
    await settle();
    expect(el.querySelector(".tdview-static-fallback")).toBeNull();
    expect(app()?.style.display).toBe("");
    expect(el.querySelectorAll('[role="treeitem"]').length).toBeGreaterThan(1);
  });

  it("never shows when the kernel answers at once", async () => {
    const { el, answer } = setup();
    answer();
    await tick(1100);
    expect(el.querySelector(".tdview-static-fallback")).toBeNull();
    expect(el.querySelectorAll('[role="treeitem"]').length).toBeGreaterThan(1);
  });

  it("stands in for the lost notice when sending fails before any reply", async () => {
    const model = new FakeModel({ ...loadGolden("state").message, _static_html: STATIC });
    model.failSend = true;
    const el = document.createElement("div");
    document.body.append(el);
    widget.render({ model, el });
    await settle();
    expect(el.querySelector(".tdview-static-fallback .tdview-static")).not.toBeNull();
    expect(el.querySelector<HTMLElement>(".tdview-app")?.style.display).toBe("none");
    expect(el.querySelectorAll(".tdview-lost:not(.tdview-static-note)")).toHaveLength(0);
  });

  it("without a static tree (marimo, older outputs) keeps the live view as it was", async () => {
    const { el } = setup("");
    await tick(1100);
    expect(el.querySelector(".tdview-static-fallback")).toBeNull();
    expect(el.querySelector<HTMLElement>(".tdview-app")?.style.display).toBe("");
  });

  it("cleans up its listener", async () => {
    const { model, cleanup, answer } = setup();
    answer();
    cleanup();
    expect(model.listenerCount()).toBe(0);
  });
});

describe("StaticFallback", () => {
  it("waits from the first request, not from construction", async () => {
    const model = new FakeModel();
    const changes: boolean[] = [];
    const fallback = new StaticFallback(model, () => STATIC, {
      onChange: (s) => changes.push(s),
      delayMs: 20,
    });
    await tick(40);
    expect(changes).toEqual([]); // a view that asks nothing (an error) is left alone
    fallback.watch(model).send({ kind: "tdview:request" });
    await tick(40);
    expect(changes).toEqual([true]);
    model.emit("msg:custom", { kind: "tdview:progress", id: 1 });
    model.emit("msg:custom", { kind: "tdview:reply", id: 1 });
    expect(changes).toEqual([true, false]);
    expect(fallback.lost()).toBe(false); // answered once: the lost notice is right
    fallback.dispose();
  });

  it("ignores messages that are not tdview's", async () => {
    const model = new FakeModel();
    const changes: boolean[] = [];
    const fallback = new StaticFallback(model, () => STATIC, {
      onChange: (s) => changes.push(s),
      delayMs: 10,
    });
    fallback.watch(model).send({});
    model.emit("msg:custom", { kind: "other" });
    model.emit("msg:custom", null);
    await tick(30);
    expect(changes).toEqual([true]);
    fallback.dispose();
  });
});
