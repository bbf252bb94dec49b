"""`agentls acp` against bad input, on the raw wire (no SDK: the SDK's
client would refuse to send most of this): malformed JSON lines, messages
that are no JSON-RPC, unknown methods, bad params, a 50 MB prompt and a
client that disappears mid-turn get JSON-RPC errors or a clean exit, and
every byte on stdout is an ACP message. Also: the language server's start
never imports the ACP SDK."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.acp.harness import TIMEOUT, agent_env, scripted_settings

pytestmark = pytest.mark.asyncio


class RawAgent:
    """`agentls acp` with its stdio as plain pipes; every stdout line is kept."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[bytes] = []
        self.messages: list[dict[str, Any]] = []

    @classmethod
    async def start(cls, tmp_path: Path, env: dict[str, str]) -> RawAgent:
        stderr = open(tmp_path / "agent-stderr.log", "wb")  # noqa: ASYNC230 (for the child)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentls", "acp", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=stderr, env=env, cwd=str(tmp_path),
            limit=128 * 1024 * 1024)
        stderr.close()
        return cls(proc)

    async def send(self, data: bytes | dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        raw = data if isinstance(data, bytes) else json.dumps(data).encode() + b"\n"
        self.proc.stdin.write(raw)
        await self.proc.stdin.drain()

    async def receive(self, check: Any, timeout: float = TIMEOUT) -> dict[str, Any]:
        """The first message (received now or before) that `check` accepts."""
        assert self.proc.stdout is not None
        for message in self.messages:
            if check(message):
                return message
        while True:
            line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
            assert line, "the agent closed stdout"
            self.lines.append(line)
            message = json.loads(line)  # every line is JSON: stdout carries ACP only
            assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", line[:200]
            self.messages.append(message)
            if check(message):
                return message

    async def answer(self, ident: Any) -> dict[str, Any]:
        return await self.receive(lambda m: m.get("id") == ident and "method" not in m)

    async def close(self) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            return await asyncio.wait_for(self.proc.wait(), TIMEOUT)
        finally:
            if self.proc.returncode is None:
                self.proc.kill()


def request(ident: int, method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}


async def test_malformed_lines_get_json_rpc_errors(tmp_path: Path) -> None:
    agent = await RawAgent.start(tmp_path, agent_env(tmp_path))
    try:
        await agent.send(b"this is not json\n")
        parse = await agent.receive(lambda m: m.get("error", {}).get("code") == -32700)
        assert parse["id"] is None and "not JSON" in parse["error"]["message"]
        await agent.send(b"\xff\xfe{\n")
        await agent.send(b"[1, 2, 3]\n")
        array = await agent.receive(lambda m: m.get("error", {}).get("code") == -32600)
        assert array["id"] is None and "JSON object" in array["error"]["message"]
        await agent.send({"jsonrpc": "2.0", "id": 7, "method": 5})
        assert (await agent.answer(7))["error"]["code"] == -32600
        await agent.send(request(8, "no/such_method", {}))
        assert (await agent.answer(8))["error"]["code"] == -32601
        await agent.send(request(9, "session/prompt", {"sessionId": "x"}))
        assert (await agent.answer(9))["error"]["code"] == -32602
        await agent.send(request(10, "initialize", {"protocolVersion": 1}))
        assert (await agent.answer(10))["result"]["protocolVersion"] == 1
        await agent.send(request(11, "session/prompt", {
            "sessionId": "unknown", "prompt": [{"type": "text", "text": "hi"}]}))
        unknown = await agent.answer(11)
        assert unknown["error"]["code"] == -32602 and "session/new" in unknown["error"]["message"]
        await agent.send(request(12, "authenticate", {"methodId": "x"}))
        assert "apiKeyEnv" in (await agent.answer(12))["error"]["message"]
    finally:
        assert await agent.close() == 0
    errors = [m for m in agent.messages if m.get("id") is None and "error" in m]
    assert len(errors) == 3  # not JSON, not UTF-8, not an object


async def test_a_50_mb_prompt_is_refused_and_the_agent_goes_on(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    settings, record = scripted_settings(tmp_path, [{"text": "fine"}])
    agent = await RawAgent.start(tmp_path, agent_env(tmp_path, settings))
    try:
        await agent.send(request(1, "initialize", {"protocolVersion": 1}))
        await agent.answer(1)
        await agent.send(request(2, "session/new", {"cwd": str(workspace), "mcpServers": []}))
        sid = (await agent.answer(2))["result"]["sessionId"]
        huge = "a" * (50 * 1024 * 1024)
        await agent.send(request(3, "session/prompt", {
            "sessionId": sid, "prompt": [{"type": "text", "text": huge}]}))
        refused = await agent.answer(3)
        assert refused["error"]["code"] == -32602
        assert "session.maxPromptChars" in refused["error"]["message"]
        await agent.send(request(4, "session/prompt", {
            "sessionId": sid, "prompt": [{"type": "text", "text": "small"}]}))
        assert (await agent.answer(4))["result"]["stopReason"] == "end_turn"
    finally:
        assert await agent.close() == 0
    assert len(record.read_text().splitlines()) == 1  # the huge prompt never reached the model


async def test_a_client_that_vanishes_mid_turn(tmp_path: Path) -> None:
    from agentls.core.sessions.store import SessionStore

    workspace = tmp_path / "ws"
    workspace.mkdir()
    settings, _ = scripted_settings(tmp_path, [{"chunks": ["partial answer"], "stall": True}])
    env = agent_env(tmp_path, settings)
    agent = await RawAgent.start(tmp_path, env)
    await agent.send(request(1, "initialize", {"protocolVersion": 1}))
    await agent.answer(1)
    await agent.send(request(2, "session/new", {"cwd": str(workspace), "mcpServers": []}))
    sid = (await agent.answer(2))["result"]["sessionId"]
    await agent.send(request(3, "session/prompt", {
        "sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}))
    await agent.receive(lambda m: m.get("method") == "session/update"
                        and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk")
    assert await agent.close() == 0  # stdin closed mid-turn: a clean exit, no hang
    with SessionStore.open_default(env) as store:
        session = store.load(sid)
        assert [m.role for m in session.messages][:1] == ["user"]
        assert store.get_status(sid).status != "running"


async def test_the_language_server_start_does_not_import_the_acp_sdk(tmp_path: Path) -> None:
    env = agent_env(tmp_path)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-X", "importtime", "-m", "agentls", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        cwd=str(tmp_path))
    assert proc.stdin is not None and proc.stdout is not None

    def framed(message: dict[str, Any]) -> bytes:
        body = json.dumps(message).encode()
        return f"Content-Length: {len(body)}\r\n\r\n".encode() + body

    proc.stdin.write(framed(request(1, "initialize", {
        "processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}})))
    await proc.stdin.drain()
    header = await asyncio.wait_for(proc.stdout.readuntil(b"\r\n\r\n"), TIMEOUT)
    length = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
    answer = json.loads(await proc.stdout.readexactly(length))
    assert "capabilities" in answer["result"]
    proc.stdin.write(framed({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    proc.stdin.write(framed(request(2, "shutdown", None)))
    proc.stdin.write(framed({"jsonrpc": "2.0", "method": "exit"}))
    await proc.stdin.drain()
    _, stderr = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    imported = [line.rsplit("|", 1)[-1].strip() for line in stderr.decode().splitlines()
                if line.startswith("import time:")]
    assert "agentls.lsp.server" in imported  # the measurement saw the server start
    assert [m for m in imported if m == "acp" or m.startswith("acp.")] == []


async def test_bad_cwd_resume_and_close(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    settings, _ = scripted_settings(tmp_path, [{"text": "one"}, {"text": "two"}])
    env = agent_env(tmp_path, settings)
    agent = await RawAgent.start(tmp_path, env)
    try:
        await agent.send(request(1, "initialize", {"protocolVersion": 1}))
        caps = (await agent.answer(1))["result"]["agentCapabilities"]["sessionCapabilities"]
        assert {"list", "resume", "close"} <= set(caps)
        await agent.send(request(2, "session/new", {"cwd": "relative/dir", "mcpServers": []}))
        assert "absolute" in (await agent.answer(2))["error"]["message"]
        await agent.send(request(3, "session/new", {"cwd": str(workspace), "mcpServers": []}))
        sid = (await agent.answer(3))["result"]["sessionId"]
        await agent.send(request(4, "session/prompt", {
            "sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}))
        assert (await agent.answer(4))["result"]["stopReason"] == "end_turn"
        await agent.send(request(5, "session/close", {"sessionId": sid}))
        assert (await agent.answer(5))["result"] == {}
        await agent.send(request(6, "session/prompt", {
            "sessionId": sid, "prompt": [{"type": "text", "text": "closed?"}]}))
        assert (await agent.answer(6))["error"]["code"] == -32602
        replays = len(agent.messages)
        await agent.send(request(7, "session/resume", {"sessionId": sid, "cwd": str(workspace),
                                                       "mcpServers": []}))
        assert "configOptions" in (await agent.answer(7))["result"]
        # resumed without a replay of the conversation
        assert not [m for m in agent.messages[replays:] if m.get("method") == "session/update"
                    and m["params"]["update"]["sessionUpdate"] == "user_message_chunk"]
        await agent.send(request(8, "session/prompt", {
            "sessionId": sid, "prompt": [{"type": "text", "text": "again"}]}))
        assert (await agent.answer(8))["result"]["stopReason"] == "end_turn"
    finally:
        assert await agent.close() == 0


NOISY_SITECUSTOMIZE = '''
import os, sys, threading, time

def _noise():
    # once the agent has claimed stdout (agentls.acp.agent is imported after that)
    while "agentls.acp.agent" not in sys.modules:
        time.sleep(0.01)
    for _ in range(40):
        print("NOISE from print()", flush=True)
        os.write(1, b"RAW NOISE on fd 1\\n")
        time.sleep(0.02)

threading.Thread(target=_noise, daemon=True).start()
'''


async def test_stray_writes_to_stdout_never_reach_the_client(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NOISY_SITECUSTOMIZE)
    env = agent_env(tmp_path, PYTHONPATH=str(site))
    agent = await RawAgent.start(tmp_path, env)
    try:
        for ident in range(1, 30):
            await agent.send(request(ident, "session/list", {}))
            assert "sessions" in (await agent.answer(ident))["result"]
            await asyncio.sleep(0.05)
    finally:
        assert await agent.close() == 0
    # every line was JSON-RPC (RawAgent.receive asserts it); the noise went to stderr
    assert b"NOISE" in (tmp_path / "agent-stderr.log").read_bytes()
