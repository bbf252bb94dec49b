/**
 * End-to-end: the packaged extension in a real VS Code (code-server) with the
 * real agentls server and the `scripted` provider, asserting on what a user
 * sees. The tests share one VS Code and run in order, because the scripted
 * provider replays its responses in order.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { launch, waitFor, type VsCode } from "./harness";

const MAIN_PY = "def add(a, b):\n";

const script = {
  responses: [
    // 1. the chat view streams a reply
    { chunks: ["Hello ", "from ", "the ", "scripted ", "agent. ", "Streaming ", "works."], delay: 0.3 },
    // the summary written when the user compacts the conversation
    { text: "Summary: the user said hello." },
    // 2. a turn the user cancels
    { chunks: ["Let ", "me ", "think..."], delay: 0.05, stall: true },
    // 3-4. an edit the user approves
    {
      tool_calls: [
        {
          id: "call_approve",
          name: "edit_file",
          arguments: { path: "main.py", old_string: "def add(a, b):", new_string: 'def add(a, b):\n    """Add two numbers."""' },
        },
      ],
    },
    { text: "I added a docstring to main.py." },
    // 5-6. an edit the user rejects
    {
      tool_calls: [
        {
          id: "call_reject",
          name: "edit_file",
          arguments: { path: "main.py", old_string: "return a + b", new_string: "return a - b" },
        },
      ],
    },
    { text: "Understood: main.py stays as it is." },
  ],
  fim: Array.from({ length: 300 }, () => ({ text: " a + b" })),
};

const server = process.env.AGENTLS_E2E_SERVER ?? "agentls";
const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "agentls-e2e-state-"));
const scriptFile = path.join(stateDir, "script.json");
fs.writeFileSync(scriptFile, JSON.stringify(script, null, 2));

let vscode: VsCode;

async function fail(error: unknown): Promise<never> {
  throw new Error(`${String(error)}\n--- extension host log ---\n${vscode?.exthostLog() ?? ""}`);
}

async function openFile(name: string): Promise<void> {
  const { page } = vscode;
  await page.keyboard.press("Control+Shift+E");
  const item = page.locator(`.explorer-folders-view .monaco-list-row[aria-label="${name}"]`);
  await item.click();
  await page.locator(`.tab[aria-label*="${name}"]`).first().waitFor();
}

async function saveAll(): Promise<void> {
  await vscode.command("File: Save All Files");
  await new Promise((r) => setTimeout(r, 500));
}

function readMain(): string {
  return fs.readFileSync(path.join(vscode.workspace, "main.py"), "utf8");
}

async function sendChat(prompt: string): Promise<void> {
  const input = vscode.chat().locator("#prompt");
  await input.click();
  await input.fill(prompt);
  await input.press("Enter");
}

describe("agentls in VS Code", { timeout: 600_000 }, () => {
  before(async () => {
    vscode = await launch({
      files: { "main.py": MAIN_PY, "notes.md": "# Notes\n", "AGENTS.md": "Keep functions small.\n" },
      settings: {
        "agentls.server.path": server,
        "agentls.provider": "scripted",
        "agentls.providerOptions": { script: scriptFile },
        "agentls.inlineCompletion.debounceMs": 0,
        "agentls.trace.server": "messages",
      },
      env: { AGENTLS_STATE_DIR: stateDir },
    });
  });

  after(async () => {
    await vscode?.stop();
  });

  it("activates and starts the server: the status bar shows the provider", { timeout: 90_000 }, async () => {
    const item = vscode.page.locator(".statusbar-item", { hasText: "agentls: scripted" });
    await item.waitFor({ timeout: 60_000 }).catch(fail);
    assert.match((await item.innerText()).trim(), /agentls: scripted · scripted-1/);
    await vscode.screenshot("1-activated");
  });

  it("shows ghost-text inline completions and Tab accepts them", { timeout: 90_000 }, async () => {
    const { page } = vscode;
    await openFile("main.py");
    await page.locator(".monaco-editor .view-lines").first().click();
    await page.keyboard.press("Control+End");
    await page.keyboard.type("    return", { delay: 40 });
    const ghost = page.locator(".monaco-editor .ghost-text-decoration, .monaco-editor .ghost-text-decoration-preview");
    await ghost.first().waitFor({ timeout: 30_000 }).catch(fail);
    const shown = await waitFor("the whole ghost text", 10_000, async () => {
      const text = (await ghost.allInnerTexts()).join("");
      return /a\s*\+\s*b/.test(text) ? text : undefined;
    }).catch(fail);
    assert.match(shown, /a\s*\+\s*b/);
    await vscode.screenshot("2-inline-completion");
    await page.keyboard.press("Tab");
    await waitFor("the accepted completion in the editor", 10_000, async () =>
      // Monaco renders spaces as no-break spaces.
      (await page.locator(".monaco-editor .view-lines").first().innerText()).replace(/\u00a0/g, " ").includes("return a + b")
        ? true
        : undefined,
    );
    await saveAll();
    assert.equal(readMain(), "def add(a, b):\n    return a + b");
    await vscode.screenshot("3-inline-accepted");
  });

  it("streams a chat reply into the chat view", { timeout: 90_000 }, async () => {
    await vscode.command("agentls: Open Chat");
    const chat = vscode.chat();
    await chat.locator("#prompt").waitFor({ timeout: 30_000 }).catch(fail);
    await sendChat("Say hello");
    await chat.locator(".msg-user", { hasText: "Say hello" }).waitFor();
    const streaming = chat.locator(".msg-assistant.streaming");
    await streaming.waitFor({ timeout: 30_000 }).catch(fail);
    const partial = await streaming.innerText();
    assert.ok(!partial.includes("Streaming works."), `already complete while streaming: ${partial}`);
    await vscode.screenshot("4-chat-streaming");
    const done = chat.locator(".msg-assistant:not(.streaming)", { hasText: "Hello from the scripted agent. Streaming works." });
    await done.waitFor({ timeout: 30_000 }).catch(fail);
    await vscode.screenshot("5-chat-reply");
  });

  it("names the project instruction files in the prompt's context fold", { timeout: 60_000 }, async () => {
    const chat = vscode.chat();
    const fold = chat.locator(".msg-user", { hasText: "Say hello" }).locator("details.attachments");
    await fold.waitFor({ timeout: 20_000 }).catch(fail);
    assert.equal((await fold.locator("summary").innerText()).trim(), "Context sent with the prompt");
    await fold.locator("summary").click();
    await waitFor("the instruction files in the fold", 10_000, async () => {
      const text = await fold.innerText();
      return text.includes("Project instructions: AGENTS.md") ? true : undefined;
    }).catch(fail);
    await vscode.screenshot("5b-chat-instructions");
  });

  it("compacts the conversation on request and folds the summary", { timeout: 60_000 }, async () => {
    await vscode.command("agentls: Compact Conversation");
    const chat = vscode.chat();
    const summary = chat.locator(".msg-summary details.summary");
    await summary.waitFor({ timeout: 20_000 }).catch(fail);
    assert.match(await summary.locator("summary").innerText(), /Earlier turns compacted/);
    await summary.locator("summary").click();
    await chat.locator(".msg-summary", { hasText: "Summary: the user said hello." }).waitFor({ timeout: 10_000 }).catch(fail);
    // The turn it summarises is still shown.
    assert.equal(await chat.locator(".msg-user", { hasText: "Say hello" }).count(), 1);
  });

  it("offers workspace files for @file: mentions", { timeout: 60_000 }, async () => {
    const chat = vscode.chat();
    const input = chat.locator("#prompt");
    await input.click();
    await input.pressSequentially("Explain @file:mai", { delay: 30 });
    const row = chat.locator("#picker li", { hasText: "main.py" }).first();
    await row.waitFor({ timeout: 20_000 }).catch(fail);
    await vscode.screenshot("6-mention-picker");
    await input.press("Enter");
    assert.equal(await input.inputValue(), "Explain @file:main.py ");
    await input.fill("");
  });

  it("cancels a running turn with the Cancel button", { timeout: 60_000 }, async () => {
    const chat = vscode.chat();
    await sendChat("Think for a long time");
    const cancel = chat.locator("#cancel");
    await cancel.waitFor({ state: "visible" });
    await chat.locator(".msg-assistant.streaming", { hasText: "think..." }).waitFor({ timeout: 20_000 }).catch(fail);
    await cancel.click();
    await chat.locator(".msg-info", { hasText: "Cancelled." }).waitFor({ timeout: 20_000 }).catch(fail);
    await cancel.waitFor({ state: "hidden" });
    await vscode.screenshot("7-chat-cancelled");
  });

  it("lists sessions and resumes one in the chat view", { timeout: 60_000 }, async () => {
    const chat = vscode.chat();
    await vscode.command("agentls: New Session");
    await waitFor("an empty chat view", 10_000, async () => ((await chat.locator(".msg").count()) === 0 ? true : undefined));
    await vscode.command("agentls: Show Sessions");
    const row = vscode.page.locator(".quick-input-list .monaco-list-row", { hasText: "Say hello" }).first();
    await row.waitFor({ timeout: 20_000 }).catch(fail);
    await vscode.screenshot("sessions");
    await row.click();
    await chat
      .locator(".msg-assistant", { hasText: "Hello from the scripted agent. Streaming works." })
      .waitFor({ timeout: 20_000 })
      .catch(fail);
  });

  /** Waits for VS Code's refactor preview (the client shows it for edits
   * whose change annotations need confirmation); fails if the turn produced
   * a tool result first, i.e. the edit never reached the editor. */
  async function awaitApproval(resultsBefore: number): Promise<void> {
    const apply = vscode.page.getByRole("button", { name: "Apply", exact: true });
    const toolResult = vscode.chat().locator(".tool-result").nth(resultsBefore);
    const outcome = await waitFor("the refactor preview or a tool result", 30_000, async () => {
      if (await apply.isVisible()) return "preview";
      if (await toolResult.isVisible()) return "result";
      return undefined;
    }).catch(fail);
    if (outcome === "result") {
      assert.fail(`the edit produced a tool result without any approval UI: ${(await toolResult.textContent()) ?? ""}`);
    }
  }

  it("shows VS Code's refactor preview for an agent edit; Apply changes the file", { timeout: 120_000 }, async () => {
    const results = await vscode.chat().locator(".tool-result").count();
    await sendChat("Add a docstring to add()");
    await awaitApproval(results);
    await vscode.applyPreview(() => vscode.screenshot("8-approval-preview"));
    await vscode
      .chat()
      .locator(".msg-assistant", { hasText: "I added a docstring to main.py." })
      .waitFor({ timeout: 30_000 })
      .catch(fail);
    await saveAll();
    assert.equal(readMain(), 'def add(a, b):\n    """Add two numbers."""\n    return a + b');
    await vscode.screenshot("9-approval-applied");
  });

  it("Discard in the refactor preview leaves the file unchanged", { timeout: 120_000 }, async () => {
    const before = readMain();
    const results = await vscode.chat().locator(".tool-result").count();
    await sendChat("Make add() subtract");
    await awaitApproval(results);
    await vscode.page.getByRole("button", { name: "Discard", exact: true }).click();
    const chat = vscode.chat();
    await chat.locator(".tool-result.failed").last().waitFor({ timeout: 30_000 }).catch(fail);
    await chat.locator(".msg-assistant", { hasText: "main.py stays as it is." }).waitFor({ timeout: 30_000 }).catch(fail);
    await saveAll();
    assert.equal(readMain(), before);
    await vscode.screenshot("10-approval-rejected");
  });

  it("'Restore to before this turn' in the chat view puts the file back", { timeout: 120_000 }, async () => {
    const chat = vscode.chat();
    const edited = chat.locator(".msg-user", { hasText: "Add a docstring to add()" });
    const restore = edited.locator("button.restore", { hasText: "Restore to before this turn" });
    await restore.waitFor({ timeout: 20_000 }).catch(fail);
    // Turns that changed no file (the declined edit, plain replies) offer none.
    for (const prompt of ["Say hello", "Make add() subtract"]) {
      assert.equal(await chat.locator(".msg-user", { hasText: prompt }).locator("button.restore").count(), 0, prompt);
    }
    await vscode.screenshot("11-restore-action");
    await restore.click();
    await chat
      .locator(".msg-info", { hasText: "Restored 1 file to before turn" })
      .waitFor({ timeout: 30_000 })
      .catch(fail);
    // No refactor preview: the user asked for the restore; the buffer changed.
    assert.equal(await vscode.page.getByRole("button", { name: "Apply", exact: true }).isVisible(), false);
    await saveAll();
    assert.equal(readMain(), "def add(a, b):\n    return a + b");
    await vscode.screenshot("12-restored");
  });

  it("lists its commands in the palette; Restart Server and Show Output work", { timeout: 90_000 }, async () => {
    const { page } = vscode;
    await page.keyboard.press("F1");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor();
    await input.fill(">agentls:");
    for (const title of ["Open Chat", "New Session", "Cancel", "Show Sessions", "Restart Server", "Show Output"]) {
      await page.locator(".quick-input-list .monaco-list-row", { hasText: `agentls: ${title}` }).first().waitFor();
    }
    await vscode.screenshot("commands");
    await page.keyboard.press("Escape");
    await vscode.command("agentls: Restart Server");
    await vscode.command("agentls: Show Output");
    // The log shows the server started twice: at activation and on restart.
    const log = page.locator(".panel .monaco-editor .view-lines").first();
    await waitFor("two server starts in the agentls log", 60_000, async () => {
      const text = (await log.innerText()).replace(/\u00a0/g, " ");
      return (text.match(/Starting \S*agentls/g) ?? []).length >= 2 ? true : undefined;
    }).catch(fail);
    await vscode.page.locator(".statusbar-item", { hasText: "agentls: scripted" }).waitFor({ timeout: 30_000 }).catch(fail);
    await vscode.screenshot("output");
  });
});
