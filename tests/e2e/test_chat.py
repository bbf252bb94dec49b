"""Agent turns over real LSP: the server runs as a subprocess (pytest-lsp's
client), with the scripted provider (its `record` file shows what the model
was sent) or the openai provider against the loopback fake backend (real
wire format).

Covered: a multi-turn chat with streamed agentls/messageDelta then
agentls/message notifications, summed usage and workDone progress; a
read_file tool call answered from the OPEN buffer, not the disk; `@file:`
mentions and the selection reaching the model; persistence across a server
restart, with a graceful shutdown that finishes the running turn;
$/cancelRequest and agentls.cancel leaving a valid session; request errors;
agentls/deleteSession, agentls.newSession, agentls/uiSchema; provider errors
as failed turns with one window/showMessage.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient
from pytest_lsp.client import make_test_lsp_client

from tests.e2e.helpers import initialized, plain, server_env
from tests.fakes.http_backend import (
    SSE_DONE,
    FakeBackend,
    error_reply,
    openai_chunk,
    openai_usage_chunk,
    sse,
    sse_reply,
)

TIMEOUT = 20.0  # every request and wait in these tests is bounded by this


@dataclass
class Session:
    """One server process and what it sent us."""

    client: LanguageClient
    workspace: Path
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def deltas(self) -> list[dict[str, Any]]:
        return [p for kind, p in self.events if kind == "delta"]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [p for kind, p in self.events if kind == "message"]

    async def request(self, method: str, params: Any = None, *, msg_id: str | None = None
                      ) -> Any:
        result = await asyncio.wait_for(
            self.client.protocol.send_request_async(method, params, msg_id=msg_id), TIMEOUT)
        return plain(result)

    async def chat(self, **params: Any) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("agentls/chat", params)
        return result

    def open(self, name: str, text: str, version: int = 1) -> str:
        uri = (self.workspace / name).as_uri()
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python",
                                                 version=version, text=text)))
        return uri


async def wait_until(predicate: Any, what: str) -> None:
    for _ in range(int(TIMEOUT / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@asynccontextmanager
async def agentls(
    workspace: Path, state_dir: Path, settings: dict[str, Any],
    configuration: dict[str, Any] | None = None, **env: str
) -> AsyncIterator[Session]:
    """A server on `workspace`; `settings` go in initializationOptions,
    `configuration` (when given) is served as workspace/configuration."""
    client = make_test_lsp_client()
    session = Session(client, workspace)
    if configuration is not None:
        client.set_configuration(configuration, section="agentls")

    @client.feature("agentls/messageDelta")
    def on_delta(params: Any) -> None:
        session.events.append(("delta", plain(params)))

    @client.feature("agentls/message")
    def on_message(params: Any) -> None:
        session.events.append(("message", plain(params)))

    caps = types.ClientCapabilities(
        window=types.WindowClientCapabilities(
            work_done_progress=True,
            show_message=types.ShowMessageRequestClientCapabilities()),
        workspace=types.WorkspaceClientCapabilities(configuration=configuration is not None))
    async with initialized(client, workspace, settings, caps, timeout=TIMEOUT,
                           env=server_env(AGENTLS_STATE_DIR=str(state_dir), **env)):
        yield session


def scripted(tmp_path: Path, name: str, responses: list[dict[str, Any]]
             ) -> tuple[dict[str, Any], Path]:
    """Settings for the scripted provider and the file it records requests in."""
    record = tmp_path / f"{name}.jsonl"
    script = tmp_path / f"{name}.json"
    script.write_text(json.dumps({"responses": responses, "record": str(record)}))
    return {"provider": "scripted", "providerOptions": {"script": str(script)}}, record


def recorded(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('on disk')\n")
    (root / "notes.md").write_text("the notes say 42\n")
    return root


# --------------------------------------------------------------------------- turns


async def test_multi_turn_chat_streams_notifications_and_sums_usage(
    tmp_path: Path, workspace: Path
) -> None:
    settings, record = scripted(tmp_path, "multi", [
        {"text": "Let me look.", "usage": {"input_tokens": 10, "output_tokens": 2},
         "tool_calls": [{"id": "call_1", "name": "list_files", "arguments": {"glob": "*.py"}}]},
        {"text": "There is one Python file.", "usage": {"input_tokens": 20, "output_tokens": 3}},
        {"chunks": ["Second ", "answer."], "usage": {"input_tokens": 7, "output_tokens": 1}},
    ])
    async with agentls(workspace, tmp_path / "state", settings) as s:
        s.client.progress_reports.setdefault("tok-1", [])
        first = await s.chat(prompt="Which files are there?", workDoneToken="tok-1")
        sid = first["sessionId"]
        assert first["status"] == "completed" and "error" not in first
        assert first["usage"] == {"input_tokens": 30, "output_tokens": 5, "total_tokens": 35}
        roles = [m["role"] for m in first["messages"]]
        assert roles == ["user", "assistant", "tool", "assistant"]
        assert first["messages"][1]["metadata"]["tool_calls"][0]["tool"] == "list_files"
        assert first["messages"][2]["toolResult"]["output"]["files"] == ["src/app.py"]
        assert first["messages"][3]["content"] == "There is one Python file."

        # Every final message was notified, in order, with its index; the
        # streamed text of a message arrived as deltas before it.
        await wait_until(lambda: len(s.messages) == 4, "4 agentls/message notifications")
        assert [m["message"] for m in s.messages] == first["messages"]
        assert {m["sessionId"] for m in s.messages} == {sid}
        assert [m["index"] for m in s.messages] == [0, 1, 2, 3]
        for index, message in ((1, "Let me look."), (3, "There is one Python file.")):
            deltas = [d for d in s.deltas if d["index"] == index]
            assert "".join(d["delta"] for d in deltas) == message
            assert all(d["kind"] == "text" and d["sessionId"] == sid for d in deltas)
            final_at = s.events.index(("message", s.messages[index]))
            assert all(s.events.index(("delta", d)) < final_at for d in deltas)

        # workDone progress on the client's token
        reports = s.client.progress_reports["tok-1"]
        assert isinstance(reports[0], types.WorkDoneProgressBegin)
        assert isinstance(reports[-1], types.WorkDoneProgressEnd)
        texts = [r.message for r in reports if isinstance(r, types.WorkDoneProgressReport)]
        assert texts == ["Calling model", "Running list_files", "Calling model"]

        second = await s.chat(prompt="And now?", sessionId=sid)
        assert second["sessionId"] == sid and second["status"] == "completed"
        assert [m["role"] for m in second["messages"]] == ["user", "assistant"]
        assert second["messages"][1]["content"] == "Second answer."
        assert second["usage"] == {"input_tokens": 7, "output_tokens": 1, "total_tokens": 8}
        assert [d["delta"] for d in s.deltas if d["index"] == 5] == ["Second ", "answer."]

        status = await s.request("agentls/status", {})
        mine = [x for x in status["sessions"] if x["session_id"] == sid]
        assert mine and mine[0]["status"] == "completed" and mine[0]["tool_invocations"] == 1

    calls = recorded(record)
    assert len(calls) == 3
    assert calls[0]["messages"][0]["role"] == "system"
    assert {"read_file", "list_files", "search_text"} <= set(calls[0]["tools"])
    # the second turn sends the whole conversation
    assert [m["role"] for m in calls[2]["messages"]] == [
        "system", "user", "assistant", "tool", "assistant", "user"]


async def test_read_file_answers_from_the_open_buffer_over_the_openai_wire(
    tmp_path: Path, workspace: Path
) -> None:
    with FakeBackend() as backend:
        call = {"index": 0, "id": "call_r1", "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": "src/app.py"})}}
        backend.script("POST", "/v1/chat/completions",
                       sse_reply([sse(openai_chunk(tool_calls=[call])),
                                  sse(openai_chunk(finish_reason="tool_calls")),
                                  sse(openai_usage_chunk(100, 10)), SSE_DONE]),
                       sse_reply([sse(openai_chunk("The buffer ")),
                                  sse(openai_chunk("prints unsaved.")),
                                  sse(openai_chunk(finish_reason="stop")),
                                  sse(openai_usage_chunk(150, 5)), SSE_DONE]))
        settings = {"provider": "openai", "baseUrl": backend.url + "/v1", "model": "test-model"}
        async with agentls(workspace, tmp_path / "state", settings) as s:
            s.open("src/app.py", "print('UNSAVED buffer')\n")
            result = await s.chat(prompt="What does src/app.py print?")
            assert result["status"] == "completed", result
            tool = result["messages"][2]
            assert tool["role"] == "tool"
            assert tool["toolResult"]["output"]["content"] == "print('UNSAVED buffer')\n"
            assert tool["toolResult"]["output"]["source"] == "buffer"
            assert result["messages"][3]["content"] == "The buffer prints unsaved."
            assert result["usage"] == {"input_tokens": 250, "output_tokens": 15,
                                       "total_tokens": 265}
            await wait_until(lambda: len(s.messages) == 4, "message notifications")
            assert "".join(d["delta"] for d in s.deltas) == "The buffer prints unsaved."

        sent = [r.json for r in backend.requests_to("/v1/chat/completions")]
        assert len(sent) == 2
        assert sent[0]["stream"] is True and sent[0]["model"] == "test-model"
        assert sent[0]["messages"][0]["role"] == "system"
        assert {t["function"]["name"] for t in sent[0]["tools"]} >= {
            "read_file", "list_files", "search_text"}
        tool_message = sent[1]["messages"][-1]
        assert tool_message == {"role": "tool", "tool_call_id": "call_r1",
                                "content": "print('UNSAVED buffer')\n"}
        assert sent[1]["messages"][-2]["tool_calls"][0]["function"]["name"] == "read_file"


async def test_mentions_and_selection_are_attached_for_the_model(
    tmp_path: Path, workspace: Path
) -> None:
    settings, record = scripted(tmp_path, "mentions", [{"text": "ok"}])
    async with agentls(workspace, tmp_path / "state", settings) as s:
        uri = s.open("src/app.py", "line one\nline two\nline three\n")
        selection = {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 8}}
        result = await s.chat(prompt="Compare with @file:notes.md and @file:../outside.txt",
                              context={"uri": uri, "range": selection})
        assert result["status"] == "completed"
        user = result["messages"][0]
        assert user["metadata"]["prompt"] == (
            "Compare with @file:notes.md and @file:../outside.txt")
        # The footer names only what was attached: the outside file was refused.
        assert user["metadata"]["mentions"] == ["notes.md"]
    sent = recorded(record)[0]["messages"][-1]
    assert sent["role"] == "user"
    content = sent["content"]
    assert content.startswith("Compare with `notes.md` and `../outside.txt`")
    assert '<selection file="src/app.py" lines="2-2">\nline two\n</selection>' in content
    assert '<file path="notes.md">\nthe notes say 42\n\n</file>' in content
    assert "outside the workspace" in content


# --------------------------------------------------------------------------- persistence


async def test_sessions_survive_a_restart_and_shutdown_finishes_the_running_turn(
    tmp_path: Path, workspace: Path
) -> None:
    state = tmp_path / "state"
    settings, _ = scripted(tmp_path, "before", [
        {"text": "First answer."},
        {"chunks": ["Half ", "an answer"], "stall": True},
    ])
    async with agentls(workspace, state, settings) as s:
        first = await s.chat(prompt="Remember the number 7.\nSecond line.")
        sid = first["sessionId"]
        running = asyncio.ensure_future(s.chat(prompt="Now think hard.", sessionId=sid))
        await wait_until(lambda: any(d["delta"] == "an answer" for d in s.deltas),
                         "the stalled turn's deltas")
        # leaving the block shuts the server down while the turn still runs
    result = await asyncio.wait_for(running, TIMEOUT)
    assert result["status"] == "cancelled"
    assert result["messages"][-1]["content"] == "Half an answer"

    settings, record = scripted(tmp_path, "after", [{"text": "It was 7."}])
    async with agentls(workspace, state, settings) as s:
        listed = await s.request("agentls/sessions", {})
        entry = next(e for e in listed["sessions"] if e["sessionId"] == sid)
        assert entry["title"] == "Remember the number 7."
        assert entry["updatedAt"].endswith("Z")
        assert entry["status"]["status"] == "cancelled"
        stored = await s.request("agentls/session", {"sessionId": sid})
        assert stored["session_id"] == sid
        contents = [(m["role"], m["content"]) for m in stored["messages"]]
        assert contents == [("user", "Remember the number 7.\nSecond line."),
                            ("assistant", "First answer."),
                            ("user", "Now think hard."),
                            ("assistant", "Half an answer")]
        assert stored["messages"][3]["metadata"]["incomplete"] is True

        follow_up = await s.chat(prompt="What was the number?", sessionId=sid)
        assert follow_up["status"] == "completed"
        assert follow_up["messages"][-1]["content"] == "It was 7."
    seen = recorded(record)[0]["messages"]
    assert [(m["role"], m["content"]) for m in seen[1:]] == [
        *contents, ("user", "What was the number?")]


# --------------------------------------------------------------------------- cancellation


async def test_cancel_request_and_cancel_command_leave_a_valid_session(
    tmp_path: Path, workspace: Path
) -> None:
    settings, record = scripted(tmp_path, "cancel", [
        {"chunks": ["thinking ", "slowly"], "stall": True},
        {"text": "Fresh answer."},
        {"text": "Reading.", "stall": True},
    ])
    async with agentls(workspace, tmp_path / "state", settings) as s:
        pending = asyncio.ensure_future(
            s.request("agentls/chat", {"prompt": "Take your time."}, msg_id="chat-1"))
        await wait_until(lambda: any(d["delta"] == "slowly" for d in s.deltas), "deltas")
        s.client.protocol.notify("$/cancelRequest", types.CancelParams(id="chat-1"))
        cancelled = await asyncio.wait_for(pending, 5)
        assert cancelled["status"] == "cancelled"
        assert cancelled["error"]["code"] == "cancelled"
        sid = cancelled["sessionId"]

        after = await s.chat(prompt="Try again.", sessionId=sid)
        assert after["status"] == "completed"
        assert after["messages"][-1]["content"] == "Fresh answer."

        # agentls.cancel (the command editors bind to a key)
        third = asyncio.ensure_future(s.chat(prompt="Read something.", sessionId=sid))
        await wait_until(lambda: any(d["delta"] == "Reading." for d in s.deltas), "deltas")
        with pytest.raises(JsonRpcException) as busy:
            await s.chat(prompt="Meanwhile?", sessionId=sid)
        assert busy.value.code == -32602 and "already has a turn running" in str(busy.value)
        answer = await s.request("workspace/executeCommand", types.ExecuteCommandParams(
            command="agentls.cancel", arguments=[sid]))
        assert answer == {"cancelled": [sid]}
        assert (await asyncio.wait_for(third, 5))["status"] == "cancelled"

        stored = await s.request("agentls/session", {"sessionId": sid})
        assert [m["role"] for m in stored["messages"]] == [
            "user", "assistant", "user", "assistant", "user", "assistant"]
        assert stored["messages"][1]["metadata"]["cancelled"] is True
    # the turn after the cancel sent the model the cancelled exchange, complete
    assert [m["role"] for m in recorded(record)[1]["messages"]] == [
        "system", "user", "assistant", "user"]


async def test_request_errors_are_clear(tmp_path: Path, workspace: Path) -> None:
    settings, _ = scripted(tmp_path, "errors", [])
    async with agentls(workspace, tmp_path / "state", settings) as s:
        with pytest.raises(JsonRpcException) as unknown:
            await s.chat(prompt="hi", sessionId="no-such-session")
        assert unknown.value.code == -32602
        assert "Unknown sessionId 'no-such-session'" in str(unknown.value)
        for bad in ({}, {"prompt": ""}, {"prompt": "x", "context": {"range": {"start": 1}}}):
            with pytest.raises(JsonRpcException) as invalid:
                await s.request("agentls/chat", bad)
            assert invalid.value.code == -32602
        with pytest.raises(JsonRpcException) as missing:
            await s.request("agentls/session", {"sessionId": "nope"})
        assert missing.value.code == -32602


# --------------------------------------------------------------------------- other requests


async def test_delete_session_new_session_and_ui_schema(tmp_path: Path, workspace: Path) -> None:
    settings, _ = scripted(tmp_path, "misc", [{"text": "one"}])
    async with agentls(workspace, tmp_path / "state", settings) as s:
        created = await s.request("workspace/executeCommand", types.ExecuteCommandParams(
            command="agentls.newSession", arguments=[]))
        sid = created["sessionId"]
        via_command = await s.request("workspace/executeCommand", types.ExecuteCommandParams(
            command="agentls.chat", arguments=[{"prompt": "hello", "sessionId": sid}]))
        assert via_command["sessionId"] == sid and via_command["status"] == "completed"
        listed = await s.request("agentls/sessions", {})
        assert [e["sessionId"] for e in listed["sessions"]] == [sid]

        assert await s.request("agentls/deleteSession", {"sessionId": sid}) == {
            "sessionId": sid, "deleted": True}
        assert (await s.request("agentls/sessions", {}))["sessions"] == []
        with pytest.raises(JsonRpcException) as gone:
            await s.request("agentls/session", {"sessionId": sid})
        assert gone.value.code == -32602
        with pytest.raises(JsonRpcException):
            await s.request("agentls/deleteSession", {"sessionId": sid})

        schema = await s.request("agentls/uiSchema", {})
        assert isinstance(schema, list)
        assert all(isinstance(e, dict) and e["ui_type"] and e["plugin"] for e in schema)
        assert {"ui_type": "message_footer", "data": "metadata.mentions",
                "template": "Attached: {{data}}", "plugin": "mentions"} in schema


# --------------------------------------------------------------------------- settings


async def test_a_settings_change_repoints_turns_at_the_new_provider_and_limits(
    tmp_path: Path, workspace: Path
) -> None:
    before, record_before = scripted(tmp_path, "config-a", [{"text": "from A"}])
    after, record_after = scripted(tmp_path, "config-b", [
        {"text": "looking", "tool_calls": [{"id": "c1", "name": "list_files", "arguments": {}}]},
    ])
    async with agentls(workspace, tmp_path / "state", {}, configuration=before) as s:
        # workspace/configuration is fetched after `initialized`: wait for it
        for _ in range(200):
            if (await s.request("agentls/status", {}))["provider"]["id"] == "scripted":
                break
            await asyncio.sleep(0.02)
        first = await s.chat(prompt="one")
        assert first["messages"][-1]["content"] == "from A"
        changed = {**after, "session": {"maxIterations": 1}}
        s.client.set_configuration(changed, section="agentls")
        # Pushed in the notification too, so the server has it before it
        # handles the next request (it also re-reads workspace/configuration).
        s.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"agentls": changed}))
        second = await s.chat(prompt="two", sessionId=first["sessionId"])
        assert second["status"] == "failed", second
        assert second["error"]["code"] == "max_iterations"
        assert "session.maxIterations = 1" in second["error"]["message"]
    assert len(recorded(record_before)) == 1 and len(recorded(record_after)) == 1


# --------------------------------------------------------------------------- provider errors


async def test_provider_errors_fail_the_turn_and_are_shown_once(
    tmp_path: Path, workspace: Path
) -> None:
    with FakeBackend() as backend:
        backend.script("POST", "/v1/chat/completions",
                       error_reply(401, "Incorrect API key provided", code="invalid_api_key"))
        settings = {"provider": "openai", "baseUrl": backend.url + "/v1", "model": "m"}
        async with agentls(workspace, tmp_path / "state", settings,
                           OPENAI_API_KEY="sk-test-not-real") as s:
            first = await s.chat(prompt="hello")
            second = await s.chat(prompt="hello again", sessionId=first["sessionId"])
            for result in (first, second):
                assert result["status"] == "failed"
                assert result["error"]["code"] == "auth"
                assert "OPENAI_API_KEY" in result["error"]["message"]
                assert "sk-test-not-real" not in json.dumps(result)
            # the session is still usable: both prompts are stored
            stored = await s.request("agentls/session", {"sessionId": first["sessionId"]})
            assert [m["content"] for m in stored["messages"]] == ["hello", "hello again"]
            # A turn's error is shown before its answer is sent, and two more
            # answers came since: a second showMessage would be here.
            shown = [m for m in s.client.messages if "auth" in m.message.lower()
                     or "API key" in m.message]
            assert len(shown) == 1 and shown[0].type == types.MessageType.Error


async def test_unreachable_provider_fails_the_turn(tmp_path: Path, workspace: Path) -> None:
    with FakeBackend() as backend:
        url = backend.url  # a port that was just free: nothing listens after stop()
    settings = {"provider": "openai", "baseUrl": url + "/v1", "model": "m",
                "providerOptions": {"maxAttempts": 1}}
    async with agentls(workspace, tmp_path / "state", settings) as s:
        result = await s.chat(prompt="anyone there?")
        assert result["status"] == "failed" and result["error"]["code"] == "connection"
        await wait_until(lambda: s.client.messages, "the showMessage")
        assert "baseUrl" in s.client.messages[0].message
