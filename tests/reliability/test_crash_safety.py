"""Crash safety of sessions: kill -9 mid-turn, concurrent turns, torn WAL
writes, full disks.

- The server is SIGKILLed while a turn streams (after a tool round trip whose
  messages are final) or while an approval is pending; a new server on the
  same AGENTLS_STATE_DIR loads the session with every message that was
  final (what agentls/message announced), in order, no corrupt rows, and
  the session goes on; a tool call left without a result by the crash gets
  one, so providers that insist on tool results (OpenAI) accept the history.
- Two sessions' turns running at once never mix their messages.
- After a kill, the last WAL frame is torn (file cut mid-frame, or garbage
  appended): the store opens, keeps every complete transaction, passes
  `PRAGMA integrity_check`, and takes new writes.
- The disk fills up (a 1 MiB tmpfs when mounting is allowed, RLIMIT_FSIZE
  otherwise): the turn fails with a clear "disk is full / I/O error"
  message, the server keeps answering, and works again once there is room.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.http_backend import SSE_DONE, FakeBackend, openai_chunk, sse, sse_reply
from tests.reliability.harness import LspProcess, scripted_settings, wait_until

DB = "sessions.sqlite3"


# --------------------------------------------------------------------------- helpers


def final_messages(lsp: LspProcess, session_id: str) -> list[dict[str, Any]]:
    """What agentls/message announced as final for this session, in order."""
    return [p["message"] for p in lsp.notifications_of("agentls/message")
            if p["sessionId"] == session_id]


def deltas(lsp: LspProcess) -> str:
    return "".join(p["delta"] for p in lsp.notifications_of("agentls/messageDelta"))


def db_rows(state: Path) -> dict[str, list[tuple[int, str, dict[str, Any]]]]:
    """Every message row, straight from SQLite (read-only), checked for
    integrity: contiguous seq from 0, JSON that decodes to a message."""
    conn = sqlite3.connect(f"file:{state / DB}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute("SELECT session_id, seq, role, message FROM messages "
                            "ORDER BY session_id, seq").fetchall()
    finally:
        conn.close()
    sessions: dict[str, list[tuple[int, str, dict[str, Any]]]] = {}
    for sid, seq, role, raw in rows:
        message = json.loads(raw)
        assert message["role"] == role
        sessions.setdefault(sid, []).append((seq, role, message))
    for sid, messages in sessions.items():
        assert [seq for seq, _, _ in messages] == list(range(len(messages))), sid
    return sessions


def same_message(stored: dict[str, Any], announced: dict[str, Any]) -> bool:
    return (stored["role"] == announced["role"] and stored["content"] == announced["content"]
            and stored.get("toolResult") == announced.get("toolResult")
            and (stored.get("metadata") or {}).get("tool_calls")
            == (announced.get("metadata") or {}).get("tool_calls"))


def kill_mid_turn(lsp: LspProcess, prompt: str, *, until: Callable[[], bool],
                  what: str) -> tuple[str, list[dict[str, Any]]]:
    """Start a chat, wait for `until`, SIGKILL the server; the session id and
    the messages that were final when it died."""
    pending = lsp.request_async("agentls/chat", {"prompt": prompt})
    wait_until(until, what)
    announced = lsp.notifications_of("agentls/message")
    lsp.kill()
    assert not pending.done() or pending.exception(0) is not None  # never answered
    session_id = announced[0]["sessionId"]
    return session_id, [p["message"] for p in announced if p["sessionId"] == session_id]


# --------------------------------------------------------------------------- kill -9


def test_kill_9_mid_turn_keeps_every_final_message(tmp_path: Path, workspace: Path) -> None:
    state = tmp_path / "state"
    settings, _ = scripted_settings(tmp_path, "crash", [
        {"text": "Let me read the notes.",
         "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "notes.md"}}]},
        {"chunks": ["They say ", "42. "], "delay": 0.02,
         "tool_calls": [{"id": "c2", "name": "list_files", "arguments": {}}]},
        {"chunks": ["Now I am ", "writing the summary"], "stall": True},
    ])
    lsp = LspProcess.spawn(state_dir=state)
    lsp.initialize(workspace=workspace, settings=settings)
    session_id, announced = kill_mid_turn(
        lsp, "Summarise the notes.",
        until=lambda: len(lsp.notifications_of("agentls/message")) >= 5
        and "writing the summary" in deltas(lsp),
        what="five final messages and the stalled reply's text")
    assert [m["role"] for m in announced] == ["user", "assistant", "tool", "assistant", "tool"]

    rows = db_rows(state)[session_id]
    assert len(rows) == len(announced)
    assert all(same_message(m, a) for (_, _, m), a in zip(rows, announced, strict=True))

    after, _ = scripted_settings(tmp_path, "after", [{"text": "Recovered."}])
    with LspProcess.start(state_dir=state, workspace=workspace, settings=after) as again:
        stored = again.result("agentls/session", {"sessionId": session_id})
        assert len(stored["messages"]) == len(announced)
        assert all(same_message(m, a) for m, a in zip(stored["messages"], announced,
                                                      strict=True))
        listed = again.result("agentls/sessions", {})
        assert [s["sessionId"] for s in listed["sessions"]] == [session_id]
        assert listed["sessions"][0]["title"] == "Summarise the notes."
        follow = again.result("agentls/chat", {"prompt": "Go on.", "sessionId": session_id})
        assert follow["status"] == "completed", follow
        assert follow["messages"][-1]["content"] == "Recovered."
    assert [m["role"] for _, _, m in db_rows(state)[session_id]] == [
        "user", "assistant", "tool", "assistant", "tool", "user", "assistant"]


def test_kill_9_while_an_approval_is_pending_leaves_a_history_providers_accept(
    tmp_path: Path, workspace: Path
) -> None:
    """The editor is closed while the user is being asked about a command:
    the assistant's tool call has no result. The next turn must still send
    the model a valid history (OpenAI rejects a tool call without a tool
    message answering it)."""
    state = tmp_path / "state"
    settings, _ = scripted_settings(tmp_path, "approval", [
        {"text": "Running the tests.",
         "tool_calls": [{"id": "call_run", "name": "run_command",
                         "arguments": {"argv": ["python", "-c", "print(1)"]}}]},
    ])
    lsp = LspProcess.spawn(state_dir=state)
    asked = threading.Event()

    def never_answers(method: str, params: Any) -> Any:
        if method == "window/showMessageRequest":
            asked.set()
            time.sleep(60)  # the user is thinking; the process dies first
        return None

    lsp.responder = never_answers
    lsp.initialize(workspace=workspace, settings=settings,
                   capabilities={"window": {"showMessage": {}}})
    session_id, announced = kill_mid_turn(lsp, "Run the tests.", until=asked.is_set,
                                          what="the approval request")
    assert [m["role"] for m in announced] == ["user", "assistant"]

    with FakeBackend() as fake:
        fake.script("POST", "/v1/chat/completions", sse_reply([
            sse(openai_chunk("Back again.")), sse(openai_chunk(finish_reason="stop")),
            SSE_DONE]))
        openai = {"provider": "openai", "baseUrl": fake.url + "/v1", "model": "m"}
        with LspProcess.start(state_dir=state, workspace=workspace, settings=openai,
                              env={"OPENAI_API_KEY": "sk-test-crash"}) as again:
            result = again.result("agentls/chat", {"prompt": "Did it run?",
                                                   "sessionId": session_id})
            assert result["status"] == "completed", result
        sent = fake.requests_to("/v1/chat/completions")[0].json["messages"]
    calls = [c["id"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert calls == ["call_run"] and answered == ["call_run"], sent
    tool = next(m for m in sent if m["role"] == "tool")
    assert "interrupted" in tool["content"].lower() or "cancel" in tool["content"].lower()


# --------------------------------------------------------------------------- concurrency


def test_concurrent_turns_in_two_sessions_do_not_interleave(
    tmp_path: Path, workspace: Path
) -> None:
    """Two sessions' turns run at once (twice). The scripted provider hands
    out replies in order to whichever turn asks first, so every reply calls
    a tool (each with other arguments: identical calls would end a turn
    sooner) and session.maxIterations = 3 ends each turn after three rounds:
    the shape of each session is then fixed (user, then three assistant/tool
    pairs, then agentls's explanation), whichever session got which reply."""
    state = tmp_path / "state"
    rounds = 3
    responses = [{"chunks": [f"R{n} ", "looks ", "around."], "delay": 0.01,
                  "tool_calls": [{"id": f"t{n}", "name": "list_files",
                                  "arguments": {"glob": f"*{n}"}}]}
                 for n in range(2 * 2 * rounds)]
    settings, _ = scripted_settings(tmp_path, "pair", responses)
    settings["session"] = {"maxIterations": rounds}
    with LspProcess.start(state_dir=state, workspace=workspace, settings=settings) as lsp:
        created = [lsp.result("workspace/executeCommand",
                              {"command": "agentls.newSession", "arguments": []})["sessionId"]
                   for _ in range(2)]
        for turn in range(2):
            futures = [lsp.request_async("agentls/chat",
                                         {"prompt": f"{sid} turn {turn}", "sessionId": sid})
                       for sid in created]
            results = [lsp.wait(f, 30, "a concurrent chat")["result"] for f in futures]
            assert all(r["error"]["code"] == "max_iterations" for r in results), results
        rows = db_rows(state)
        texts: list[str] = []
        per_turn = 2 + 2 * rounds
        for sid in created:
            stored = lsp.result("agentls/session", {"sessionId": sid})["messages"]
            assert [m["role"] for m in stored] == (
                ["user"] + ["assistant", "tool"] * rounds + ["assistant"]) * 2
            explanations = [m for m in stored
                            if (m.get("metadata") or {}).get("source") == "agentls"]
            assert [m["metadata"]["explanation"] for m in explanations] == ["max_iterations"] * 2
            assert [m["content"] for m in stored if m["role"] == "user"] == [
                f"{sid} turn 0", f"{sid} turn 1"]
            for index, message in enumerate(stored):  # each result answers its own call
                if message["role"] == "tool":
                    call = stored[index - 1]["metadata"]["tool_calls"][0]["id"]
                    assert message["metadata"]["tool_call_id"] == call
            assert [m["content"] for _, _, m in rows[sid]] == [m["content"] for m in stored]
            announced = [p for p in lsp.notifications_of("agentls/message")
                         if p["sessionId"] == sid]
            assert [p["index"] for p in announced] == list(range(2 * per_turn))
            assert [p["message"]["content"] for p in announced] == [m["content"] for m in stored]
            texts += [m["content"] for m in stored
                      if m["role"] == "assistant" and m not in explanations]
        # Every scripted reply went to exactly one session, whole.
        assert sorted(texts) == sorted("".join(r["chunks"]) for r in responses)


# --------------------------------------------------------------------------- torn WAL


def _kill_after_turns(tmp_path: Path, workspace: Path, state: Path, turns: int
                      ) -> tuple[str, list[dict[str, Any]]]:
    settings, _ = scripted_settings(tmp_path, f"wal{turns}",
                                    [{"text": f"answer {n}"} for n in range(turns)])
    lsp = LspProcess.spawn(state_dir=state)
    lsp.initialize(workspace=workspace, settings=settings)
    session_id = None
    for n in range(turns):
        params: dict[str, Any] = {"prompt": f"question {n}"}
        if session_id:
            params["sessionId"] = session_id
        session_id = lsp.result("agentls/chat", params)["sessionId"]
    assert session_id is not None
    announced = final_messages(lsp, session_id)
    lsp.kill()  # no checkpoint: the turns live in the -wal file
    return session_id, announced


@pytest.mark.parametrize("tear", ["cut mid-frame", "garbage appended", "cut header"])
def test_torn_wal_write_after_a_kill(tear: str, tmp_path: Path, workspace: Path) -> None:
    state = tmp_path / "state"
    session_id, announced = _kill_after_turns(tmp_path, workspace, state, turns=3)
    wal = state / f"{DB}-wal"
    size = wal.stat().st_size
    assert size > 32 + 4096, "the turns should still be in the WAL"
    with open(wal, "r+b") as fh:
        if tear == "cut mid-frame":
            fh.truncate(size - 2048)  # the last frame loses its second half
        elif tear == "garbage appended":
            fh.seek(0, os.SEEK_END)
            fh.write(os.urandom(3000))  # half a frame of noise
        else:
            fh.truncate(20)  # even the WAL header is torn
    (state / f"{DB}-shm").unlink(missing_ok=True)  # as after a reboot

    after, _ = scripted_settings(tmp_path, "after-wal", [{"text": "still here"}])
    with LspProcess.start(state_dir=state, workspace=workspace, settings=after) as lsp:
        listed = lsp.result("agentls/sessions", {})["sessions"]
        if tear == "cut header":
            # Nothing of the WAL is usable; the main file alone is consistent.
            kept: list[dict[str, Any]] = []
            if listed:
                kept = lsp.result("agentls/session", {"sessionId": session_id})["messages"]
        else:
            assert [s["sessionId"] for s in listed] == [session_id]
            kept = lsp.result("agentls/session", {"sessionId": session_id})["messages"]
            assert len(kept) >= len(announced) - 2  # at most the torn commit is lost
        # Whatever survived is an exact prefix of what was said.
        assert all(same_message(m, a) for m, a in zip(kept, announced, strict=False))
        assert len(kept) <= len(announced)
        fresh = lsp.result("agentls/chat", {"prompt": "new question"})
        assert fresh["status"] == "completed"
        assert lsp.result("agentls/session", {"sessionId": fresh["sessionId"]})["messages"]
    db_rows(state)  # integrity_check and row checks after the new writes


# --------------------------------------------------------------------------- full disk


@contextlib.contextmanager
def tiny_filesystem(path: Path, size: str = "1m") -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'not permitted'}); "
                    "the RLIMIT_FSIZE variant covers the full disk")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(folder: Path, leave: int) -> Path:
    """A filler file taking all but about `leave` bytes of the filesystem."""
    stats = os.statvfs(folder)
    free = stats.f_bavail * stats.f_frsize
    filler = folder / "filler.bin"
    with open(filler, "wb") as fh:
        fh.write(b"\0" * max(0, free - leave))
    return filler


