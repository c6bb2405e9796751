// @vitest-environment happy-dom
import { afterEach, describe, expect, it, vi } from "vitest";
import { CopyButton, copyText } from "../src/clipboard";
import { tick } from "./trees";

function setClipboard(writeText: ((text: string) => Promise<void>) | undefined) {
  Object.defineProperty(navigator, "clipboard", {
    value: writeText ? { writeText } : undefined,
    configurable: true,
  });
}

function setExecCommand(result: boolean | "throw") {
  Object.defineProperty(document, "execCommand", {
    value: vi.fn(() => {
      if (result === "throw") throw new Error("no");
      return result;
    }),
    configurable: true,
  });
}

afterEach(() => {
  document.body.replaceChildren();
  vi.restoreAllMocks();
});

describe("copyText", () => {
  it("uses the async clipboard when it may", async () => {
    const writeText = vi.fn(() => Promise.resolve());
    setClipboard(writeText);
    expect(await copyText('("a",)')).toBe("clipboard");
    expect(writeText).toHaveBeenCalledWith('("a",)');
  });

  it("falls back to a hidden selection and execCommand, then to the user", async () => {
    setClipboard(() => Promise.reject(new Error("NotAllowedError")));
    setExecCommand(true);
    expect(await copyText("x")).toBe("command");
    expect(document.querySelector("textarea")).toBeNull();
    setClipboard(undefined);
    setExecCommand("throw");
    expect(await copyText("x")).toBe("manual");
  });
});

describe("CopyButton", () => {
  it("confirms a copy, then shows its label again", async () => {
    setClipboard(() => Promise.resolve());
    const copy = new CopyButton("Copy", () => "text", { confirmMs: 5, title: "Copy it" });
    document.body.append(copy.element);
    copy.button.click();
    await tick();
    expect(copy.button.textContent).toBe("Copied ✓");
    expect(copy.element.dataset.copied).toBe("text");
    expect(copy.button.getAttribute("aria-label")).toBe("Copy it");
    await tick(20);
    expect(copy.button.textContent).toBe("Copy");
    copy.dispose();
  });

  it("shows the text selected for Ctrl+C when nothing can copy", async () => {
    setClipboard(undefined);
    setExecCommand(false);
    const copy = new CopyButton("Copy", () => '"a/b"');
    document.body.append(copy.element);
    expect(await copy.copy()).toBe("manual");
    const field = copy.element.querySelector<HTMLInputElement>(".tdview-copy-manual");
    expect(field?.value).toBe('"a/b"');
    expect(field?.readOnly).toBe(true);
    expect(document.activeElement).toBe(field);
    await copy.copy();
    expect(copy.element.querySelectorAll(".tdview-copy-manual")).toHaveLength(1);
  });
});
