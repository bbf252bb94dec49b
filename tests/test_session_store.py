"""Tests of agentls.core.sessions.store: SQLite persistence of sessions."""

from __future__ import annotations

import logging
import queue
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentls.core.sessions.errors import SessionNotFound, SessionStoreError
from agentls.core.sessions.store import SessionStore
from agentls.core.support.state_dir import default_store_path
from agentls.core.types.conversation import Message
from agentls.core.types.errors import AgentlsError
from agentls.core.types.messages import SessionStatus

SUBPROCESS_TIMEOUT = 30.0  # seconds; bounds every wait on the crash-test child


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "sessions.sqlite3"


@pytest.fixture
def store(db_path: Path):
    with SessionStore(db_path) as opened:
        yield opened


@contextmanager
def raw_db(path: Path) -> Iterator[sqlite3.Connection]:
    """A second, plain connection (commits, then closes: `with connect()` only commits)."""
    with closing(sqlite3.connect(path)) as conn, conn:
        yield conn


def sample_messages() -> list[Message]:
    return [
        Message(role="system", content="You are agentls."),
        Message(role="user", content="Fix the bug\nin foo.py please"),
        Message(
            role="assistant",
            content="",
            metadata={"tool_calls": [{"id": "c1", "tool": "read_file", "arguments": {"p": 1}}]},
        ),
        Message(
            role="tool",
            content="def foo(): ...",
            metadata={"tool_call_id": "c1"},
            tool_result={"success": True, "output": "def foo(): ...", "error": None},
        ),
        Message(
            role="user",
            content="",
            multipart_content=[{"type": "text", "text": "look"}, {"type": "image", "data": "AA=="}],
        ),
        Message(role="assistant", content="Done. ünïcödé ✓", metadata={"source": "hook"}),
    ]


# --------------------------------------------------------------------------- round trips


def test_round_trip_keeps_every_field_and_the_order(store: SessionStore) -> None:
    created = store.create_session("s1", metadata={"workspace": "/w"})
    assert created.session_id == "s1" and created.metadata == {"workspace": "/w"}
    messages = sample_messages()

    seqs = [store.append_message("s1", m) for m in messages]

    assert seqs == list(range(len(messages)))
    loaded = store.load("s1")
    assert loaded.messages == messages
    assert loaded.metadata == {"workspace": "/w"}
    assert loaded.messages[3].tool_result == {
        "success": True,
        "output": "def foo(): ...",
        "error": None,
    }
    assert loaded.messages[4].multipart_content == messages[4].multipart_content


def test_stored_json_uses_the_wire_keys(store: SessionStore, db_path: Path) -> None:
    store.create_session("s1")
    store.append_messages("s1", sample_messages())
    with raw_db(db_path) as raw:
        stored = [row[0] for row in raw.execute("SELECT message FROM messages ORDER BY seq")]
    assert any('"toolResult"' in text for text in stored)
    assert any('"multipartContent"' in text for text in stored)


def test_append_messages_is_one_batch_continuing_the_sequence(store: SessionStore) -> None:
    store.create_session("s1")
    assert store.append_message("s1", Message(role="user", content="a")) == 0
    assert store.append_messages("s1", [Message(role="assistant", content=c) for c in "bcd"]) == [
        1,
        2,
        3,
    ]
    assert store.append_messages("s1", []) == []
    assert [m.content for m in store.load("s1").messages] == ["a", "b", "c", "d"]
    assert store.get_status("s1").total_messages == 4


def test_create_session_generates_an_id_and_a_running_status(store: SessionStore) -> None:
    before = datetime.now(UTC) - timedelta(seconds=1)
    session = store.create_session()
    assert len(session.session_id) == 32 and store.exists(session.session_id)
    status = store.get_status(session.session_id)
    assert status.status == "running" and status.session_id == session.session_id
    assert before <= status.started_at <= datetime.now(UTC) + timedelta(seconds=1)
    with pytest.raises(SessionStoreError, match="already exists"):
        store.create_session(session.session_id)


