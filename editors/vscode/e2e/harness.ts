/**
 * Runs a real VS Code (code-server 4.139.1, VS Code 1.139) with the packaged
 * extension and drives it from headless Chromium through playwright-core, as
 * docs/vscode.md ("End-to-end tests in a real VS Code") describes.
 * Everything lives in a throwaway directory; `stop()` ends code-server (the
 * extension host and the agentls server follow) and closes the browser.
 *
 * Environment (set by e2e/run.sh): AGENTLS_E2E_CODE_SERVER, AGENTLS_E2E_NODE24,
 * AGENTLS_E2E_CHROMIUM, AGENTLS_E2E_VSIX, AGENTLS_E2E_SERVER (the agentls
 * executable).
 */

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { chromium, type Browser, type FrameLocator, type Page } from "playwright-core";

export interface VsCode {
  page: Page;
  workspace: string;
  userDataDir: string;
  stop(): Promise<void>;
  /** Runs a command through the command palette (F1). */
  command(title: string): Promise<void>;
  /** The agentls chat webview's document. */
  chat(): FrameLocator;
  screenshot(name: string): Promise<string>;
  /** The extension host log, for failure messages. */
  exthostLog(): string;
  /**
   * In the refactor preview: ticks every file (VS Code leaves changes that
   * need confirmation unchecked) and presses Apply.
   */
  applyPreview(onTicked?: () => Promise<unknown>): Promise<void>;
}

export interface Options {
  files: { [relativePath: string]: string };
  settings: { [key: string]: unknown };
  env?: { [key: string]: string };
}

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the end-to-end tests through e2e/run.sh`);
  return value;
}

export const SCREENSHOTS = process.env.AGENTLS_E2E_SCREENSHOTS ?? path.resolve(__dirname, "../../../../docs/screenshots");

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function waitFor<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ""}`);
}

