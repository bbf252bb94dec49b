/**
 * The resting cursor in a real VS Code: moving the cursor without typing
 * tells the real agentls server where it rests (agentls/didMoveCursor,
 * src/restingCursor.ts), and the embedded model (the packaged Gemma 3
 * fixture, provider local) evaluates the prompt there ahead of the first
 * keystroke, which the server's log records.
 */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { launch, waitFor, type VsCode } from "./harness";

const server = process.env.AGENTLS_E2E_SERVER ?? "agentls";
const root = fs.mkdtempSync(path.join(os.tmpdir(), "agentls-e2e-cursor-"));
const log = path.join(root, "server.log");
const WARMED = /the prompt at line (\d+) evaluated ahead/g;

let vscode: VsCode | undefined;
let skipped = "";

function serverLog(): string {
  return fs.existsSync(log) ? fs.readFileSync(log, "utf8") : "";
}

function gemmaInstalled(): string {
  const python = path.join(path.dirname(server), "python");
  const probe = spawnSync(python, ["-c",
    "import agentls.providers.local as l; print('yes' if l.runtime_error() is None and l.gemma3_chunk_paths() else 'no')"],
  { encoding: "utf8" });
  return probe.stdout?.trim() === "yes" ? "" : `the local runtime or Gemma is not installed next to ${server}`;
}

describe("the resting cursor in VS Code", { timeout: 300_000 }, () => {
  before(async () => {
    skipped = gemmaInstalled();
    if (skipped) return;
    vscode = await launch({
      files: { "main.py": "def add(a, b):\n    \n\n\ndef mul(a, b):\n    \n" },
      settings: {
        "agentls.server.path": server,
        "agentls.provider": "local",
        "agentls.inlineCompletion.model": "gemma3-270m",
        "agentls.server.args": ["--log-file", log, "--log-level", "DEBUG"],
      },
      env: { AGENTLS_STATE_DIR: path.join(root, "state") },
    });
  });

  after(async () => {
    await vscode?.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("a cursor moved without typing warms the prompt at its line", { timeout: 240_000 }, async (t) => {
    if (skipped || !vscode) return t.skip(skipped);
    const { page } = vscode;
    const fail = (error: unknown) => {
      throw new Error(`${String(error)}\n--- server log ---\n${serverLog().slice(-4000)}\n--- extension host log ---\n${vscode?.exthostLog()}`);
    };
    await page.locator(".statusbar-item", { hasText: "agentls: local" }).waitFor({ timeout: 90_000 }).catch(fail);
    await page.keyboard.press("Control+Shift+E");
    await page.locator('.explorer-folders-view .monaco-list-row[aria-label="main.py"]').click();
    await page.locator('.tab[aria-label*="main.py"]').first().waitFor();
    await page.locator(".monaco-editor .view-lines").first().click();
    await page.keyboard.press("Control+Home");
    for (let i = 0; i < 5; i++) await page.keyboard.press("ArrowDown"); // to line 6, in mul()
    const lines = await waitFor("the warm-up at the resting cursor", 180_000, async () => {
      const found = [...serverLog().matchAll(WARMED)].map((m) => Number(m[1]));
      return found.includes(6) ? found : undefined;
    }).catch(fail);
    // Only where the cursor rested: the lines passed on the way were not told.
    assert.deepEqual(lines.filter((line) => line > 1 && line < 6), [], `warmed: ${lines.join(", ")}`);
  });
});
