"""`agentls acp` against bad input, through the real process on stdio;
beyond tests/acp/test_acp_wire.py (which has the 50 MB prompt, stray
writes to stdout and a client closing stdin mid-stream).

A broken or hostile client sends lines that are not JSON, JSON that is no
JSON-RPC message (`null`, which the SDK alone reads as the end of input),
unknown methods and notifications, bad params, or disappears (both pipes
gone, as when its process dies) while the model streams or while a
permission question waits. The agent answers each bad line with its
JSON-RPC error before reading the next (nothing for a notification), keeps
serving, writes nothing but JSON-RPC messages to stdout, and exits when its
client is gone instead of hanging.

No fixed sleeps: every "nothing else happened" is checked after a later
request's answer, which the agent sends only once it read past the bad line.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.acp.ndjson import AcpPipe, acp_env, not_acp

if importlib.util.find_spec("agentls.acp") is None:  # the front lands with branch `acp`
    pytest.skip("this agentls has no `agentls acp` (agentls.acp)", allow_module_level=True)

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
EXIT_TIMEOUT = 30.0  # generous: a 2-core CI machine under load


def scripted_config(tmp_path: Path, responses: list[dict[str, Any]]) -> Path:
    record = tmp_path / "model-calls.jsonl"
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": responses, "record": str(record)}))
    config = tmp_path / "config.toml"
    config.write_text('provider = "scripted"\n\n[providerOptions]\n'
                      f"script = {json.dumps(str(script))}\n")
    return config


@pytest.fixture
async def agent(tmp_path: Path, workspace: Path) -> AsyncIterator[AcpPipe]:
    config = scripted_config(tmp_path, [{"text": "Fine."}])
    pipe = await AcpPipe.start(acp_env(tmp_path / "home", config), cwd=workspace)
    try:
        yield pipe
    finally:
        await pipe.kill()
    assert not_acp(pipe.lines) == [], pipe.stderr[-3000:]


async def answered_in_order(pipe: AcpPipe, bad: bytes) -> dict[str, Any]:
    """Send `bad`, then a probe request; the error line the agent owes for
    `bad` comes before the probe's answer. Returns that error."""
    since = len(pipe.messages)
    await pipe.send_raw(bad)
    probe = await pipe.request("session/list", {})
    assert "result" in probe, probe
    index = pipe.messages.index(probe)
    owed = [m for m in pipe.messages[since:index] if "error" in m]
    assert len(owed) == 1, (bad[:200], pipe.messages[since:index + 1])
    return owed[0]


async def test_lines_that_are_not_json_rpc_get_errors_and_the_agent_goes_on(
        agent: AcpPipe) -> None:
    await agent.initialize()
    cases: list[tuple[bytes, int, Any]] = [
        (b"{not json\n", PARSE_ERROR, None),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "initialize"\n', PARSE_ERROR, None),
        (b"\xff\xfe\x00{}\n", PARSE_ERROR, None),  # not UTF-8
        (b"[1, 2, 3]\n", INVALID_REQUEST, None),
        (b"42\n", INVALID_REQUEST, None),
        (b'"session/new"\n', INVALID_REQUEST, None),
        (b"null\n", INVALID_REQUEST, None),  # the SDK alone reads null as end of input
        (b'{"jsonrpc": "2.0", "id": 7, "method": 3}\n', INVALID_REQUEST, 7),
        (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "session/list"}\n',
         INVALID_REQUEST, None),
        (b'{"jsonrpc": "2.0", "id": 8, "method": "session/list", "params": "x"}\n',
         INVALID_REQUEST, 8),
        (b'{"jsonrpc": "2.0"}\n', INVALID_REQUEST, None),
    ]
    for bad, code, ident in cases:
        error = await answered_in_order(agent, bad)
        assert error["error"]["code"] == code, (bad, error)
        assert error.get("id") == ident, (bad, error)
        assert error["error"]["message"], error
    # blank lines and a line split over writes are fine
    await agent.send_raw(b"\n\r\n")
    await agent.send_raw(b'{"jsonrpc": "2.0", "id": 9, ')
    await agent.send_raw(b'"method": "session/list", "params": {}}\n')
    found = await agent.wait_for(lambda m: m.get("id") == 9 and "method" not in m)
    assert "result" in found, found
    assert agent.proc.returncode is None


