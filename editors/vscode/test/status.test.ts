import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { relativeTime, sessionLabel } from "../src/sessionLabel";
import { mcpStarting, statusView } from "../src/status";

describe("statusView", () => {
  const status = {
    provider: { id: "scripted", display_name: "Scripted" },
    model: "scripted-1",
    completions: { served: 3, shown: 2, accepted: 1 },
  };
  it("shows provider and model when idle", () => {
    const v = statusView("running", status, false);
    assert.equal(v.text, "$(sparkle) agentls: scripted · scripted-1");
    assert.match(v.tooltip, /Idle/);
    assert.match(v.tooltip, /3 served, 2 shown, 1 accepted/);
    assert.equal(v.error, false);
  });
  it("spins while busy (a turn of ours or the server's didChangeStatus)", () => {
    assert.match(statusView("running", status, true).text, /^\$\(sync~spin\)/);
    assert.match(statusView("running", status, false, { busy: true }).text, /^\$\(sync~spin\)/);
  });
  it("warns about workspace keys that wait for trust", () => {
    const v = statusView(
      "running",
      { ...status, workspaceTrust: { file: "/ws/.agentls.toml", state: "pending", pendingKeys: ["baseUrl", "linters"] } },
      false,
    );
    assert.match(v.text, /^\$\(warning\)/);
    assert.match(v.tooltip, /Ignored until trusted: baseUrl, linters from \/ws\/.agentls.toml \(it is not trusted yet/);
    const trusted = statusView("running", { ...status, workspaceTrust: { state: "trusted", pendingKeys: [] } }, false);
    assert.doesNotMatch(trusted.tooltip, /Ignored until trusted/);
  });
  it("shows failed MCP servers with their error, and knows when one is still starting", () => {
    const mcp = [
      { name: "time", state: "ready" as const, tools: ["mcp__time__now"] },
      { name: "broken", state: "failed" as const, tools: [], error: "exited\nstderr:\nno token" },
    ];
    const v = statusView("running", { ...status, mcp }, false);
    assert.equal(v.text, "$(warning) agentls: scripted · scripted-1 · MCP: 1 failed");
    assert.match(v.tooltip, /MCP server broken failed: exited stderr: no token/);
    assert.match(v.tooltip, /MCP server time: 1 tool\(s\)/);
    assert.equal(mcpStarting({ mcp }), false);
    assert.equal(mcpStarting({ mcp: [{ name: "x", state: "starting" }] }), true);
  });
  it("shows just the name when the server reports no status", () => {
    assert.equal(statusView("running", undefined, false).text, "$(sparkle) agentls");
  });
  it("warns about provider problems and server failures", () => {
    const v = statusView("running", { provider: { id: "openai", error: "no key" } }, false);
    assert.match(v.text, /^\$\(warning\)/);
    assert.equal(v.error, true);
    assert.match(statusView("failed", undefined, false).text, /error/);
    assert.match(statusView("starting", undefined, false).text, /loading~spin/);
  });
});

describe("sessionLabel", () => {
  const now = new Date("2026-01-01T12:00:00Z");
  it("shows title, age, status and size", () => {
    const l = sessionLabel(
      { sessionId: "s", title: "Fix the tests", updatedAt: "2026-01-01T11:50:00Z", status: { status: "failed", total_messages: 4 } },
      now,
    );
    assert.deepEqual(l, { label: "Fix the tests", description: "10 min ago · failed · 4 messages" });
  });
  it("names untitled sessions", () => {
    assert.equal(sessionLabel({ sessionId: "s", title: "" }, now).label, "Untitled session");
  });
  it("relativeTime", () => {
    assert.equal(relativeTime(new Date("2026-01-01T11:59:50Z"), now), "just now");
    assert.equal(relativeTime(new Date("2025-12-30T12:00:00Z"), now), "2 d ago");
  });
});
