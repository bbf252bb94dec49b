// Bundles the extension (Node, CommonJS, `vscode` external), the chat
// webview script (browser IIFE) and, with --tests, the unit and e2e tests.
import * as esbuild from "esbuild";
import { readdirSync } from "node:fs";

const production = process.argv.includes("--production");
const tests = process.argv.includes("--tests");
const e2e = process.argv.includes("--e2e");

const common = { bundle: true, sourcemap: !production, minify: production, logLevel: "warning" };

if (tests || e2e) {
  const dir = e2e ? "e2e" : "test";
  const entryPoints = readdirSync(dir)
    .filter((f) => f.endsWith(".test.ts"))
    .map((f) => `${dir}/${f}`);
  await esbuild.build({
    ...common,
    entryPoints,
    outdir: `out/${dir}`,
    platform: "node",
    format: "cjs",
    target: "node20",
    outExtension: { ".js": ".js" },
    external: ["vscode", "playwright-core"],
  });
} else {
  await Promise.all([
    esbuild.build({
      ...common,
      entryPoints: ["src/extension.ts"],
      outfile: "dist/extension.js",
      platform: "node",
      format: "cjs",
      target: "node20",
      external: ["vscode"],
    }),
    esbuild.build({
      ...common,
      entryPoints: ["src/webview/main.ts"],
      outfile: "dist/webview.js",
      platform: "browser",
      format: "iife",
      target: "es2022",
    }),
  ]);
}
