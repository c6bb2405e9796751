// @vitest-environment happy-dom
import { describe, expect, it } from "vitest";
import { watchTheme } from "../src/theme-watch";
import { tick } from "./trees";

describe("watching JupyterLab's theme", () => {
  it("calls back once per switch, on <body>'s theme marks only, until stopped", async () => {
    let calls = 0;
    const stop = watchTheme(() => calls++);
    document.body.setAttribute("data-jp-theme-light", "false");
    document.body.setAttribute("data-jp-theme-name", "JupyterLab Dark");
    await tick();
    expect(calls).toBe(1);
    document.body.setAttribute("data-other", "x");
    await tick();
    expect(calls).toBe(1);
    stop();
    document.body.setAttribute("data-jp-theme-light", "true");
    await tick();
    expect(calls).toBe(1);
  });
});
