/**
 * Next edit suggestions in a real VS Code (code-server) with the real
 * agentls server and the `scripted` provider as a base model whose answer
 * is the editable region with the rename carried through: the user renames
 * a parameter, the suggested edits appear at its use and its call site
 * (struck-through old text, the new text after it), Tab jumps to the first,
 * Tab again applies them; Escape dismisses a suggestion.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { launch, waitFor, type VsCode } from "./harness";

const SOURCE = "def scale(x, factor):\n    return x * factor\n\n\nprint(scale(2, factor=3))\n";
const RENAMED = SOURCE.split("factor").join("ratio");
const END = "<|editable_region_end|>";

const server = process.env.AGENTLS_E2E_SERVER ?? "agentls";
const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "agentls-e2e-nes-"));
const scriptFile = path.join(stateDir, "script.json");
fs.writeFileSync(scriptFile, JSON.stringify({ responses: [], fim: [{ text: RENAMED + END }], loop: true }));

let vscode: VsCode;

async function fail(error: unknown): Promise<never> {
  throw new Error(`${String(error)}\n--- extension host log ---\n${vscode?.exthostLog() ?? ""}`);
}

/** What the suggestion decorations show: struck-through texts and `after` contents. */
async function decorations(): Promise<{ struck: string[]; after: string[] }> {
  return vscode.page.evaluate(() => {
    const struck: string[] = [];
    const after: string[] = [];
    for (const span of Array.from(document.querySelectorAll(".monaco-editor .view-lines span"))) {
      const style = getComputedStyle(span);
      if (style.textDecorationLine.includes("line-through") && span.children.length === 0) {
        struck.push((span.textContent ?? "").replace(/\u00a0/g, " "));
      }
      const content = getComputedStyle(span, "::after").content;
      if (content && content !== "none" && content !== "normal") after.push(content.replace(/^"|"$/g, ""));
    }
    return { struck, after };
  });
}

async function editorText(): Promise<string> {
  return (await vscode.page.locator(".monaco-editor .view-lines").first().innerText()).replace(/\u00a0/g, " ");
}

async function cursorPosition(): Promise<string> {
  return (await vscode.page.locator("#status\\.editor\\.selection").innerText()).trim();
}

describe("next edit suggestions in VS Code", { timeout: 300_000 }, () => {
  before(async () => {
    vscode = await launch({
      files: { "scale.py": SOURCE },
      settings: {
        "agentls.server.path": server,
        "agentls.provider": "scripted",
        "agentls.providerOptions": { script: scriptFile },
        "agentls.inlineCompletion.enabled": false,
        "agentls.nextEdit.debounceMs": 0,
        "editor.autoClosingBrackets": "never",
      },
      env: { AGENTLS_STATE_DIR: stateDir },
    });
  });

  after(async () => {
    await vscode?.stop();
  });

  it("renaming a parameter suggests the call site; Tab jumps, Tab applies", { timeout: 120_000 }, async () => {
    const { page } = vscode;
    await page.locator(".statusbar-item", { hasText: "agentls: scripted" }).waitFor({ timeout: 60_000 }).catch(fail);
    await page.keyboard.press("Control+Shift+E");
    await page.locator('.explorer-folders-view .monaco-list-row[aria-label="scale.py"]').click();
    await page.locator('.tab[aria-label*="scale.py"]').first().waitFor();
    await page.locator(".monaco-editor .view-lines").first().click();
    await page.keyboard.press("Control+Home");
    for (let i = 0; i < "def scale(x, ".length; i++) await page.keyboard.press("ArrowRight");
    await page.keyboard.press("Control+Shift+ArrowRight"); // select `factor`
    await page.keyboard.type("ratio", { delay: 60 });

    const shown = await waitFor("the next edit decorations", 30_000, async () => {
      const found = await decorations();
      return found.after.filter((t) => t === "ratio").length === 2 ? found : undefined;
    }).catch(fail);
    assert.deepEqual(shown.struck.filter((t) => t === "factor").length, 2);
    await vscode.screenshot("next-edit-suggested");

    await page.keyboard.press("Tab"); // jump to the first edit (line 2)
    await waitFor("the cursor on the edit's line", 10_000, async () =>
      /^Ln 2,/.test(await cursorPosition()) ? true : undefined,
    ).catch(fail);
    await page.keyboard.press("Tab"); // apply
    await waitFor("both edits applied", 10_000, async () =>
      (await editorText()).includes("print(scale(2, ratio=3))") ? true : undefined,
    ).catch(fail);
    const text = await editorText();
    assert.ok(text.includes("return x * ratio"), text);
    assert.ok(!text.includes("factor"), text);
    await vscode.screenshot("next-edit-applied");
  });

  it("Escape dismisses a suggestion and Tab is Tab again", { timeout: 120_000 }, async () => {
    const { page } = vscode;
    await page.keyboard.press("Control+z"); // back to only the signature renamed: suggested again
    await waitFor("the suggestion again", 30_000, async () =>
      (await decorations()).after.includes("ratio") ? true : undefined,
    ).catch(fail);
    await page.keyboard.press("Escape");
    await waitFor("the decorations gone", 10_000, async () =>
      (await decorations()).after.includes("ratio") ? undefined : true,
    ).catch(fail);
    const before = await editorText();
    assert.ok(before.includes("factor"), before);
    await page.keyboard.press("Tab"); // no suggestion: the editor's own Tab (indents)
    await waitFor("Tab typed into the document", 10_000, async () =>
      (await editorText()) !== before ? true : undefined,
    ).catch(fail);
    assert.ok((await editorText()).includes("factor"));
  });
});
