import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const js = join(dirname(fileURLToPath(import.meta.url)), "..");
const outdir = mkdtempSync(join(tmpdir(), "tdview-build-"));

afterAll(() => rmSync(outdir, { recursive: true, force: true }));

describe("build.mjs", () => {
  it("bundles an anywidget ESM module and a stylesheet", async () => {
    execFileSync(process.execPath, ["build.mjs", `--outdir=${outdir}`], { cwd: js, stdio: "pipe" });
    const code = readFileSync(join(outdir, "widget.js"), "utf8");
    expect(code).not.toMatch(/^\s*import\s/m);
    expect(code).not.toContain("sourceMappingURL");
    const mod = await import(pathToFileURL(join(outdir, "widget.js")).href);
    expect(typeof mod.default.render).toBe("function");
    const css = readFileSync(join(outdir, "widget.css"), "utf8");
    expect(css).toContain(".tdview-root");
    const selectors = css
      .replace(/\{[^}]*\}/g, "\n")
      .split(/[\n,]/)
      .map((s) => s.trim());
    // Each rule styles tdview's own element or what is inside it; one ancestor may qualify
    // it (a dark host's class: `.dark .tdview-root`, `:host-context(.dark) .tdview-root`).
    const scoped = /^(\.[\w-]+ |:host-context\(\.[\w-]+\) )?\.tdview-root\b/;
    const unscoped = selectors.filter((s) => s && !scoped.test(s));
    expect(unscoped).toEqual([]);
    const colours = css.match(/#[0-9a-f]{3,8}\b|rgba?\(/gi) ?? [];
    const fallbacks = css.match(/var\(--jp-[\w-]+,\s*(#[0-9a-f]{3,8}\b|rgba?\()/gi) ?? [];
    expect(colours.length).toBe(fallbacks.length);
  });
});