async def test_unknown_methods_and_bad_params_get_errors(agent: AcpPipe,
                                                         workspace: Path) -> None:
    await agent.initialize()
    unknown = await agent.request("agentls/notAMethod", {"x": 1})
    assert unknown["error"]["code"] == METHOD_NOT_FOUND, unknown
    extension = await agent.request("_agentls/unknown", {})
    assert extension["error"]["code"] == METHOD_NOT_FOUND, extension
    # an unknown notification is ignored: nothing is owed for it
    since = len(agent.messages)
    await agent.notify("agentls/notANotification", {"x": 1})
    await agent.notify("session/cancel", {"sessionId": "no-such-session"})
    probe = await agent.request("session/list", {})
    assert [m for m in agent.messages[since:] if m is not probe] == []

    bad_params = [
        ("session/new", {"cwd": "relative/path", "mcpServers": []}),
        ("session/new", {"cwd": str(workspace / "missing"), "mcpServers": []}),
        ("session/new", {"mcpServers": []}),
        ("session/prompt", {"sessionId": 5, "prompt": "text"}),
        ("session/prompt", {"sessionId": "no-such-session",
                            "prompt": [{"type": "text", "text": "hi"}]}),
        ("session/load", {"sessionId": "no-such-session", "cwd": str(workspace),
                          "mcpServers": []}),
        ("session/set_config_option", {"sessionId": "no-such-session", "configId": "model",
                                       "value": "x"}),
        ("authenticate", {"methodId": "api-key"}),
    ]
    for method, params in bad_params:
        answer = await agent.request(method, params)
        error = answer.get("error")
        assert error is not None, (method, params, answer)
        # an error that says what is wrong, never a handler crash (-32603)
        assert error["code"] != -32603, (method, params, answer)
        assert error["message"], answer
    session = await agent.new_session(workspace)
    assert session


async def _gone_mid_turn(tmp_path: Path, workspace: Path, responses: list[dict[str, Any]],
                         moment: str) -> AcpPipe:
    """Start a turn, wait for `moment` (a session/update kind or a request
    method), then drop the connection (both pipes) like a crashed client."""
    config = scripted_config(tmp_path, responses)
    pipe = await AcpPipe.start(acp_env(tmp_path / "home", config), cwd=workspace,
                               on_request=_never_answer)
    await pipe.initialize()
    session = await pipe.new_session(workspace)
    await pipe.send({"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {
        "sessionId": session, "prompt": [{"type": "text", "text": "go"}]}})
    await pipe.wait_for(lambda m: m.get("method") == moment or (
        m.get("method") == "session/update"
        and m["params"]["update"].get("sessionUpdate") == moment), timeout=60)
    pipe.drop()
    return pipe


async def _never_answer(request: dict[str, Any]) -> dict[str, Any]:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def test_a_client_gone_while_the_model_streams_ends_the_agent(
        tmp_path: Path, workspace: Path) -> None:
    chunks = [f"word{i} " for i in range(2000)]
    pipe = await _gone_mid_turn(tmp_path, workspace,
                                [{"text": "".join(chunks), "chunks": chunks, "delay": 0.01}],
                                "agent_message_chunk")
    code = await pipe.close(timeout=EXIT_TIMEOUT)
    assert code is not None, f"the agent hung after its client left: {pipe.stderr[-3000:]!r}"
    assert code == 0, pipe.stderr[-3000:]
    assert not_acp(pipe.lines) == []


async def test_a_client_gone_while_a_permission_question_waits_ends_the_agent(
        tmp_path: Path, workspace: Path) -> None:
    before = (workspace / "notes.md").read_bytes()
    pipe = await _gone_mid_turn(tmp_path, workspace, [
        {"tool_calls": [{"id": "c1", "name": "edit_file", "arguments": {
            "path": "notes.md", "edits": [{"old_string": "42", "new_string": "43"}]}}]},
        {"text": "Done."}], "session/request_permission")
    code = await pipe.close(timeout=EXIT_TIMEOUT)
    assert code is not None, f"the agent hung after its client left: {pipe.stderr[-3000:]!r}"
    assert code == 0, pipe.stderr[-3000:]
    assert (workspace / "notes.md").read_bytes() == before
    assert not_acp(pipe.lines) == []

