import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { escapeHtml, renderEntry, toolCallSummary } from "../src/chat/render";
import type { Entry } from "../src/chat/transcript";

const entry = (e: Partial<Entry> & Pick<Entry, "role">): Entry => ({ id: "e1", text: "", thinking: "", streaming: false, ...e });

describe("renderEntry", () => {
  it("renders assistant markdown without passing raw HTML through", () => {
    const html = renderEntry(entry({ role: "assistant", text: "**bold** `code` <img src=x onerror=alert(1)>" }));
    assert.match(html, /<strong>bold<\/strong>/);
    assert.match(html, /<code>code<\/code>/);
    assert.ok(!html.includes("<img"), html);
    assert.match(html, /&lt;img/);
  });

  it("renders fenced code blocks", () => {
    const html = renderEntry(entry({ role: "assistant", text: "```python\nprint('<script>')\n```" }));
    assert.match(html, /<pre><code class="language-python">print\('&lt;script&gt;'\)/);
  });

  it("offers 'Restore to before this turn' on restorable prompts only", () => {
    const html = renderEntry(entry({ role: "user", text: "fix it", turn: 2, restorable: true }));
    assert.match(html, /<button class="restore" data-turn="2" [^>]*>Restore to before this turn<\/button>/);
    assert.ok(!renderEntry(entry({ role: "user", text: "fix it", turn: 2 })).includes("restore"));
  });

  it("escapes user text and keeps its line breaks in a pre", () => {
    const html = renderEntry(entry({ role: "user", text: "<b>hi</b>\nthere" }));
    assert.match(html, /<pre>&lt;b&gt;hi&lt;\/b&gt;\nthere<\/pre>/);
  });

  it("lists the instruction files in the prompt's context fold", () => {
    const html = renderEntry(entry({ role: "user", text: "go", instructions: ["AGENTS.md", "pkg/<x>.md"] }));
    assert.match(html, /Context sent with the prompt/);
    assert.match(html, /Project instructions: AGENTS.md, pkg\/&lt;x&gt;.md/);
    const plain = renderEntry(entry({ role: "user", text: "go" }));
    assert.ok(!plain.includes("Context sent"), plain);
  });

  it("folds a compaction summary", () => {
    const html = renderEntry(entry({ role: "summary", text: "Summary <b>" }));
    assert.match(html, /<details class="summary"><summary>Earlier turns compacted/);
    assert.match(html, /Summary &lt;b&gt;/);
  });

  it("folds tool calls and results", () => {
    const call = renderEntry(
      entry({ role: "assistant", toolCalls: [{ name: "edit_file", arguments: { path: "src/a.py", old_string: "<x>" } }] }),
    );
    assert.match(call, /<details class="tool-call">/);
    assert.match(call, /edit_file src\/a\.py/);
    assert.match(call, /&lt;x&gt;/);
    const ok = renderEntry(entry({ role: "tool", tool: { name: "read_file", success: true, output: "contents" } }));
    assert.match(ok, /<details class="tool-result ok">/);
    const failed = renderEntry(entry({ role: "tool", tool: { name: "edit_file", success: false, output: "", error: "declined" } }));
    assert.match(failed, /tool-result failed/);
    assert.match(failed, /edit_file failed/);
    assert.match(failed, /declined/);
  });

  it("shows a cursor while streaming and folds thinking", () => {
    const html = renderEntry(entry({ role: "assistant", text: "Hel", thinking: "plan", streaming: true }));
    assert.match(html, /class="msg msg-assistant streaming"/);
    assert.match(html, /class="cursor"/);
    assert.match(html, /<details class="thinking"><summary>Thinking<\/summary><pre>plan<\/pre>/);
  });

  it("escapes the entry id", () => {
    assert.match(renderEntry(entry({ role: "info", id: '"x' })), /data-id="&quot;x"/);
  });
});

describe("helpers", () => {
  it("toolCallSummary names the path or the command", () => {
    assert.equal(toolCallSummary({ name: "run_command", arguments: { argv: ["pytest", "-q"] } }), "run_command pytest -q");
    assert.equal(toolCallSummary({ name: "list_files", arguments: {} }), "list_files");
  });
  it("escapeHtml escapes the five characters", () => {
    assert.equal(escapeHtml(`<a href="x">'&'</a>`), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  });
});