def test_unknown_session_raises_session_not_found(store: SessionStore) -> None:
    for call in (
        lambda: store.load("nope"),
        lambda: store.get_status("nope"),
        lambda: store.append_message("nope", Message(role="user", content="x")),
        lambda: store.set_title("nope", "t"),
        lambda: store.update_metadata("nope", a=1),
    ):
        with pytest.raises(SessionNotFound) as info:
            call()
        assert isinstance(info.value, AgentlsError) and info.value.session_id == "nope"
    assert not store.exists("nope")


# --------------------------------------------------------------------------- titles, list


def test_title_comes_from_the_first_user_message(store: SessionStore) -> None:
    store.create_session("s1")
    store.append_message("s1", Message(role="system", content="system prompt"))
    store.append_message("s1", Message(role="user", content="hook", metadata={"source": "hook"}))
    store.append_message("s1", Message(role="user", content="\n  Rename   foo to bar  \nmore"))
    store.append_message("s1", Message(role="user", content="second question"))
    assert store.list_sessions()[0].title == "Rename   foo to bar"

    store.create_session("s2")
    store.append_message("s2", Message(role="user", content="x" * 200))
    title = store.list_sessions()[0].title
    assert len(title) <= 80 and title.startswith("x" * 70)

    store.create_session("s3", title="Given")
    store.append_message("s3", Message(role="user", content="ignored"))
    store.set_title("s2", "Renamed")
    titles = {s.session_id: s.title for s in store.list_sessions()}
    assert titles == {"s1": "Rename   foo to bar", "s2": "Renamed", "s3": "Given"}


def test_list_is_most_recently_updated_first_with_wire_format(store: SessionStore) -> None:
    for sid in ("a", "b", "c"):
        store.create_session(sid)
    store.append_message("a", Message(role="user", content="hello"))

    summaries = store.list_sessions()
    assert [s.session_id for s in summaries] == ["a", "c", "b"]
    assert [s.session_id for s in store.list_sessions(limit=2)] == ["a", "c"]
    assert store.list_sessions(limit=0) == []
    assert summaries[0].message_count == 1 and summaries[1].message_count == 0

    wire = summaries[0].to_wire()
    assert set(wire) == {"sessionId", "title", "updatedAt", "status"}
    assert wire["sessionId"] == "a" and wire["title"] == "hello"
    assert wire["updatedAt"].endswith("Z")
    parsed = datetime.fromisoformat(wire["updatedAt"].replace("Z", "+00:00"))
    assert parsed.utcoffset() == timedelta(0)
    assert abs(parsed - summaries[0].updated_at) < timedelta(milliseconds=1)
    assert wire["status"] == store.get_status("a").to_dict()
    assert wire["status"]["total_messages"] == 1


def test_delete_removes_the_session_and_its_messages(store: SessionStore, db_path: Path) -> None:
    store.create_session("s1")
    store.create_session("s2")
    store.append_messages("s1", sample_messages())
    store.append_message("s2", Message(role="user", content="keep"))

    assert store.delete("s1") is True
    assert store.delete("s1") is False
    assert not store.exists("s1")
    with pytest.raises(SessionNotFound):
        store.load("s1")
    assert [s.session_id for s in store.list_sessions()] == ["s2"]
    with raw_db(db_path) as raw:
        assert raw.execute("SELECT COUNT(*) FROM messages WHERE session_id = 's1'").fetchone() == (
            0,
        )
    assert store.load("s2").messages == [Message(role="user", content="keep")]


# --------------------------------------------------------------------------- status, metadata


def test_status_update_round_trip(store: SessionStore) -> None:
    store.create_session("s1")
    started = store.get_status("s1").started_at
    status = SessionStatus(
        session_id="s1",
        started_at=started,
        ended_at=started + timedelta(seconds=5),
        status="completed",
        total_messages=7,
        tool_invocations=3,
        tool_successes=2,
        tool_failures=1,
        total_input_tokens=1000,
        total_output_tokens=200,
        estimated_cost=0.0125,
    )
    store.update_status("s1", status)
    assert store.get_status("s1") == status
    assert store.list_sessions()[0].status == status
    with pytest.raises(ValueError):
        store.update_status("other", status)


