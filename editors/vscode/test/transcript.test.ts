import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { contentText, readToolCalls, restoreSummary, Transcript } from "../src/chat/transcript";

describe("Transcript", () => {
  it("accumulates deltas and swaps in the final message", () => {
    const t = new Transcript();
    const [userId] = t.addUserPrompt("hi");
    t.applyDelta({ sessionId: "s1", index: 1, delta: "Hel", kind: "text" });
    const [id] = t.applyDelta({ sessionId: "s1", index: 1, delta: "lo", kind: "text" });
    assert.equal(t.sessionId, "s1");
    assert.equal(t.find(id)?.text, "Hello");
    assert.equal(t.find(id)?.streaming, true);
    t.applyMessage({ role: "user", content: "hi" }, "s1");
    assert.equal(t.find(userId)?.local, false, "the server's copy confirms the local prompt");
    const changed = t.applyMessage({ role: "assistant", content: "Hello!" }, "s1");
    assert.deepEqual(changed, [id]);
    assert.equal(t.find(id)?.text, "Hello!");
    assert.equal(t.find(id)?.streaming, false);
    assert.equal(t.entries.length, 2);
  });

  it("matches the final message to its deltas by index", () => {
    const t = new Transcript("s");
    const [a] = t.applyDelta({ sessionId: "s", index: 1, delta: "first" });
    const [b] = t.applyDelta({ sessionId: "s", index: 3, delta: "second" });
    assert.deepEqual(t.applyMessage({ role: "assistant", content: "second!" }, "s", 3), [b]);
    assert.equal(t.find(a)?.streaming, true);
    assert.equal(t.find(b)?.text, "second!");
  });

  it("confirms the typed prompt and folds the context the server attached", () => {
    const t = new Transcript("s");
    const [id] = t.addUserPrompt("Say hello");
    assert.deepEqual(t.applyMessage({ role: "user", content: 'Say hello\n\n<editor file="main.py"/>' }, "s"), [id]);
    assert.equal(t.entries.length, 1);
    assert.equal(t.find(id)?.text, "Say hello");
    assert.equal(t.find(id)?.attachments, '<editor file="main.py"/>');
  });

  it("shows a stored prompt as typed (metadata.prompt) with its context folded", () => {
    const t = new Transcript("s", [
      { role: "user", content: 'Say hello\n\n<editor file="main.py"/>', metadata: { prompt: "Say hello" } },
      { role: "user", content: "Explain this\n\n<selection>x</selection>", metadata: { prompt: "/explain" } },
    ]);
    assert.equal(t.entries[0].text, "Say hello");
    assert.equal(t.entries[0].attachments, '<editor file="main.py"/>');
    assert.equal(t.entries[1].text, "/explain");
    assert.equal(t.entries[1].attachments, "Explain this\n\n<selection>x</selection>");
  });

  it("names the project instruction files with the prompt, adding a subfolder's mid-turn", () => {
    const t = new Transcript("s");
    const [id] = t.addUserPrompt("Fix pkg");
    t.applyMessage({ role: "user", content: "Fix pkg", metadata: { instructions: ["AGENTS.md"] } }, "s");
    assert.deepEqual(t.find(id)?.instructions, ["AGENTS.md"]);
    const changed = t.applyMessage(
      { role: "assistant", content: "Done", metadata: { instructions: ["AGENTS.md", "pkg/AGENTS.md"] } },
      "s",
    );
    assert.ok(changed.includes(id), "the prompt's entry is redrawn");
    assert.deepEqual(t.find(id)?.instructions, ["AGENTS.md", "pkg/AGENTS.md"]);
    assert.equal(t.entries.length, 2);
    assert.equal(t.entries[1].text, "Done");
  });

  it("shows a compaction summary as its own entry", () => {
    const t = new Transcript("s", [
      { role: "user", content: "hi" },
      { role: "system", content: "Summary: said hi.", metadata: { source: "compaction", compacted_through: 1 } },
    ]);
    assert.deepEqual(t.entries.map((e) => e.role), ["user", "summary"]);
    assert.equal(t.entries[1].text, "Summary: said hi.");
  });

  it("keeps thinking apart from text", () => {
    const t = new Transcript("s");
    const [id] = t.applyDelta({ sessionId: "s", index: 0, delta: "hmm", kind: "thinking" });
    t.applyDelta({ sessionId: "s", index: 0, delta: "Yes", kind: "text" });
    assert.equal(t.find(id)?.thinking, "hmm");
    assert.equal(t.find(id)?.text, "Yes");
  });

  it("ignores notifications for other sessions", () => {
    const t = new Transcript("mine");
    assert.deepEqual(t.applyDelta({ sessionId: "other", index: 0, delta: "x" }), []);
    assert.deepEqual(t.applyMessage({ role: "assistant", content: "x" }, "other"), []);
    assert.equal(t.entries.length, 0);
  });

  it("shows tool calls and their results with the tool's name", () => {
    const t = new Transcript("s");
    t.applyMessage({
      role: "assistant",
      content: "",
      metadata: { tool_calls: [{ tool: "edit_file", arguments: { path: "a.py" }, id: "c1" }] },
    });
    const [resultId] = t.applyMessage({
      role: "tool",
      content: "Error: declined",
      metadata: { tool_call_id: "c1" },
      toolResult: { success: false, error: { message: "The user declined" } },
    });
    const call = t.entries[0].toolCalls?.[0];
    assert.equal(call?.name, "edit_file");
    assert.deepEqual(call?.arguments, { path: "a.py" });
    const result = t.find(resultId)?.tool;
    assert.equal(result?.name, "edit_file");
    assert.equal(result?.success, false);
    assert.equal(result?.error, "The user declined");
  });

  it("marks hook injections", () => {
    const t = new Transcript("s");
    const [id] = t.applyMessage({ role: "user", content: "E501 line too long", metadata: { source: "hook", hook_name: "ruff" } });
    assert.equal(t.find(id)?.role, "hook");
    assert.equal(t.find(id)?.hookName, "ruff");
  });

  it("finishes a turn: closes streams, reports failure and cancellation", () => {
    const t = new Transcript();
    t.applyDelta({ sessionId: "s", index: 0, delta: "partial" });
    const changed = t.finishTurn({ sessionId: "s", status: "failed", error: { code: "rate_limit", message: "slow down" } });
    assert.equal(changed.length, 2);
    assert.equal(t.isStreaming, false);
    assert.equal(t.entries[1].role, "error");
    assert.equal(t.entries[1].text, "slow down");
    t.finishTurn({ sessionId: "s", status: "cancelled" });
    assert.equal(t.entries[2].text, "Cancelled.");
  });

  it("takes the session id from the result when no notification came", () => {
    const t = new Transcript();
    t.finishTurn({ sessionId: "new", status: "completed" });
    assert.equal(t.sessionId, "new");
  });

  it("loads a stored session", () => {
    const t = new Transcript("s", [
      { role: "system", content: "sys" },
      { role: "user", content: "q" },
      { role: "assistant", content: "a" },
    ]);
    assert.deepEqual(
      t.entries.map((e) => e.role),
      ["system", "user", "assistant"],
    );
  });
});

