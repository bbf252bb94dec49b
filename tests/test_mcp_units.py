"""MCP feature, pure logic: names, schemas, results, configuration, the
dynamic tool catalog; and `agentls check` starting real servers once.
(The servers through the language server: tests/e2e/test_mcp.py.)"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentls.core.settings.load import load_settings
from agentls.core.tools.executor import ToolExecutor
from agentls.features.mcp.config import (
    child_environment,
    provider_key_names,
    read_workspace_file,
    resolved_headers,
    server_specs,
)
from agentls.features.mcp.names import MAX_NAME, assign_names, server_part
from agentls.features.mcp.results import MAX_RESULT_CHARS, render_result
from agentls.features.mcp.schema import normalize_input_schema
from agentls.features.mcp.server_config import McpServerConfig
from agentls.features.policy.rules import Policy

# --------------------------------------------------------------------------- names


def test_names_are_prefixed_sanitised_and_bounded() -> None:
    names = assign_names("my_server", ["get.time", "ok-name_1"])
    assert names == {"get.time": "mcp__my_server__get_time",
                     "ok-name_1": "mcp__my_server__ok-name_1"}
    # A server name that cannot stand as one part of a name (a space, ".",
    # "__") gets a stand-in with a hash of the name, unambiguous by origin.
    spaced = assign_names("my server", ["t"])["t"]
    assert spaced == f"mcp__{server_part('my server')}__t" and spaced.startswith("mcp__my_server-")
    long = assign_names("s", ["x" * 100])["x" * 100]
    assert len(long) == MAX_NAME and long.startswith("mcp__s__xxx")


def test_colliding_names_stay_apart_and_are_stable() -> None:
    first = assign_names("s", ["a.b", "a b", "a_b"])
    assert len(set(first.values())) == 3 and first["a.b"] == "mcp__s__a_b"
    assert all(len(n) <= MAX_NAME for n in first.values())
    assert assign_names("s", ["a.b", "a b", "a_b"]) == first  # same input, same names
    taken: set[str] = set()
    one = assign_names("x", ["t"], taken)
    two = assign_names("x", ["t"], taken)  # e.g. a second server sanitised the same
    assert one["t"] != two["t"]


# --------------------------------------------------------------------------- schemas


@pytest.mark.parametrize("schema", [None, "text", {"type": "string"}, {"type": "array"}])
def test_unusable_schemas_become_an_empty_object(schema: Any) -> None:
    fixed, _ = normalize_input_schema(schema)
    assert fixed == {"type": "object", "properties": {}}


def test_schema_top_level_is_what_openai_and_anthropic_accept() -> None:
    fixed, note = normalize_input_schema({
        "$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
        "anyOf": [{"required": ["a"]}], "properties": {"a": {"type": "string"}, "b": 3},
        "required": ["a", "zzz"]})
    assert fixed == {"type": "object", "properties": {"a": {"type": "string"}},
                     "required": ["a"]}
    assert note is not None and "anyOf" in note
    big = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "d" * 100}
                                            for i in range(400)}}
    fixed, note = normalize_input_schema(big)
    assert fixed["properties"] == {} and note is not None and "too large" in note


# --------------------------------------------------------------------------- results


def test_results_text_structured_resources_images() -> None:
    ok, text = render_result({"content": [
        {"type": "text", "text": "hello"},
        {"type": "image", "mimeType": "image/png", "data": "aGVsbG8="},
        {"type": "resource", "resource": {"uri": "file:///a", "text": "inside"}},
        {"type": "resource_link", "uri": "notes://x", "name": "x"}],
        "structuredContent": {"n": 1}})
    assert ok
    assert "hello" in text and "[image image/png" in text and "inside" in text
    assert "notes://x" in text and '"n": 1' in text
    ok, text = render_result({"content": [{"type": "text", "text": '{"n": 1}'}],
                              "structuredContent": {"n": 1}})
    assert text == '{"n": 1}'  # the same data is not shown twice


def test_error_results_and_floods() -> None:
    assert render_result({"content": [{"type": "text", "text": "bad"}], "isError": True}) \
        == (False, "bad")
    ok, text = render_result({"content": [], "isError": True})
    assert not ok and "without a message" in text
    ok, text = render_result({"content": [{"type": "text", "text": "x" * 5_000_000}]})
    assert ok and len(text) < MAX_RESULT_CHARS + 100 and "cut by agentls" in text


# --------------------------------------------------------------------------- config


def test_settings_accept_claude_desktop_and_vscode_blocks(tmp_path: Path) -> None:
    loaded = load_settings(init_options={"mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"},
                 "autoApprove": ["x"]},  # other clients' keys are ignored
        "remote": {"type": "http", "url": "https://example.test/mcp",
                   "headers": {"Authorization": "Bearer ${env:TOKEN}"}}}},
        environ={}, workspace_root=tmp_path)
    assert loaded.problems == []
    specs, invalid = server_specs(loaded.settings.mcp_servers, None, workspace_trusted=False)
    servers = {s.name: s.config for s in specs}
    assert invalid == []
    assert servers["time"].transport == "stdio" and servers["remote"].transport == "http"
    assert servers["time"].timeout_seconds == 60.0


@pytest.mark.parametrize("block", [{"args": ["x"]}, {"command": "a", "url": "http://h/mcp"},
                                   {"url": "ftp://h"}, {"type": "stdio", "url": "http://h"}])
def test_a_bad_server_block_is_reported_and_the_others_still_run(tmp_path: Path,
                                                                  block: Any) -> None:
    loaded = load_settings(init_options={"mcpServers": {"bad": block, "good": {"command": "a"}}},
                           environ={}, workspace_root=tmp_path)
    specs, invalid = server_specs(loaded.settings.mcp_servers, None, workspace_trusted=False)
    assert [s.name for s in specs] == ["good"]
    assert len(invalid) == 1 and invalid[0][0] == "bad"
    assert "mcpServers: server 'bad' is invalid" in invalid[0][1]


def test_mcp_servers_must_be_an_object_of_objects(tmp_path: Path) -> None:
    loaded = load_settings(init_options={"mcpServers": ["time"]}, environ={},
                           workspace_root=tmp_path)
    assert loaded.settings.mcp_servers == {}
    assert any("mcpServers" in p.message for p in loaded.problems)


def test_environment_hides_provider_keys_unless_named() -> None:
    environ = {"PATH": "/bin", "OPENAI_API_KEY": "sk-1", "MY_KEY": "k", "GH": "ghp"}
    hidden = provider_key_names("MY_KEY")
    config = McpServerConfig(command="x", env={"TOKEN": "${env:GH}", "B": "${NOPE}-z"})
    env, missing = child_environment(config, environ, hidden)
    assert env["PATH"] == "/bin" and "OPENAI_API_KEY" not in env and "MY_KEY" not in env
    assert env["TOKEN"] == "ghp" and env["B"] == "-z" and missing == ["NOPE"]
    named = McpServerConfig(command="x", env={"OPENAI_API_KEY": "${env:OPENAI_API_KEY}"})
    assert child_environment(named, environ, hidden)[0]["OPENAI_API_KEY"] == "sk-1"
    headers, _ = resolved_headers(
        McpServerConfig(url="http://h/mcp", headers={"Authorization": "Bearer ${env:GH}"}),
        environ)
    assert headers == {"Authorization": "Bearer ghp"}


def test_workspace_file_servers_and_problems(tmp_path: Path) -> None:
    assert read_workspace_file(tmp_path) is None
    (tmp_path / ".mcp.json").write_text(json.dumps({"servers": {  # VS Code's key
        "ok": {"command": "a"}, "bad": {"nothing": 1}, "bad name!": {"command": "b"}}}))
    found = read_workspace_file(tmp_path)
    assert found is not None and [s.name for s in found.servers] == ["ok"]
    assert len(found.problems) == 2 and len(found.digest) == 64
    settings = {"ok": {"command": "mine"}}
    assert server_specs(settings, found, workspace_trusted=True)[0][0].config.command == "mine"
    assert server_specs({}, found, workspace_trusted=False) == ([], [])
    (tmp_path / ".mcp.json").write_text("{not json")
    broken = read_workspace_file(tmp_path)
    assert broken is not None and "not valid JSON" in broken.problems[0]


# --------------------------------------------------------------------------- catalog + policy


class _Dynamic:
    name = "dyn"

    def __init__(self) -> None:
        self.version = 0
        self.tools: list[dict[str, Any]] = []

    def tools_version(self, state: dict[str, Any]) -> int:
        return self.version

    def get_tool_schemas(self, state: dict[str, Any]) -> list[dict[str, Any]]:
        return list(self.tools)


def test_tool_executor_rereads_dynamic_plugins_when_their_version_moves() -> None:
    plugin = _Dynamic()
    executor = ToolExecutor([plugin])
    assert executor.specs == []
    plugin.tools = [{"name": "mcp__s__t", "parameters": {"type": "object", "properties": {}}}]
    assert executor.specs == []  # same version: not re-read
    plugin.version = 1
    assert [s["name"] for s in executor.specs] == ["mcp__s__t"] and "mcp__s__t" in executor


def test_policy_hands_mcp_calls_to_the_gate_and_rules_allow_or_deny(tmp_path: Path) -> None:
    from agentls.core.approval.gate import ApprovalQuestion
    from agentls.core.settings.schema import ApprovalSettings
    from agentls.core.tools.contract import default_need

    policy = Policy(ApprovalSettings(rules=[{"tool": "mcp__time__*", "action": "allow"},
                                            {"tool": "mcp__evil__*", "action": "deny"}]),
                    [tmp_path])
    def verdict(tool: str, arguments: dict[str, Any]) -> str:
        need = default_need(arguments)  # what McpTools.tool_need starts from
        return policy.decide(ApprovalQuestion(tool, arguments, need, "s")).verdict

    assert verdict("mcp__git__git_status", {}) == "ask"  # the gate asks (Allow for session)
    assert verdict("mcp__time__now", {}) == "allow"
    assert verdict("mcp__evil__x", {}) == "deny"
    # path arguments of MCP tools are confined like any tool's
    assert verdict("mcp__fs__read", {"path": "/etc/passwd"}) == "deny"


# --------------------------------------------------------------------------- agentls check


def test_check_starts_each_server_once_and_lists_tools_or_errors(tmp_path: Path) -> None:
    servers = {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
               "missing": {"command": "/nonexistent/mcp-server"}}
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "AGENTLS_PROVIDER": "scripted",
           "AGENTLS_CONFIG_FILE": "/nonexistent/agentls.toml",
           "AGENTLS_STATE_DIR": str(tmp_path / "state"),
           "AGENTLS_MCP_SERVERS": json.dumps(servers)}
    done = subprocess.run([sys.executable, "-m", "agentls", "check", "--workspace",
                           str(tmp_path)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "time: ok, 2 tools: mcp__time__convert_time, mcp__time__get_current_time" \
        in done.stdout
    assert "missing: error: /nonexistent/mcp-server" in done.stdout
    assert "no such program" in done.stdout


# --------------------------------------------------------------------------- list_changed


async def test_list_changed_refreshes_the_catalog_and_progress_is_forwarded() -> None:
    import os

    from agentls.features.mcp.config import McpServerSpec
    from agentls.features.mcp.manager import McpManager

    raw = str(Path(__file__).parent / "fakes" / "mcp_raw_server.py")
    manager = McpManager(environ=os.environ, hidden_env=frozenset())
    changes: list[int] = []
    manager.listeners.append(lambda: changes.append(1))
    try:
        await manager.apply([McpServerSpec("raw", McpServerConfig(command=sys.executable,
                                                                   args=[raw]))])
        await manager.wait_settled(30)
        assert "mcp__raw__grown" not in manager.tools
        result = await manager.connections["raw"].call_tool("grow", {})
        assert result["content"][0]["text"] == "grew a tool"
        for _ in range(100):
            if "mcp__raw__grown" in manager.tools:
                break
            await asyncio.sleep(0.05)
        assert "mcp__raw__grown" in manager.tools
        seen: list[str] = []

        async def progress(text: str) -> None:
            seen.append(text)

        done = await manager.connections["raw"].call_tool("steps", {}, progress)
        assert done["content"][0]["text"] == "two steps done"
        assert seen == ["raw/steps: 1/2 step 1", "raw/steps: 2/2 step 2"]
    finally:
        await manager.aclose()
    assert manager.status() == []


async def test_stopping_a_server_that_is_still_starting_is_quick_and_leaves_no_process(
        tmp_path: Path) -> None:
    import os

    from agentls.features.mcp.config import McpServerSpec
    from agentls.features.mcp.connection import McpConnection

    # A "server" that never answers initialize: a shell waiting on its stdin.
    pid_file = tmp_path / "pid"
    script = f"echo $$ > {pid_file}; exec sleep 600"
    conn = McpConnection(McpServerSpec("slow", McpServerConfig(command="/bin/sh",
                                                               args=["-c", script])),
                         environ=os.environ, hidden_env=frozenset())
    conn.start()
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        await asyncio.sleep(0.05)
    pid = int(pid_file.read_text())
    await conn.stop()
    assert conn.state == "stopped"
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError(f"process {pid} still runs")