def test_update_metadata_merges(store: SessionStore) -> None:
    store.create_session("s1", metadata={"a": 1, "b": {"x": 1}})
    store.update_metadata("s1", b={"y": 2}, c="three")
    assert store.load("s1").metadata == {"a": 1, "b": {"y": 2}, "c": "three"}


# --------------------------------------------------------------------------- persistence


def test_sessions_survive_a_restart(db_path: Path) -> None:
    with SessionStore(db_path) as first:
        first.create_session("s1", metadata={"k": "v"})
        first.append_messages("s1", sample_messages())
        first.update_metadata("s1", model="m")
    first.close()  # idempotent

    with SessionStore(db_path) as second:  # simulated restart
        loaded = second.load("s1")
        assert loaded.messages == sample_messages()
        assert loaded.metadata == {"k": "v", "model": "m"}
        assert second.get_status("s1").total_messages == len(sample_messages())
        assert second.append_message("s1", Message(role="user", content="again")) == len(
            sample_messages()
        )


def test_closed_store_raises(db_path: Path) -> None:
    store = SessionStore(db_path)
    store.close()
    with pytest.raises(SessionStoreError, match="closed"):
        store.list_sessions()


def test_wal_mode_and_pragmas(store: SessionStore, db_path: Path) -> None:
    store.create_session("s1")
    with raw_db(db_path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("PRAGMA user_version").fetchone()[0] >= 1


def test_default_path_honours_the_environment(tmp_path: Path) -> None:
    assert default_store_path({"AGENTLS_STATE_DIR": str(tmp_path)}) == tmp_path / "sessions.sqlite3"
    default = default_store_path({})
    assert default.name == "sessions.sqlite3" and "agentls" in str(default)
    with SessionStore.open_default({"AGENTLS_STATE_DIR": str(tmp_path / "x")}) as opened:
        opened.create_session("s1")
    assert (tmp_path / "x" / "sessions.sqlite3").exists()


CRASH_CHILD = """
import sys
from agentls.core.sessions.store import SessionStore
from agentls.core.types.conversation import Message

store = SessionStore(sys.argv[1])
store.create_session("crash", metadata={"pid": 1})
print("ready", flush=True)
for i in range(1_000_000):
    seq = store.append_message("crash", Message(role="user", content=f"message {i}",
                                                metadata={"i": i}))
    print(f"appended {seq}", flush=True)
"""


def _read_lines(stream, lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line.strip())
    lines.put(None)


def test_messages_survive_sigkill_mid_loop(db_path: Path) -> None:
    """A real crash: the child is killed while it keeps appending.

    This covers a process crash (the OS keeps the written WAL); power loss is
    what synchronous=FULL additionally covers and cannot be tested here.
    """
    child = subprocess.Popen(
        [sys.executable, "-c", CRASH_CHILD, str(db_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_read_lines, args=(child.stdout, lines), daemon=True).start()
    reported: list[int] = []
    try:
        assert lines.get(timeout=SUBPROCESS_TIMEOUT) == "ready"
        while len(reported) < 25:
            line = lines.get(timeout=SUBPROCESS_TIMEOUT)
            assert line is not None, child.stderr.read() if child.stderr else ""
            reported.append(int(line.removeprefix("appended ")))
    finally:
        child.kill()  # SIGKILL on POSIX: no cleanup, no close(), no checkpoint
        child.wait(timeout=SUBPROCESS_TIMEOUT)
        for stream in (child.stdout, child.stderr):
            if stream:
                stream.close()
    assert child.returncode != 0
    assert reported == list(range(25))

    with SessionStore(db_path) as reopened:
        messages = reopened.load("crash").messages
    # The child kept appending between our last read and the kill: at least
    # what it reported is there, and everything there is whole and in order.
    assert len(messages) >= len(reported)
    assert messages == [
        Message(role="user", content=f"message {i}", metadata={"i": i})
        for i in range(len(messages))
    ]


# --------------------------------------------------------------------------- concurrency


def _append_many(
    store: SessionStore, sid: str, label: str, count: int, start: threading.Barrier
) -> None:
    start.wait(timeout=10)
    for i in range(count):
        store.append_message(sid, Message(role="user", content=f"{label}-{i}"))


def _run_threads(targets: list[threading.Thread]) -> None:
    for thread in targets:
        thread.start()
    for thread in targets:
        thread.join(timeout=60)
        assert not thread.is_alive()


def test_two_threads_append_to_two_sessions(store: SessionStore) -> None:
    count = 60
    store.create_session("left")
    store.create_session("right")
    start = threading.Barrier(2)
    _run_threads(
        [
            threading.Thread(target=_append_many, args=(store, sid, sid, count, start))
            for sid in ("left", "right")
        ]
    )
    for sid in ("left", "right"):
        assert [m.content for m in store.load(sid).messages] == [f"{sid}-{i}" for i in range(count)]
        assert store.get_status(sid).total_messages == count


def test_two_connections_share_one_session_without_losing_messages(db_path: Path) -> None:
    """Two stores stand in for two server processes on the same file."""
    count = 30
    with SessionStore(db_path) as one, SessionStore(db_path) as two:
        one.create_session("shared")
        start = threading.Barrier(2)
        _run_threads(
            [
                threading.Thread(target=_append_many, args=(one, "shared", "one", count, start)),
                threading.Thread(target=_append_many, args=(two, "shared", "two", count, start)),
            ]
        )
        contents = [m.content for m in one.load("shared").messages]
    # Nothing lost or duplicated, and each writer's messages keep their order.
    assert len(contents) == 2 * count
    for label in ("one", "two"):
        assert [c for c in contents if c.startswith(label)] == [
            f"{label}-{i}" for i in range(count)
        ]


# --------------------------------------------------------------------------- damage


def test_corrupt_message_row_is_skipped_and_logged(
    store: SessionStore, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store.create_session("s1")
    store.create_session("s2")
    store.append_messages("s1", [Message(role="user", content=c) for c in ("a", "b", "c")])
    store.append_message("s2", Message(role="user", content="other"))
    with raw_db(db_path) as raw:
        raw.execute("UPDATE messages SET message = '{not json' WHERE session_id = 's1' AND seq = 1")
        raw.execute("UPDATE sessions SET status = 'garbage' WHERE session_id = 's2'")

    with caplog.at_level(logging.WARNING, logger="agentls.session_store"):
        assert [m.content for m in store.load("s1").messages] == ["a", "c"]
        assert store.load("s2").messages == [Message(role="user", content="other")]
        assert {s.session_id for s in store.list_sessions()} == {"s1", "s2"}
    records = [r for r in caplog.records if r.name == "agentls.session_store"]
    assert any("corrupt message 1 of session s1" in r.getMessage() for r in records)
    assert any("status of session s2" in r.getMessage() for r in records)


def test_a_file_that_is_not_a_database_gives_an_actionable_error(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(SessionStoreError) as info:
        SessionStore(db_path)
    message = str(info.value)
    assert str(db_path) in message and "move the file aside" in message


def test_a_locked_database_gives_an_actionable_error(db_path: Path) -> None:
    with SessionStore(db_path, busy_timeout=0.1) as store:
        store.create_session("s1")
        other = sqlite3.connect(db_path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process holding the write lock
            started = time.monotonic()
            with pytest.raises(SessionStoreError, match="locked by another process"):
                store.append_message("s1", Message(role="user", content="x"))
            assert time.monotonic() - started < 5
            other.execute("ROLLBACK")
        finally:
            other.close()
        assert store.append_message("s1", Message(role="user", content="x")) == 0


def test_disk_full_message_names_the_path() -> None:
    from agentls.core.sessions.errors import describe_sqlite_error as _describe_sqlite_error

    text = _describe_sqlite_error(
        sqlite3.OperationalError("database or disk is full"), Path("/x/s.sqlite3"), "saving"
    )
    assert "the disk holding /x/s.sqlite3 is full" in text
    assert "nothing was lost of what was already saved" in text


def test_a_database_from_a_newer_agentls_is_refused(db_path: Path) -> None:
    SessionStore(db_path).close()
    with raw_db(db_path) as raw:
        raw.execute("PRAGMA user_version = 99")
    with pytest.raises(SessionStoreError, match="newer agentls"):
        SessionStore(db_path)
