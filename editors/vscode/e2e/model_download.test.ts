/**
 * A model download in a real VS Code: choosing an `hf:` model for inline
 * completion starts its download at once, and the server's work-done
 * progress appears as VS Code's standard progress notification (title,
 * percentage and bytes, a Cancel button: src/serverProgress.ts). Cancel
 * stops the download on the server (window/workDoneProgress/cancel) and
 * nothing is left in the Hugging Face cache.
 * The hub is the loopback fake (fake_hub_server.py, HF_ENDPOINT) serving the
 * packaged Gemma 3 GGUF; the server is the real agentls with provider local.
 */

import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { launch, waitFor, type VsCode } from "./harness";

const server = process.env.AGENTLS_E2E_SERVER ?? "agentls";
const root = fs.mkdtempSync(path.join(os.tmpdir(), "agentls-e2e-download-"));
const MODEL = "hf:test-org/gemma-3-270m-GGUF";

let vscode: VsCode | undefined;
let hub: ChildProcess;
let skipped = "";

async function startHub(): Promise<string> {
  const python = path.join(path.dirname(server), "python");
  if (!fs.existsSync(python)) throw new Error(`no python next to ${server}`);
  hub = spawn(python, [path.join(__dirname, "../../e2e/fake_hub_server.py")], {
    stdio: ["pipe", "pipe", "inherit"],
    env: { ...process.env, AGENTLS_FAKE_HUB_DELAY: "0.01" }, // ~40 s for 253 MB: time to cancel
  });
  return new Promise((resolve, reject) => {
    hub.stdout?.once("data", (data: Buffer) => resolve(data.toString().trim()));
    hub.once("exit", (code) => reject(new Error(`the fake hub exited (${code})`)));
  });
}

describe("model download progress in VS Code", { timeout: 300_000 }, () => {
  before(async () => {
    const url = await startHub();
    if (url.startsWith("SKIP ")) {
      skipped = url.slice(5); // Gemma (agentls[local]) is not installed next to the server
      return;
    }
    vscode = await launch({
      files: { "main.py": "def add(a, b):\n" },
      settings: {
        "agentls.server.path": server,
        "agentls.provider": "local",
        "agentls.inlineCompletion.model": MODEL,
        "agentls.server.args": ["--log-file", path.join(root, "server.log"), "--log-level", "INFO"],
      },
      env: { HF_ENDPOINT: url, HF_HOME: path.join(root, "hf"), AGENTLS_STATE_DIR: path.join(root, "state") },
    });
  });

  after(async () => {
    await vscode?.stop();
    hub?.stdin?.end();
    hub?.kill();
    fs.rmSync(root, { recursive: true, force: true }); // the HF cache of the run
  });

  it("shows the download as a progress notification; Cancel stops it", { timeout: 240_000 }, async (t) => {
    if (skipped || !vscode) return t.skip(skipped);
    const code = vscode;
    const toast = code.page.locator(".notification-toast", { hasText: `Downloading ${MODEL}` });
    await toast.first().waitFor({ timeout: 90_000 }).catch(async (error: unknown) => {
      const serverLog = fs.existsSync(path.join(root, "server.log")) ? fs.readFileSync(path.join(root, "server.log"), "utf8").slice(-4000) : "";
      throw new Error(`${String(error)}\n--- server log ---\n${serverLog}\n--- extension host log ---\n${code.exthostLog()}`);
    });
    const text = await waitFor("a tenth of the bytes in the notification", 90_000, async () => {
      const shown = await toast.first().innerText();
      const match = /(\d+)% · [\d.]+ \/ 253\.1 MB/.exec(shown);
      return match && Number(match[1]) >= 10 ? shown : undefined;
    });
    assert.match(text, /\d+% · [\d.]+ \/ 253\.1 MB/);
    await new Promise((r) => setTimeout(r, 600)); // let the toast finish sliding in
    await code.screenshot("model-download-progress");
    const cancel = toast.first().getByRole("button", { name: /Cancel/ });
    await cancel.click();
    await waitFor("the notification to go away after Cancel", 60_000, async () =>
      (await toast.count()) === 0 ? true : undefined,
    );
    await waitFor("the server to report the cancellation", 60_000, async () => {
      const log = fs.existsSync(path.join(root, "server.log")) ? fs.readFileSync(path.join(root, "server.log"), "utf8") : "";
      return log.includes("download of hf:test-org/gemma-3-270m-GGUF cancelled") ? true : undefined;
    });
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const entry of fs.existsSync(dir) ? fs.readdirSync(dir, { withFileTypes: true }) : []) {
        const full = path.join(dir, entry.name);
        if (entry.isDirectory()) walk(full);
        else if (entry.name.endsWith(".gguf")) files.push(full);
      }
    };
    walk(path.join(root, "hf"));
    assert.equal(files.length, 0, `files left after Cancel: ${files.join(", ")}`);
  });
});