describe("helpers", () => {
  it("contentText handles strings, parts and objects", () => {
    assert.equal(contentText("x"), "x");
    assert.equal(contentText([{ type: "text", text: "a" }, "b", { type: "image" }]), "ab");
    assert.equal(contentText(null), "");
    assert.equal(contentText({ a: 1 }), '{\n  "a": 1\n}');
  });

  it("readToolCalls accepts the OpenAI shape and JSON-string arguments", () => {
    const calls = readToolCalls({
      tool_calls: [{ id: "x", function: { name: "read_file", arguments: '{"path":"b.py"}' } }],
      tool_call_previews: { x: "--- b.py" },
    });
    assert.deepEqual(calls, [{ id: "x", name: "read_file", arguments: { path: "b.py" }, preview: "--- b.py" }]);
  });
});

describe("Transcript turns and restore", () => {
  it("numbers prompts as the server does and marks the restorable ones", () => {
    const t = new Transcript("s", [
      { role: "user", content: "one" },
      { role: "assistant", content: "ok" },
      { role: "user", content: "lint says...", metadata: { source: "hook", hook_name: "linters" } },
      { role: "user", content: "summary", metadata: { source: "compaction" } },
      { role: "user", content: "two" },
    ]);
    const prompts = t.entries.filter((e) => e.role === "user");
    // A compaction summary is shown as a summary, not a prompt, and is no turn.
    assert.deepEqual(prompts.map((e) => [e.text, e.turn]), [["one", 1], ["two", 2]]);
    assert.deepEqual(t.entries.filter((e) => e.role === "summary").map((e) => [e.text, e.turn]), [["summary", undefined]]);
    const [local] = t.addUserPrompt("three");
    t.applyMessage({ role: "user", content: "three" }, "s", 5);
    assert.equal(t.find(local)?.turn, 3, "the confirmed prompt keeps its number");
    assert.equal(t.find(local)?.messageIndex, 5);
    const checkpoints = [{ turn: 1, messageIndex: 0 }, { turn: 3, messageIndex: 5 }];
    assert.equal(t.markRestorable(checkpoints).length, 2);
    assert.deepEqual(t.entries.filter((e) => e.restorable).map((e) => e.text), ["one", "three"]);
    assert.deepEqual(t.markRestorable(checkpoints), [], "nothing changed the second time");
    assert.equal(t.markRestorable([]).length, 2);
  });

  it("takes the server's turn number for a prompt it matched by index", () => {
    const t = new Transcript("s");
    t.applyMessage({ role: "user", content: "joined midway" }, "s", 12);
    assert.equal(t.entries[0]!.turn, 1);
    t.markRestorable([{ turn: 4, messageIndex: 12 }]);
    assert.equal(t.entries[0]!.turn, 4);
    assert.equal(t.entries[0]!.restorable, true);
  });

  it("summarises a restore", () => {
    assert.equal(
      restoreSummary(2, { restored: ["a.py"], conflicts: [{ path: "b.py", reason: "b.py was changed by someone else." }], note: "run_command is outside." }),
      "Restored 1 file to before turn 2: a.py. Left alone: b.py was changed by someone else. run_command is outside.",
    );
    assert.equal(restoreSummary(1, { restored: [], conflicts: [] }), "Restored 0 files to before turn 1.");
  });
});
