/**
 * The client half of approvals in a real VS Code, against a stand-in server
 * (approval_stub_server.py) that sends what docs/protocol.md specifies: an
 * applyEdit whose change annotation needs confirmation opens VS Code's
 * refactor preview (Apply / Discard), and window/showMessageRequest shows a
 * notification with the action buttons. Both are handled natively by
 * vscode-languageclient; these tests prove it in 1.139.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { launch, waitFor, type VsCode } from "./harness";

let vscode: VsCode;

function stubCommand(): string {
  const agentls = process.env.AGENTLS_E2E_SERVER ?? "";
  const python = path.join(path.dirname(agentls), "python");
  if (!fs.existsSync(python)) throw new Error(`no python next to ${agentls}`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "agentls-stub-"));
  const wrapper = path.join(dir, "approval-stub");
  fs.writeFileSync(wrapper, `#!/bin/sh\nexec "${python}" "${path.join(__dirname, "../../e2e/approval_stub_server.py")}" "$@"\n`);
  fs.chmodSync(wrapper, 0o755);
  return wrapper;
}

async function openFile(name: string): Promise<void> {
  const { page } = vscode;
  await page.keyboard.press("Control+Shift+E");
  await page.locator(`.explorer-folders-view .monaco-list-row[aria-label="${name}"]`).click();
}

function toast(text: string) {
  return vscode.page.locator(".notification-toast", { hasText: text });
}

describe("approvals in VS Code (client side, stand-in server)", { timeout: 300_000 }, () => {
  before(async () => {
    vscode = await launch({
      files: { "edit-me.txt": "old line\n", "reject-me.txt": "", "ask-me.txt": "anything\n" },
      settings: { "agentls.server.path": stubCommand() },
    });
  });
  after(async () => {
    await vscode?.stop();
  });

  it("an annotated edit opens the refactor preview; Apply changes the file", { timeout: 90_000 }, async () => {
    await openFile("edit-me.txt");
    const apply = vscode.page.getByRole("button", { name: "Apply", exact: true });
    await apply.waitFor({ timeout: 60_000 });
    // VS Code leaves changes that need confirmation unchecked: the user
    // ticks them (here the file, which ticks its changes) before Apply.
    await vscode.applyPreview(() => vscode.screenshot("approval-stub-preview"));
    await toast("stub: applied=true").waitFor({ timeout: 20_000 });
    await vscode.command("File: Save All Files");
    await waitFor("edit-me.txt on disk", 10_000, async () =>
      fs.readFileSync(path.join(vscode.workspace, "edit-me.txt"), "utf8") === "new line\n" ? true : undefined,
    );
  });

  it("Discard leaves the file unchanged and the server hears applied=false", { timeout: 90_000 }, async () => {
    // Close the edited file, then reopen it: the stub proposes the same edit again.
    await vscode.command("View: Close All Editors");
    fs.writeFileSync(path.join(vscode.workspace, "edit-me.txt"), "old line\n");
    await openFile("edit-me.txt");
    const discard = vscode.page.getByRole("button", { name: "Discard", exact: true });
    await discard.waitFor({ timeout: 60_000 });
    await discard.click();
    await toast("stub: applied=false").waitFor({ timeout: 20_000 });
    assert.equal(fs.readFileSync(path.join(vscode.workspace, "edit-me.txt"), "utf8"), "old line\n");
  });

  it("showMessageRequest shows a notification with the approval buttons", { timeout: 90_000 }, async () => {
    await vscode.command("Notifications: Clear All Notifications");
    await openFile("ask-me.txt");
    const request = toast("agentls wants to run: pytest -q");
    await request.waitFor({ timeout: 30_000 });
    for (const title of ["Allow once", "Allow for session", "Deny"]) {
      assert.ok(await request.getByRole("button", { name: title }).isVisible(), title);
    }
    await new Promise((r) => setTimeout(r, 600)); // let the toast finish sliding in
    await vscode.screenshot("approval-stub-message-request");
    await request.getByRole("button", { name: "Deny" }).click();
    await toast("stub: chose=Deny").waitFor({ timeout: 20_000 });
  });
});