def assert_disk_error_then_recovery(lsp: LspProcess, make_room: Callable[[], None],
                                    words: tuple[str, ...]) -> None:
    small = lsp.result("agentls/chat", {"prompt": "a small question"})
    assert small["status"] == "completed", small
    session_id = small["sessionId"]
    big = "a huge paste " * 40_000  # ~520 KB: does not fit
    answer = lsp.request("agentls/chat", {"prompt": big, "sessionId": session_id}, timeout=30)
    if "error" in answer:
        message = answer["error"]["message"]
        assert answer["error"]["code"] in (-32603, -32602), answer
    else:
        assert answer["result"]["status"] == "failed", str(answer)[:500]
        message = answer["result"]["error"]["message"]
    assert any(word in message.lower() for word in words), message
    assert "session store" in message.lower()
    shown = wait_until(lambda: [m for m in lsp.shown_messages() if "session store" in m],
                       "the disk-full notice")
    assert len(shown) == 1
    # The server keeps answering; the turn is over (not left "running"); the
    # session as it was is intact.
    status = lsp.result("agentls/status", {})
    mine = [s for s in status["sessions"] if s["session_id"] == session_id]
    assert mine and mine[0]["status"] == "failed", mine
    stored = lsp.result("agentls/session", {"sessionId": session_id})
    assert [m["role"] for m in stored["messages"]][:2] == ["user", "assistant"]
    assert all(m["content"] != big for m in stored["messages"])
    # Room again: the same session takes the next turn.
    make_room()
    again = lsp.result("agentls/chat", {"prompt": "and now?", "sessionId": session_id})
    assert again["status"] == "completed", again
    stored = lsp.result("agentls/session", {"sessionId": session_id})
    assert stored["messages"][-1]["content"] == again["messages"][-1]["content"]