export async function launch(options: Options): Promise<VsCode> {
  const codeServer = required("AGENTLS_E2E_CODE_SERVER");
  const node24 = required("AGENTLS_E2E_NODE24");
  const vsix = required("AGENTLS_E2E_VSIX");
  const chromiumPath = process.env.AGENTLS_E2E_CHROMIUM ?? "/usr/bin/chromium";

  const root = fs.mkdtempSync(path.join(os.tmpdir(), "agentls-vscode-e2e-"));
  const workspace = path.join(root, "workspace");
  const userDataDir = path.join(root, "user-data");
  const extensionsDir = path.join(root, "extensions");
  const xdg = path.join(root, "xdg");
  for (const dir of [workspace, userDataDir, extensionsDir, `${xdg}/config`, `${xdg}/data`, `${xdg}/cache`]) {
    fs.mkdirSync(dir, { recursive: true });
  }
  for (const [rel, text] of Object.entries(options.files)) {
    fs.mkdirSync(path.dirname(path.join(workspace, rel)), { recursive: true });
    fs.writeFileSync(path.join(workspace, rel), text);
  }
  // code-server is a remote window: machine-scoped settings (agentls.server.*)
  // are read from the Machine (remote) settings, the rest from User settings.
  fs.mkdirSync(path.join(userDataDir, "User"), { recursive: true });
  fs.mkdirSync(path.join(userDataDir, "Machine"), { recursive: true });
  const machine = Object.fromEntries(Object.entries(options.settings).filter(([k]) => k.startsWith("agentls.server.")));
  fs.writeFileSync(path.join(userDataDir, "Machine", "settings.json"), JSON.stringify(machine, null, 2));
  fs.writeFileSync(
    path.join(userDataDir, "User", "settings.json"),
    JSON.stringify(
      {
        "telemetry.telemetryLevel": "off",
        "security.workspace.trust.enabled": false,
        "workbench.startupEditor": "none",
        "extensions.autoUpdate": false,
        "extensions.autoCheckUpdates": false,
        "update.mode": "none",
        "chat.disableAIFeatures": true,
        "workbench.tips.enabled": false,
        "workbench.secondarySideBar.defaultVisibility": "hidden",
        "workbench.enableExperiments": false,
        "editor.inlineSuggest.enabled": true,
        "editor.quickSuggestions": { other: false, comments: false, strings: false },
        "editor.suggestOnTriggerCharacters": false,
        "editor.acceptSuggestionOnEnter": "off",
        "files.autoSave": "off",
        "git.enabled": false,
        ...options.settings,
      },
      null,
      2,
    ),
  );
  const port = await freePort();
  const config = path.join(root, "config.yaml");
  fs.writeFileSync(config, `bind-addr: 127.0.0.1:${port}\nauth: none\ncert: false\n`);

  const env = {
    ...process.env,
    PATH: `${node24}/bin:${process.env.PATH}`,
    XDG_CONFIG_HOME: `${xdg}/config`,
    XDG_DATA_HOME: `${xdg}/data`,
    XDG_CACHE_HOME: `${xdg}/cache`,
    ...options.env,
  };
  const common = ["--config", config, "--user-data-dir", userDataDir, "--extensions-dir", extensionsDir];
  const install = spawnSync(codeServer, [...common, "--install-extension", vsix], { env, encoding: "utf8", timeout: 120_000 });
  if (install.status !== 0) {
    throw new Error(`Installing ${vsix} failed (${install.status}):\n${install.stdout}\n${install.stderr}`);
  }

  const logFile = path.join(root, "code-server.log");
  const log = fs.openSync(logFile, "a");
  const proc: ChildProcess = spawn(
    codeServer,
    [
      ...common,
      "--disable-telemetry",
      "--disable-update-check",
      "--disable-workspace-trust",
      "--disable-getting-started-override",
      "--ignore-last-opened",
    ],
    { env, stdio: ["ignore", log, log], detached: true },
  );
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));

  let browser: Browser | undefined;
  const stop = async () => {
    await browser?.close().catch(() => undefined);
    if (proc.exitCode === null && proc.pid) {
      try {
        process.kill(-proc.pid, "SIGTERM");
      } catch {
        // already gone
      }
      const killed = await Promise.race([exited.then(() => true), new Promise((r) => setTimeout(() => r(false), 10_000))]);
      if (!killed && proc.pid) {
        try {
          process.kill(-proc.pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
    }
    fs.closeSync(log);
  };

  try {
    await waitFor("code-server /healthz", 60_000, async () => {
      if (proc.exitCode !== null) throw new Error(`code-server exited: ${fs.readFileSync(logFile, "utf8")}`);
      const res = await fetch(`http://127.0.0.1:${port}/healthz`);
      return res.ok ? true : undefined;
    });
    browser = await chromium.launch({
      executablePath: chromiumPath,
      headless: true,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
      ],
    });
    const context = await browser.newContext({ viewport: { width: 1400, height: 860 } });
    const page = await context.newPage();
    page.setDefaultTimeout(30_000);
    await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(workspace)}`);
    await page.locator(".monaco-workbench").waitFor({ timeout: 60_000 });

    const vscode: VsCode = {
      page,
      workspace,
      userDataDir,
      stop,
      async command(title: string) {
        // A webview that takes focus while the palette opens can close it
        // again: retry a few times before giving up.
        const input = page.locator(".quick-input-widget input");
        let lastError: unknown;
        for (let attempt = 0; attempt < 4; attempt++) {
          try {
            await page.keyboard.press("F1");
            await input.waitFor({ state: "visible", timeout: 5_000 });
            await input.fill(`>${title}`, { timeout: 5_000 });
            const row = page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first();
            await row.waitFor({ timeout: 10_000 });
            await page.keyboard.press("Enter");
            return;
          } catch (error) {
            lastError = error;
            await page.keyboard.press("Escape").catch(() => undefined);
            await new Promise((r) => setTimeout(r, 500));
          }
        }
        throw new Error(`Could not run "${title}" from the command palette: ${String(lastError)}`);
      },
      chat() {
        return page.frameLocator("iframe.webview.ready").frameLocator("#active-frame");
      },
      async screenshot(name: string) {
        fs.mkdirSync(SCREENSHOTS, { recursive: true });
        const file = path.join(SCREENSHOTS, `vscode-${name}.png`);
        await page.screenshot({ path: file });
        return file;
      },
      async applyPreview(onTicked?: () => Promise<unknown>) {
        const apply = page.getByRole("button", { name: "Apply", exact: true });
        await apply.waitFor();
        const boxes = page.locator(".panel .monaco-list-row[aria-level='1'] .monaco-checkbox.edit-checkbox");
        for (let i = 0; i < (await boxes.count()); i++) {
          const box = boxes.nth(i);
          if ((await box.getAttribute("aria-checked")) !== "true") await box.click();
          await waitFor("the change to be ticked", 5_000, async () =>
            (await box.getAttribute("aria-checked")) === "true" ? true : undefined,
          );
        }
        await onTicked?.();
        await apply.click();
      },
      exthostLog() {
        const logs = path.join(userDataDir, "logs");
        const found: string[] = [];
        const walk = (dir: string) => {
          for (const entry of fs.existsSync(dir) ? fs.readdirSync(dir, { withFileTypes: true }) : []) {
            const full = path.join(dir, entry.name);
            if (entry.isDirectory()) walk(full);
            else if (/exthost|agentls/i.test(entry.name)) found.push(full);
          }
        };
        walk(logs);
        return found.map((f) => `== ${f}\n${fs.readFileSync(f, "utf8").slice(-6000)}`).join("\n");
      },
    };
    return vscode;
  } catch (error) {
    await stop();
    throw error;
  }
}

export { waitFor };
