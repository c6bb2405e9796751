// Bundles the widget for anywidget: ../tdview/static/widget.js (ESM, `export default
// { render }`) and ../tdview/static/widget.css, minified. anywidget loads the module from
// a string, so a linked source map would not resolve: `node build.mjs --watch` rebuilds on
// change with inline source maps instead. `--outdir=DIR` writes elsewhere (the tests do).
import { mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const outdirArg = process.argv.find((a) => a.startsWith("--outdir="));
const outdir = outdirArg ? outdirArg.slice("--outdir=".length) : join(here, "..", "tdview", "static");
const watch = process.argv.includes("--watch");

/** @type {import("esbuild").BuildOptions} */
const options = {
  entryPoints: [
    { in: join(here, "src", "widget.ts"), out: "widget" },
    { in: join(here, "src", "styles.css"), out: "widget" },
  ],
  outdir,
  bundle: true,
  format: "esm",
  target: ["es2022"],
  minify: true,
  sourcemap: watch ? "inline" : false,
  legalComments: "none",
  logLevel: "info",
};

await mkdir(outdir, { recursive: true });
if (watch) {
  const context = await esbuild.context(options);
  await context.watch();
} else {
  await esbuild.build(options);
}
