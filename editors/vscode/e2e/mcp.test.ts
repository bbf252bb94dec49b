/**
 * MCP servers in a real VS Code (code-server) with the real agentls server
 * and the scripted provider: the status bar shows a server that failed, an
 * MCP tool call (mcp-server-time over stdio) is approved from the
 * notification VS Code shows for window/showMessageRequest and its result
 * reaches the chat, and an MCP prompt is offered as a `/` template.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { launch, type VsCode } from "./harness";

const server = process.env.AGENTLS_E2E_SERVER ?? "agentls";
const python = path.join(path.dirname(server), "python");
const rawServer = path.join(__dirname, "../../../../tests/fakes/mcp_raw_server.py");
const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "agentls-e2e-mcp-"));
const scriptFile = path.join(stateDir, "script.json");
fs.writeFileSync(
  scriptFile,
  JSON.stringify({
    responses: [
      { text: "Let me check.", tool_calls: [{ id: "m1", name: "mcp__time__get_current_time", arguments: { timezone: "Asia/Tokyo" } }] },
      { text: "Finished: it is evening in Tokyo." },
    ],
  }),
);

let vscode: VsCode;

async function fail(error: unknown): Promise<never> {
  throw new Error(`${String(error)}\n--- extension host log ---\n${vscode?.exthostLog() ?? ""}`);
}

describe("MCP servers in VS Code", { timeout: 400_000 }, () => {
  before(async () => {
    assert.ok(fs.existsSync(python), `no python next to ${server}`);
    assert.ok(fs.existsSync(rawServer), `no ${rawServer}`);
    vscode = await launch({
      files: { "main.py": "print('hi')\n" },
      settings: {
        "agentls.server.path": server,
        "agentls.provider": "scripted",
        "agentls.providerOptions": { script: scriptFile },
        "agentls.mcpServers": {
          time: { command: python, args: ["-m", "mcp_server_time", "--local-timezone", "UTC"] },
          raw: { command: python, args: [rawServer] },
          broken: { command: "/nonexistent/mcp-server" },
        },
      },
      env: { AGENTLS_STATE_DIR: stateDir },
    });
  });

  after(async () => {
    await vscode?.stop();
  });

  it("shows a failed MCP server in the status bar", { timeout: 90_000 }, async () => {
    const item = vscode.page.locator(".statusbar-item", { hasText: "MCP: 1 failed" });
    await item.waitFor({ timeout: 60_000 }).catch(fail);
    assert.match((await item.innerText()).trim(), /agentls: scripted · scripted-1 · MCP: 1 failed/);
    await vscode.screenshot("mcp-status-bar");
  });

  it("asks before an MCP tool call; Allow once runs it and the result reaches the chat", { timeout: 120_000 }, async () => {
    await vscode.command("agentls: Open Chat");
    const chat = vscode.chat();
    const input = chat.locator("#prompt");
    await input.waitFor({ timeout: 30_000 }).catch(fail);
    await input.click();
    await input.fill("What time is it in Tokyo?");
    await input.press("Enter");
    const request = vscode.page.locator(".notification-toast", { hasText: "get_current_time" });
    await request.waitFor({ timeout: 60_000 }).catch(fail);
    for (const title of ["Allow once", "Allow for session", "Deny"]) {
      assert.ok(await request.getByRole("button", { name: title }).isVisible(), title);
    }
    await new Promise((r) => setTimeout(r, 600)); // let the toast finish sliding in
    await vscode.screenshot("mcp-approval");
    await request.getByRole("button", { name: "Allow once" }).click();
    await chat.locator(".msg-assistant", { hasText: "Finished: it is evening in Tokyo." }).waitFor({ timeout: 60_000 }).catch(fail);
    const result = chat.locator(".tool-result", { hasText: "mcp__time__get_current_time" }).last();
    await result.waitFor({ timeout: 10_000 }).catch(fail);
    assert.ok(!(await result.getAttribute("class"))?.includes("failed"), "the tool result failed");
    await vscode.screenshot("mcp-result");
  });

  it("offers an MCP prompt as a / template", { timeout: 60_000 }, async () => {
    const chat = vscode.chat();
    const input = chat.locator("#prompt");
    await input.click();
    await input.fill("");
    await input.pressSequentially("/mcp__raw__sum", { delay: 30 });
    const row = chat.locator("#picker li", { hasText: "mcp__raw__summarize" }).first();
    await row.waitFor({ timeout: 20_000 }).catch(fail);
    await vscode.screenshot("mcp-template-picker");
    await input.press("Enter");
    assert.match(await input.inputValue(), /Summarize \{\{topic\}\} in three bullet points\./);
  });
});