def test_full_disk_tmpfs(tmp_path: Path, workspace: Path) -> None:
    with tiny_filesystem(tmp_path / "tiny") as tiny:
        state = tiny / "state"
        settings, _ = scripted_settings(tmp_path, "disk", [{"text": "ok"}], loop=True)
        settings["session"] = {"maxPromptChars": 1_000_000}  # the paste must reach the disk
        with LspProcess.start(state_dir=state, workspace=workspace, settings=settings) as lsp:
            lsp.result("agentls/sessions", {})  # the database exists
            filler = fill(tiny, leave=96 * 1024)
            assert_disk_error_then_recovery(lsp, lambda: filler.unlink(),
                                            ("disk", "full", "i/o"))
        db_rows(state)


def test_full_disk_file_size_limit(tmp_path: Path, workspace: Path) -> None:
    """RLIMIT_FSIZE on the server: writes past it fail (EFBIG), as on a full
    disk, without mounting anything. SIGXFSZ is ignored in the child so the
    write fails instead of killing the process; the soft limit is raised
    again from outside (prlimit) to 'free space'."""
    state = tmp_path / "state"
    limit = 256 * 1024

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    settings, _ = scripted_settings(tmp_path, "fsize", [{"text": "ok"}], loop=True)
    settings["session"] = {"maxPromptChars": 1_000_000}  # the paste must reach the disk
    with LspProcess.start(state_dir=state, workspace=workspace, settings=settings,
                          preexec_fn=limited) as lsp:
        def make_room() -> None:
            resource.prlimit(lsp.pid, resource.RLIMIT_FSIZE,
                             (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

        assert_disk_error_then_recovery(lsp, make_room, ("disk", "full", "i/o", "large"))
    db_rows(state)
