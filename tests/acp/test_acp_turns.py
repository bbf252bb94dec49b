"""`agentls acp` end to end: the agent as a subprocess, the ACP SDK's client
side as the editor (tests/acp/harness.py), the scripted provider as the
model. A turn that reads, edits and runs a command; Deny and a cancelled
question keep the file byte-identical; a protected path never offers
"always"; cancel mid-stream; load replays; list shows the session."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.acp.harness import (
    TIMEOUT,
    RecordingClient,
    acp_agent,
    agent_env,
    allow_once,
    cancelled,
    recorded,
    reject,
    scripted_settings,
    started,
    text,
)

pytestmark = pytest.mark.asyncio


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "a.py").write_text("x = 1\n")
    return folder


async def test_a_turn_reads_edits_and_runs_through_the_client(tmp_path: Path,
                                                              workspace: Path) -> None:
    settings, record = scripted_settings(tmp_path, [
        {"text": "Reading.", "tool_calls": [
            {"name": "read_file", "arguments": {"path": "a.py"}, "id": "c1"}]},
        {"text": "Editing.", "tool_calls": [
            {"name": "edit_file", "arguments": {"path": "a.py", "old_string": "x = 1",
                                                 "new_string": "x = 2"}, "id": "c2"}]},
        {"text": "Running.", "tool_calls": [
            {"name": "run_command", "arguments": {"argv": ["python3", "-c", "print(6 * 7)"]},
             "id": "c3"}]},
        {"text": "Done.", "chunks": ["Do", "ne."], "reasoning": "all good"},
    ])
    client = RecordingClient(answer=allow_once)
    async with acp_agent(client, tmp_path, agent_env(tmp_path, settings)) as (conn, _, log):
        init = await started(conn)
        assert init.protocol_version == 1
        assert init.agent_capabilities.load_session is True
        assert init.auth_methods == []
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = new.session_id
        assert [o.category for o in new.config_options] == ["model"]
        answer = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("fix a.py")),
                                        TIMEOUT)
        assert answer.stop_reason == "end_turn", log.read_text()
        await client.wait_for(lambda: "available_commands_update" in client.kinds(sid))

    # the model's text streamed as chunks, its reasoning as a thought
    assert client.text(sid).endswith("Done.")
    assert [u.content.text for u in client.of("agent_thought_chunk", sid)] == ["all good"]
    # every tool call announced, typed, and ended
    starts = {u.tool_call_id: u for u in client.of("tool_call", sid)}
    assert {k: (u.kind, u.status) for k, u in starts.items()} == {
        "c1": ("read", "pending"), "c2": ("edit", "pending"), "c3": ("execute", "pending")}
    assert starts["c1"].locations[0].path == str(workspace / "a.py")
    ends = {u.tool_call_id: u.status for u in client.of("tool_call_update", sid)
            if u.status in ("completed", "failed")}
    assert ends == {"c1": "completed", "c2": "completed", "c3": "completed"}
    diffs = [c for u in client.of("tool_call_update", sid) if u.tool_call_id == "c2"
             for c in u.content or [] if c.type == "diff"]
    assert [(d.path, d.old_text, d.new_text) for d in diffs] == [
        (str(workspace / "a.py"), "x = 1\n", "x = 2\n")]
    run_output = [c.content.text for u in client.of("tool_call_update", sid)
                  if u.tool_call_id == "c3" and u.status == "completed" for c in u.content]
    assert "42" in run_output[0]
    # the edit and the command were asked about, on their own tool calls; the read was not
    assert [(a.tool_call_id, [o.kind for o in a.options]) for a in client.asked] == [
        ("c2", ["allow_once", "allow_always", "reject_once"]),
        ("c3", ["allow_once", "reject_once"])]
    # the write went through the client's fs/write_text_file, reads through fs/read_text_file
    assert client.writes == [(str(workspace / "a.py"), "x = 2\n")]
    assert str(workspace / "a.py") in client.reads
    assert (workspace / "a.py").read_text() == "x = 2\n"
    # the first prompt names the session
    assert [u.title for u in client.of("session_info_update", sid)] == ["fix a.py"]
    # how full the context window is, after the turn
    [usage] = client.of("usage_update", sid)
    assert usage.size == 32768 and usage.used > 0  # the scripted provider's window
    # the model saw the file's text and the command's output
    sent = recorded(record)
    assert "x = 1" in str(sent[1]) and "42" in str(sent[3])


def unoffered(options: object) -> str | None:
    return "allow_everything_forever"  # an option id the agent never offered


@pytest.mark.parametrize("answer", [reject, cancelled, unoffered],
                         ids=["reject", "cancelled", "unknown-option"])
async def test_deny_keeps_the_file_byte_identical(tmp_path: Path, workspace: Path,
                                                  answer: object) -> None:
    original = b"x = 1\r\n# caf\xc3\xa9\n"
    (workspace / "a.py").write_bytes(original)
    settings, record = scripted_settings(tmp_path, [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.py",
                                                              "content": "evil\n"},
                         "id": "w1"}]},
        {"text": "OK, not changed."},
    ])
    client = RecordingClient(answer=answer)  # type: ignore[arg-type]
    async with acp_agent(client, tmp_path, agent_env(tmp_path, settings)) as (conn, _, log):
        await started(conn)
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        result = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("go")), TIMEOUT)
        assert result.stop_reason == "end_turn", log.read_text()
    assert [a.tool_call_id for a in client.asked] == ["w1"]
    assert client.writes == []
    assert (workspace / "a.py").read_bytes() == original
    ends = [u.status for u in client.of("tool_call_update", sid)
            if u.tool_call_id == "w1" and u.status in ("completed", "failed")]
    assert ends == ["failed"]
    assert "Nothing was written" in str(recorded(record)[1])


async def test_protected_and_secret_paths_never_offer_always(tmp_path: Path,
                                                             workspace: Path) -> None:
    (workspace / ".vscode").mkdir()
    (workspace / ".vscode" / "settings.json").write_text("{}\n")
    (workspace / ".env").write_text("TOKEN=abc\n")
    settings, _ = scripted_settings(tmp_path, [
        {"tool_calls": [{"name": "edit_file", "arguments": {
            "path": ".vscode/settings.json", "old_string": "{}", "new_string": "{\"a\": 1}"},
            "id": "p1"}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": ".env"}, "id": "s1"}]},
        {"text": "done"},
    ])
    client = RecordingClient(answer=allow_once)
    async with acp_agent(client, tmp_path, agent_env(tmp_path, settings)) as (conn, _, log):
        await started(conn)
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        result = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("go")), TIMEOUT)
        assert result.stop_reason == "end_turn", log.read_text()
    assert [a.tool_call_id for a in client.asked] == ["p1", "s1"]
    for asked in client.asked:
        assert [o.kind for o in asked.options] == ["allow_once", "reject_once"]
    assert (workspace / ".vscode" / "settings.json").read_text() == "{\"a\": 1}\n"


async def test_cancel_mid_stream_answers_cancelled(tmp_path: Path, workspace: Path) -> None:
    settings, _ = scripted_settings(tmp_path, [
        {"chunks": ["Thinking about it"], "stall": True},
        {"text": "second turn"},
    ])
    client = RecordingClient()
    async with acp_agent(client, tmp_path, agent_env(tmp_path, settings)) as (conn, _, log):
        await started(conn)
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text("go")))
        await client.wait_for(lambda: "Thinking" in client.text(sid))
        await conn.cancel(session_id=sid)
        result = await asyncio.wait_for(turn, TIMEOUT)
        assert result.stop_reason == "cancelled", log.read_text()
        # the session is usable again at once
        again = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("again")),
                                       TIMEOUT)
        assert again.stop_reason == "end_turn"
        assert client.text(sid).endswith("second turn")


async def test_load_replays_and_list_shows_the_session(tmp_path: Path, workspace: Path) -> None:
    settings, _ = scripted_settings(tmp_path, [
        {"text": "Reading.", "tool_calls": [
            {"name": "read_file", "arguments": {"path": "a.py"}, "id": "r1"}]},
        {"text": "It sets x."},
    ])
    env = agent_env(tmp_path, settings)
    first = RecordingClient()
    async with acp_agent(first, tmp_path, env) as (conn, _, log):
        await started(conn)
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        result = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("what is a.py")),
                                        TIMEOUT)
        assert result.stop_reason == "end_turn", log.read_text()
    # a new agent process, the same session store
    second = RecordingClient()
    async with acp_agent(second, tmp_path, env) as (conn, _, log):
        await started(conn)
        listed = await asyncio.wait_for(conn.list_sessions(cwd=str(workspace)), TIMEOUT)
        [info] = [s for s in listed.sessions if s.session_id == sid]
        assert info.cwd == str(workspace) and info.title and info.updated_at
        assert (await conn.list_sessions(cwd=str(tmp_path))).sessions == []
        await asyncio.wait_for(conn.load_session(cwd=str(workspace), session_id=sid,
                                                 mcp_servers=[]), TIMEOUT)
        kinds = second.kinds(sid)
        assert kinds[:3] == ["user_message_chunk", "agent_message_chunk", "tool_call"]
        assert second.of("user_message_chunk", sid)[0].content.text == "what is a.py"
        assert second.text(sid) == "Reading.It sets x."
        assert [u.status for u in second.of("tool_call_update", sid)] == ["completed"]
        with pytest.raises(Exception, match="no such session"):
            await conn.load_session(cwd=str(workspace), session_id="nope", mcp_servers=[])


async def test_a_commands_output_streams_while_it_runs(tmp_path: Path, workspace: Path) -> None:
    go = tmp_path / "go"
    script = ("import os, sys, time\n"
              "print('first line', flush=True)\n"
              "deadline = time.time() + 30\n"
              f"while not os.path.exists({str(go)!r}) and time.time() < deadline:\n"
              "    time.sleep(0.05)\n"
              "print('second line', flush=True)\n")
    settings, _ = scripted_settings(tmp_path, [
        {"tool_calls": [{"name": "run_command",
                         "arguments": {"argv": [sys.executable, "-c", script]},
                         "id": "r1"}]},
        {"text": "ran"},
    ])
    client = RecordingClient(answer=allow_once)

    def live() -> list[str]:
        return [c.content.text for u in client.of("tool_call_update")
                if u.tool_call_id == "r1" and u.status == "in_progress" for c in u.content]

    async with acp_agent(client, tmp_path, agent_env(tmp_path, settings)) as (conn, _, log):
        await started(conn)
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text("run it")))
        # the first line is shown while the command still waits for `go`
        await client.wait_for(lambda: any("first line" in t for t in live()))
        assert not any("second line" in t for t in live())
        go.write_text("")
        result = await asyncio.wait_for(turn, TIMEOUT)
        assert result.stop_reason == "end_turn", log.read_text()
    assert "first line\nsecond line" in live()[-1]


async def test_cancel_while_a_question_waits(tmp_path: Path, workspace: Path) -> None:
    """A client that never answers the question: session/cancel still ends
    the turn (cancelled), nothing is written."""
    settings, _ = scripted_settings(tmp_path, [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.py",
                                                              "content": "late\n"},
                         "id": "q1"}]},
        {"text": "after"},
    ])
    never = asyncio.Event()

    class Silent(RecordingClient):
        async def request_permission(self, options: Any, session_id: str, tool_call: Any,
                                     **kwargs: Any) -> Any:
            self.asked.append(tool_call.tool_call_id)  # type: ignore[arg-type]
            self._changed()
            await never.wait()  # the user walked away

    client = Silent()
    async with acp_agent(client, tmp_path, agent_env(tmp_path, settings)) as (conn, _, log):
        await started(conn)
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text("go")))
        await client.wait_for(lambda: bool(client.asked))
        await conn.cancel(session_id=sid)
        result = await asyncio.wait_for(turn, TIMEOUT)
        assert result.stop_reason == "cancelled", log.read_text()
    assert (workspace / "a.py").read_text() == "x = 1\n"
    assert client.writes == []


async def test_an_explained_end_is_a_turn_not_an_error(tmp_path: Path, workspace: Path) -> None:
    # The model answers nothing: agentls's explanation is the answer the
    # client shows, and the prompt ends end_turn (not a JSON-RPC error).
    settings, _ = scripted_settings(tmp_path, [{"text": ""}])
    client = RecordingClient()
    async with acp_agent(client, tmp_path, agent_env(tmp_path, settings)) as (conn, _, log):
        await started(conn)
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        result = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("go")),
                                        TIMEOUT)
        assert result.stop_reason == "end_turn", log.read_text()
        shown = client.text(sid)
        assert shown.count("The model ended its reply without an answer") == 1, shown
