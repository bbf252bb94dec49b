import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { discoverServer, expandPath, type DiscoveryInput } from "../src/serverPath";

function input(existing: string[], extra: Partial<DiscoveryInput> = {}): DiscoveryInput {
  const set = new Set(existing);
  return {
    workspaceFolders: ["/ws"],
    envPath: "/usr/local/bin:/usr/bin",
    platform: "linux",
    home: "/home/u",
    isExecutable: (f) => set.has(f),
    ...extra,
  };
}

describe("discoverServer", () => {
  it("prefers the workspace .venv, then venv", () => {
    assert.deepEqual(discoverServer(input(["/ws/.venv/bin/agentls", "/ws/venv/bin/agentls", "/usr/bin/agentls"])), {
      found: true,
      path: "/ws/.venv/bin/agentls",
      source: ".venv in /ws",
    });
    const r = discoverServer(input(["/ws/venv/bin/agentls", "/usr/bin/agentls"]));
    assert.equal(r.found && r.path, "/ws/venv/bin/agentls");
  });

  it("then the selected Python interpreter's directory, then PATH", () => {
    const py = discoverServer(input(["/opt/py/bin/agentls", "/usr/bin/agentls"], { pythonInterpreter: "/opt/py/bin/python3" }));
    assert.equal(py.found && py.path, "/opt/py/bin/agentls");
    const onPath = discoverServer(input(["/usr/bin/agentls"]));
    assert.equal(onPath.found && onPath.source, "PATH");
  });

  it("uses the configured path alone, with ~ and ${workspaceFolder} expanded", () => {
    const r = discoverServer(input(["/home/u/bin/agentls", "/ws/.venv/bin/agentls"], { configured: "~/bin/agentls" }));
    assert.equal(r.found && r.path, "/home/u/bin/agentls");
    const w = discoverServer(input(["/ws/tools/agentls"], { configured: "${workspaceFolder}/tools/agentls" }));
    assert.equal(w.found && w.path, "/ws/tools/agentls");
    const rel = discoverServer(input(["/ws/tools/agentls"], { configured: "tools/agentls" }));
    assert.equal(rel.found && rel.path, "/ws/tools/agentls");
  });

  it("reports a missing configured path without falling back", () => {
    const r = discoverServer(input(["/ws/.venv/bin/agentls"], { configured: "/nope/agentls" }));
    assert.equal(r.found, false);
    assert.ok(!r.found && r.message.includes("agentls.server.path"));
    assert.deepEqual(!r.found && r.tried, ["/nope/agentls"]);
  });

  it("looks a bare configured name up on PATH", () => {
    const r = discoverServer(input(["/usr/bin/my-agentls"], { configured: "my-agentls" }));
    assert.equal(r.found && r.path, "/usr/bin/my-agentls");
  });

  it("lists every place it looked when nothing is found", () => {
    const r = discoverServer(input([]));
    assert.equal(r.found, false);
    if (!r.found) {
      assert.deepEqual(r.tried, ["/ws/.venv/bin/agentls", "/ws/venv/bin/agentls", "/usr/local/bin/agentls", "/usr/bin/agentls"]);
      assert.match(r.message, /set agentls\.server\.path/);
    }
  });

  it("uses Scripts\\agentls.exe on Windows", () => {
    const r = discoverServer(input(["/ws/.venv/Scripts/agentls.exe"], { platform: "win32", envPath: "" }));
    assert.equal(r.found && r.path.replace(/\\/g, "/"), "/ws/.venv/Scripts/agentls.exe");
  });

  it("expandPath leaves absolute paths alone", () => {
    assert.equal(expandPath("/abs/agentls", ["/ws"]), "/abs/agentls");
    assert.equal(expandPath("agentls", ["/ws"]), "agentls");
  });
});
