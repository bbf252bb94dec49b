"""MCP servers through the real language server (a subprocess over LSP):
real MCP servers (`mcp-server-time`, `mcp-server-git` over stdio, a
streamable-HTTP server written with the SDK's MCPServer in
tests/fakes/mcp_http_server.py, and a hand-written misbehaving stdio server
in tests/fakes/mcp_raw_server.py), the scripted provider calling their
tools, and a client answering window/showMessageRequest as a user would.

Covered: approval asked with server, tool, arguments and the tool's
annotations; results reach the model; Allow for session honoured; Deny runs
nothing; approval.rules allow by tool glob; prompts as templates and `/`
completion; resources as `@mcp:` mentions attached to the prompt; the
workspace `.mcp.json` asked once and remembered; `${env:NAME}` in env;
provider keys hidden from servers; status with errors and stderr tails;
faults (crash mid-call, hang past timeoutSeconds, 3 MB answers and 5 MB of
stderr, invalid JSON on stdout, malformed schemas, colliding and too-long
names): the turn goes on with a failed ToolResult and the server keeps
answering; no MCP process outlives shutdown or a settings change.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient
from pytest_lsp.client import make_test_lsp_client

from tests.e2e.helpers import initialized, plain, server_env

TIMEOUT = 30.0
PY = sys.executable
FAKES = Path(__file__).resolve().parents[1] / "fakes"
RAW = [str(FAKES / "mcp_raw_server.py")]

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups")


@dataclass
class User:
    answer: str | None = "Allow once"
    prompts: list[dict[str, Any]] = field(default_factory=list)
    answers: dict[str, str] = field(default_factory=dict)  # text in message -> answer

    def choose(self, message: str) -> str | None:
        for needle, answer in self.answers.items():
            if needle in message:
                return answer
        return self.answer


@dataclass
class Server:
    client: LanguageClient
    user: User

    async def request(self, method: str, params: Any = None) -> Any:
        return plain(await asyncio.wait_for(
            self.client.protocol.send_request_async(method, params or {}), TIMEOUT))

    async def chat(self, prompt: str, **extra: Any) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("agentls/chat", {"prompt": prompt, **extra})
        return result

    async def mcp_status(self) -> list[dict[str, Any]]:
        status = await self.request("agentls/status")
        entries: list[dict[str, Any]] = status["mcp"]
        return entries

    async def wait_mcp(self, *names: str, states: tuple[str, ...] = ("ready",)
                       ) -> dict[str, dict[str, Any]]:
        """Poll agentls/status until each named server is in one of `states`."""
        deadline = asyncio.get_running_loop().time() + TIMEOUT
        while True:
            entries = {e["name"]: e for e in await self.mcp_status()}
            if all(entries.get(n, {}).get("state") in states for n in names):
                return entries
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"MCP servers not {states}: {entries}")
            await asyncio.sleep(0.1)


@asynccontextmanager
async def agentls(workspace: Path, state_dir: Path, settings: dict[str, Any], user: User,
                  **env: str) -> AsyncIterator[Server]:
    client = make_test_lsp_client()

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    async def show_message_request(
        params: types.ShowMessageRequestParams,
    ) -> types.MessageActionItem | None:
        user.prompts.append({"message": params.message,
                             "actions": [a.title for a in params.actions or []]})
        answer = user.choose(params.message)
        return None if answer is None else types.MessageActionItem(title=answer)

    caps = types.ClientCapabilities(window=types.WindowClientCapabilities(
        show_message=types.ShowMessageRequestClientCapabilities()))
    async with initialized(client, workspace, settings, caps, timeout=TIMEOUT,
                           env=server_env(AGENTLS_STATE_DIR=str(state_dir), **env)):
        yield Server(client, user)


def scripted(tmp_path: Path, responses: list[dict[str, Any]], servers: dict[str, Any],
             **extra: Any) -> tuple[dict[str, Any], Path]:
    record = tmp_path / "record.jsonl"
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": responses, "record": str(record)}))
    settings: dict[str, Any] = {"provider": "scripted", "providerOptions": {"script": str(script)},
                                "mcpServers": servers, **extra}
    return settings, record


def recorded(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


def tool_messages(call: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in call["messages"] if m.get("role") == "tool"]


def call(name: str, arguments: dict[str, Any], call_id: str = "c1") -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes (its parent has not reaped it yet).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


async def wait_dead(pids: list[int], seconds: float = 15.0) -> list[int]:
    deadline = asyncio.get_running_loop().time() + seconds
    while any(alive(p) for p in pids) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)
    return [p for p in pids if alive(p)]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "README.md").write_text("hello\n")
    return root


TIME = {"command": PY, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}


# --------------------------------------------------------------------------- real servers


async def test_time_tool_asks_and_its_result_reaches_the_model(
        tmp_path: Path, workspace: Path) -> None:
    settings, record = scripted(tmp_path, [
        call("mcp__time__get_current_time", {"timezone": "Europe/Paris"}),
        {"text": "It is morning in Paris."}], {"time": TIME})
    user = User(answer="Allow once")
    async with agentls(workspace, tmp_path / "state", settings, user) as s:
        entries = await s.wait_mcp("time")
        assert entries["time"]["tools"] == ["mcp__time__convert_time",
                                            "mcp__time__get_current_time"]
        result = await s.chat("What time is it in Paris?")
        assert result["status"] == "completed", result
        tool = result["messages"][2]
        assert tool["toolResult"]["success"] is True, tool

    assert len(user.prompts) == 1
    prompt = user.prompts[0]
    assert prompt["actions"] == ["Allow once", "Allow for session", "Deny"]
    assert "'get_current_time'" in prompt["message"] and "'time'" in prompt["message"]
    assert '"timezone": "Europe/Paris"' in prompt["message"]
    assert "read-only: yes" in prompt["message"]  # the server's annotation, shown
    calls = recorded(record)
    assert "mcp__time__get_current_time" in calls[0]["tools"]
    sent = tool_messages(calls[1])[-1]
    assert '"timezone": "Europe/Paris"' in sent and "datetime" in sent


async def test_allow_for_session_is_honoured_and_deny_runs_nothing(
        tmp_path: Path, workspace: Path) -> None:
    first, second, denied = workspace / "one.txt", workspace / "two.txt", workspace / "no.txt"
    settings, record = scripted(tmp_path, [
        call("mcp__raw__touch", {"path": str(first)}, "t1"),
        call("mcp__raw__touch", {"path": str(second)}, "t2"),
        {"text": "Both touched."},
        call("mcp__raw__touch", {"path": str(denied)}, "t3"),
        {"text": "Fine."}], {"raw": {"command": PY, "args": RAW}})
    user = User(answer="Allow for session")
    async with agentls(workspace, tmp_path / "state", settings, user) as s:
        await s.wait_mcp("raw")
        result = await s.chat("Touch two files")
        assert result["status"] == "completed", result
        assert first.exists() and second.exists()
        assert len(user.prompts) == 1  # the second call was covered by the session answer
        # A new session starts without that answer; this time the user denies.
        user.answer = "Deny"
        result = await s.chat("Touch another")  # a new session
        assert result["status"] == "completed", result
        assert result["messages"][2]["toolResult"]["success"] is False

    assert len(user.prompts) == 2
    assert not denied.exists()
    sent = tool_messages(recorded(record)[-1])[-1]
    assert sent.startswith("Error:") and "declined" in sent


async def test_git_and_http_servers_rules_templates_and_resources(
        tmp_path: Path, workspace: Path, http_server: str) -> None:
    await asyncio.to_thread(subprocess.run, ["git", "init", "-q", str(workspace)], check=True)
    (workspace / "new.txt").write_text("untracked\n")
    settings, record = scripted(tmp_path, [
        call("mcp__git__git_status", {"repo_path": str(workspace)}, "g1"),
        call("mcp__notes__add", {"a": 2, "b": 40}, "n1"),
        {"text": "Done."}],
        {"git": {"command": PY, "args": ["-m", "mcp_server_git", "--repository",
                                         str(workspace)]},
         "notes": {"url": http_server}},
        approval={"rules": [{"tool": "mcp__notes__*", "action": "allow"}]})
    user = User(answer="Allow once")
    async with agentls(workspace, tmp_path / "state", settings, user) as s:
        entries = await s.wait_mcp("git", "notes")
        assert "mcp__git__git_status" in entries["git"]["tools"]
        assert entries["notes"]["tools"] == ["mcp__notes__add"]
        assert entries["notes"]["transport"] == "http"

        templates = {t["name"]: t for t in (await s.request("agentls/templates"))["templates"]}
        review = templates["mcp__notes__review"]
        assert "Please review {{path}}" in review["template"]
        items = (await s.request("agentls/complete", {"text": "/mcp__notes__re"}))["items"]
        assert [i["applied"] for i in items if i["replacement"] == "/mcp__notes__review"] \
            == [review["template"]]
        items = (await s.request("agentls/complete", {"text": "see @mcp:no"}))["items"]
        assert any(i["replacement"] == "@mcp:notes:notes://today" for i in items)

        result = await s.chat("Status please, and read @mcp:notes:notes://today")
        assert result["status"] == "completed", result
        outcomes = [m["toolResult"]["success"] for m in result["messages"]
                    if m["role"] == "tool"]
        assert outcomes == [True, True]

    # git asked, the notes tool was allowed by the rule without a question
    assert len(user.prompts) == 1 and "git_status" in user.prompts[0]["message"]
    calls = recorded(record)
    user_text = next(m["content"] for m in calls[0]["messages"] if m["role"] == "user")
    assert "Buy milk. Ship the MCP client." in user_text  # the resource, attached
    sent = tool_messages(calls[2])
    assert "new.txt" in sent[0]
    assert "42" in sent[1]


async def test_a_prompt_sent_at_once_waits_for_the_servers_starting(
        tmp_path: Path, workspace: Path) -> None:
    settings, record = scripted(
        tmp_path, [call("mcp__raw__echo", {"text": "early"}), {"text": "ok"}],
        {"raw": {"command": PY, "args": RAW}},
        approval={"rules": [{"tool": "mcp__raw__echo", "action": "allow"}]})
    async with agentls(workspace, tmp_path / "state", settings, User()) as s:
        result = await s.chat("Right away")  # no wait for the server: the turn waits
        assert result["messages"][2]["toolResult"]["output"] == "echo: early", result
    assert "mcp__raw__echo" in recorded(record)[0]["tools"]


# --------------------------------------------------------------------------- faults


async def test_faults_fail_the_call_not_the_turn_nor_the_server(
        tmp_path: Path, workspace: Path) -> None:
    responses = [call(f"mcp__raw__{name}", {}, f"f{i}") for i, name in
                 enumerate(["hang", "garbage", "flood", "fail", "crash"])]
    responses += [{"text": "Survived."}, call("mcp__raw__echo", {"text": "back"}, "again"),
                  {"text": "It is back."}]
    settings, record = scripted(
        tmp_path, responses,
        {"raw": {"command": PY, "args": RAW, "timeoutSeconds": 2}},
        approval={"rules": [{"tool": "mcp__raw__*", "action": "allow"}]})
    user = User(answer=None)
    async with agentls(workspace, tmp_path / "state", settings, user) as s:
        entries = await s.wait_mcp("raw")
        tools = entries["raw"]["tools"]
        assert all(len(t) <= 64 for t in tools)
        # `a.b` and `a b` both sanitise to mcp__raw__a_b: both kept, apart
        collided = [t for t in tools if t.startswith("mcp__raw__a_b")]
        assert len(collided) == 2 and len(set(collided)) == 2
        assert any(t.startswith("mcp__raw__xxxx") for t in tools)  # the 100-char name, cut
        assert "mcp__raw__bad_schema_anyof" in tools

        result = await s.chat("Break things")
        assert result["status"] == "completed", result
        outcome = {m["toolCallId"] if "toolCallId" in m else m["metadata"]["tool_call_id"]:
                   m["toolResult"] for m in result["messages"] if m["role"] == "tool"}
        assert outcome["f0"]["success"] is False and "within 2s" in \
            outcome["f0"]["error"]["message"]
        assert outcome["f1"]["success"] is True  # the non-JSON line was skipped
        assert outcome["f2"]["success"] is True  # 3 MB answer, capped
        assert outcome["f3"]["success"] is False and "always fails" in \
            outcome["f3"]["error"]["message"]
        assert outcome["f4"]["success"] is False
        assert "crashing on purpose" in outcome["f4"]["error"]["message"]  # stderr tail
        entries = {e["name"]: e for e in await s.mcp_status()}
        assert entries["raw"]["state"] == "failed"
        assert "crashing on purpose" in entries["raw"]["error"]
        # The next call after the backoff (1 s after a first failure) restarts it.
        await asyncio.sleep(1.2)
        again = await s.chat("Again", sessionId=result["sessionId"])
        assert again["messages"][2]["toolResult"]["output"] == "echo: back", again
        await s.wait_mcp("raw")

    sent = tool_messages(recorded(record)[-1])
    assert len(sent[2]) < 250_000  # the flood did not reach the model whole


async def test_crashed_server_restarts_on_a_later_call_and_status_shows_stderr(
        tmp_path: Path, workspace: Path) -> None:
    marker = workspace / "later.txt"
    settings, _ = scripted(tmp_path, [
        call("mcp__raw__crash", {}, "c1"), {"text": "It crashed."},
        call("mcp__raw__touch", {"path": str(marker)}, "c2"), {"text": "Touched."}],
        {"raw": {"command": PY, "args": RAW},
         "broken": {"command": PY, "args": RAW, "env": {"MCP_RAW_CRASH_AT_START": "1"}},
         "missing": {"command": "/nonexistent/mcp-server"},
         "invalid": {"args": ["no command nor url"]}},
        approval={"rules": [{"tool": "mcp__raw__*", "action": "allow"}]})
    async with agentls(workspace, tmp_path / "state", settings, User()) as s:
        entries = await s.wait_mcp("raw")  # one bad block does not stop the others
        entries = await s.wait_mcp("broken", "missing", "invalid", states=("failed",))
        assert "give either `command`" in entries["invalid"]["error"]
        assert any("server 'invalid' is invalid" in m.message for m in s.client.messages)
        assert "missing configuration, giving up" in entries["broken"]["error"]
        assert "no such program" in entries["missing"]["error"]
        first = await s.chat("Crash it")
        assert first["messages"][2]["toolResult"]["success"] is False
        entries = {e["name"]: e for e in await s.mcp_status()}
        assert entries["raw"]["state"] == "failed"
        assert "crashing on purpose" in entries["raw"]["error"]
        await asyncio.sleep(1.2)  # past the first backoff
        second = await s.chat("Now touch", sessionId=first["sessionId"])
        assert second["messages"][-2]["toolResult"]["success"] is True, second
        assert marker.exists()
        await s.wait_mcp("raw")


async def test_cancelling_the_turn_cancels_the_mcp_call(tmp_path: Path, workspace: Path) -> None:
    log = tmp_path / "raw.jsonl"
    settings, _ = scripted(
        tmp_path, [call("mcp__raw__hang", {}, "h1"), {"text": "unused"}],
        {"raw": {"command": PY, "args": RAW, "env": {"MCP_RAW_LOG": str(log)}}},
        approval={"rules": [{"tool": "mcp__raw__*", "action": "allow"}]})

    def received() -> list[dict[str, Any]]:
        return [json.loads(line) for line in log.read_text().splitlines()] \
            if log.exists() else []

    async with agentls(workspace, tmp_path / "state", settings, User()) as s:
        await s.wait_mcp("raw")
        pending = asyncio.ensure_future(s.client.protocol.send_request_async(
            "agentls/chat", {"prompt": "Wait forever"}, msg_id="chat-hang"))
        deadline = asyncio.get_running_loop().time() + TIMEOUT
        while not any(m["method"] == "tools/call" for m in received()):
            assert asyncio.get_running_loop().time() < deadline, "the call never reached it"
            await asyncio.sleep(0.05)
        s.client.protocol.notify("$/cancelRequest", types.CancelParams(id="chat-hang"))
        result = plain(await asyncio.wait_for(pending, TIMEOUT))
        assert result["status"] == "cancelled", result
        call_id = next(m["id"] for m in received() if m["method"] == "tools/call")
        while not any(m["method"] == "notifications/cancelled" for m in received()):
            assert asyncio.get_running_loop().time() < deadline, "no notifications/cancelled"
            await asyncio.sleep(0.05)
        cancelled = next(m for m in received() if m["method"] == "notifications/cancelled")
        assert cancelled["params"]["requestId"] == call_id
        entries = await s.wait_mcp("raw")  # the server itself is still fine
        assert entries["raw"]["state"] == "ready"


# --------------------------------------------------------------------------- lifecycle


async def test_no_mcp_process_outlives_a_settings_change_or_shutdown(
        tmp_path: Path, workspace: Path) -> None:
    pids = tmp_path / "pids.txt"
    raw = {"command": PY, "args": RAW, "env": {"MCP_RAW_PID_FILE": "${env:RAW_PIDS}"}}
    settings, _ = scripted(tmp_path, [call("mcp__raw__getenv", {"name": "OPENAI_API_KEY"}),
                                      {"text": "ok"}], {},
                           approval={"rules": [{"tool": "mcp__*", "action": "allow"}]})
    init = {k: v for k, v in settings.items() if k != "mcpServers"}
    async with agentls(workspace, tmp_path / "state", init, User(),
                       RAW_PIDS=str(pids), OPENAI_API_KEY="sk-test-not-for-servers") as s:
        # Servers pushed as workspace/configuration (initializationOptions would
        # outrank the change below).
        s.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"agentls": {"mcpServers": {"raw": raw}}}))
        await s.wait_mcp("raw")
        result = await s.chat("Which key?")
        assert result["messages"][2]["toolResult"]["output"] == "<unset>"
        first_pid = int(pids.read_text().split()[0])
        assert alive(first_pid)
        # A changed block restarts the server: the old process is gone.
        changed = {"mcpServers": {"raw": {**raw, "args": [*RAW, "--changed"]}}}
        s.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"agentls": changed}))
        deadline = asyncio.get_running_loop().time() + TIMEOUT
        while len(pids.read_text().split()) < 2:
            assert asyncio.get_running_loop().time() < deadline, "no restart"
            await asyncio.sleep(0.1)
        assert await wait_dead([first_pid]) == []
        await s.wait_mcp("raw")
        second_pid = int(pids.read_text().split()[1])
    assert await wait_dead([second_pid]) == []


async def test_workspace_mcp_json_asks_once_and_is_remembered(
        tmp_path: Path, workspace: Path) -> None:
    (workspace / ".mcp.json").write_text(json.dumps(
        {"mcpServers": {"wsraw": {"command": PY, "args": RAW}}}))
    settings, _ = scripted(tmp_path, [], {})
    user = User(answers={".mcp.json": "Don't allow"})
    state = tmp_path / "state"
    async with agentls(workspace, state, settings, user) as s:
        deadline = asyncio.get_running_loop().time() + TIMEOUT
        while not user.prompts:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        # "waiting for you to allow" is also state stopped: wait for the answer's effect
        deadline = asyncio.get_running_loop().time() + TIMEOUT
        while True:
            entries = await s.wait_mcp("wsraw", states=("stopped",))
            error = entries["wsraw"].get("error") or ""
            if "waiting for you" not in error:
                break
            assert asyncio.get_running_loop().time() < deadline, error
            await asyncio.sleep(0.1)
        assert "did not allow" in error
    asked = user.prompts[0]
    assert "wsraw" in asked["message"] and asked["actions"] == ["Allow", "Don't allow"]

    # Refused is remembered: not asked again. Then a changed file asks again.
    user = User(answers={".mcp.json": "Allow"})
    async with agentls(workspace, state, settings, user) as s:
        # The feature decides at start whether to ask: the remembered refusal
        # in its status proves it started and took the not-asking branch.
        entries = await s.wait_mcp("wsraw", states=("stopped",))
        assert "did not allow" in (entries["wsraw"].get("error") or ""), entries
        await s.request("agentls/status")  # a question sent at start has arrived by now
        assert user.prompts == []
    (workspace / ".mcp.json").write_text(json.dumps(
        {"mcpServers": {"wsraw": {"command": PY, "args": [*RAW, "--v2"]}}}))
    async with agentls(workspace, state, settings, user) as s:
        await s.wait_mcp("wsraw")
        assert len(user.prompts) == 1
    user.prompts.clear()
    async with agentls(workspace, state, settings, user) as s:
        await s.wait_mcp("wsraw")
        assert user.prompts == []  # allowed content: starts without asking


# --------------------------------------------------------------------------- fixtures


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def http_server() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen([PY, str(FAKES / "mcp_http_server.py"), str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import time

        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the MCP HTTP test server did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)
