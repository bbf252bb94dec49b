"""Checkpoints in the session database (tables from session_store's
migration 2; docs/protocol.md, "Checkpoints").

A checkpoint is what a turn found in each file right before it first
changed it: the text, or that the file did not exist. Rows are committed in
their own transaction before the edit goes to the editor (the same
durability as messages: WAL, synchronous=FULL), so a server killed between
the two still has them.

Each row also keeps `written_hash`, the hash of what the agent (or a
restore) last left in the file: a file whose content no longer matches the
newest row's hash was changed by someone else since, and a restore leaves it
alone unless forced. `pending_hash` is what an edit in flight will leave; it
counts as the agent's too, so a crash right after the editor applied an
edit is not mistaken for someone else's change.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agentls.core.sessions.errors import SessionNotFound
from agentls.core.sessions.store import SessionStore

__all__ = [
    "ABSENT",
    "Checkpoint",
    "CheckpointStore",
    "TrackedFile",
    "content_hash",
]

ABSENT = "absent"  # the hash of a file that does not exist


def content_hash(text: str | None) -> str:
    """What is compared to tell whether a file changed: ABSENT for no file.

    Line ends are compared as one: an editor puts inserted text in its
    document's line ends (VS Code turns the agent's \\n into \\r\\n in a
    CRLF file), which is not someone else's change."""
    if text is None:
        return ABSENT
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Checkpoint:
    """The files one turn changed, stored before its first change."""

    turn: int
    message_index: int  # the turn's prompt in the session's messages
    created_at: datetime
    files: tuple[str, ...]  # absolute paths, in the order the turn first changed them


@dataclass(frozen=True)
class TrackedFile:
    """A file a restore to `turn` puts back."""

    path: str
    before: str | None  # its text before that turn (None: it did not exist)
    latest_turn: int  # the last turn that changed it (the row holding the hashes)
    written_hash: str
    pending_hash: str | None

    def is_agents(self, current_hash: str) -> bool:
        """Whether the file still holds what the agent last left there."""
        return current_hash in (self.written_hash, self.pending_hash)


class CheckpointStore:
    """Checkpoint rows of one SessionStore (methods are synchronous, like
    the store's; async callers use asyncio.to_thread)."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    def _require_session(self, conn: Any, session_id: str) -> None:
        row = conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,))
        if row.fetchone() is None:
            raise SessionNotFound(session_id, path=self.store.path)

    # ---------------------------------------------------------------- recording

    def save_before(
        self,
        session_id: str,
        turn: int,
        message_index: int,
        before: Mapping[str, str | None],
        pending: Mapping[str, str] | None = None,
    ) -> None:
        """Store each path's text from before `turn` first changes it (a path
        the turn already stored keeps its first row), and the hash the edit
        about to be sent will leave (`pending`), in one transaction."""
        with self.store.transaction(f"saving a checkpoint of session {session_id}") as conn:
            self._require_session(conn, session_id)
            conn.execute(
                "INSERT OR IGNORE INTO checkpoints (session_id, turn, message_index, created_at)"
                " VALUES (?, ?, ?, ?)",
                (session_id, turn, message_index,
                 datetime.now(UTC).isoformat(timespec="milliseconds")),
            )
            seq = conn.execute(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM checkpoint_files"
                " WHERE session_id = ? AND turn = ?", (session_id, turn),
            ).fetchone()[0]
            for path, text in before.items():
                cursor = conn.execute(
                    "INSERT OR IGNORE INTO checkpoint_files (session_id, turn, path, seq, existed,"
                    " content, written_hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (session_id, turn, path, seq, text is not None, text, content_hash(text)),
                )
                seq += cursor.rowcount
            conn.executemany(
                "UPDATE checkpoint_files SET pending_hash = ?"
                " WHERE session_id = ? AND turn = ? AND path = ?",
                [(digest, session_id, turn, path) for path, digest in (pending or {}).items()],
            )

    def set_pending(self, session_id: str, hashes: Mapping[tuple[int, str], str]) -> None:
        """Before a restore's edit: what it will leave, per (turn, path)."""
        with self.store.transaction(f"saving a restore of session {session_id}") as conn:
            conn.executemany(
                "UPDATE checkpoint_files SET pending_hash = ?"
                " WHERE session_id = ? AND turn = ? AND path = ?",
                [(digest, session_id, turn, path) for (turn, path), digest in hashes.items()],
            )

    def settle(
        self,
        session_id: str,
        written: Mapping[tuple[int, str], str | None],
        *,
        dropped: Iterable[tuple[int, str]] = (),
    ) -> None:
        """After an edit: each (turn, path) now holds the hash given (None:
        the edit was not applied, the old hash stays); pending hashes are
        cleared. `dropped` rows are removed: files the turn never managed to
        change (their edits were declined), so its checkpoint does not list
        them; a checkpoint left without files goes too."""
        with self.store.transaction(f"saving a checkpoint of session {session_id}") as conn:
            for (turn, path), digest in written.items():
                conn.execute(
                    "UPDATE checkpoint_files SET written_hash = COALESCE(?, written_hash),"
                    " pending_hash = NULL WHERE session_id = ? AND turn = ? AND path = ?",
                    (digest, session_id, turn, path),
                )
            turns = set()
            for turn, path in dropped:
                conn.execute(
                    "DELETE FROM checkpoint_files WHERE session_id = ? AND turn = ? AND path = ?",
                    (session_id, turn, path),
                )
                turns.add(turn)
            for turn in turns:
                conn.execute(
                    "DELETE FROM checkpoints WHERE session_id = ? AND turn = ? AND NOT EXISTS"
                    " (SELECT 1 FROM checkpoint_files f WHERE f.session_id = ? AND f.turn = ?)",
                    (session_id, turn, session_id, turn),
                )

    # ---------------------------------------------------------------- reading

    def list_checkpoints(self, session_id: str) -> list[Checkpoint]:
        """The session's checkpoints, oldest turn first; SessionNotFound."""
        with self.store.transaction(f"listing checkpoints of session {session_id}",
                                    write=False) as conn:
            self._require_session(conn, session_id)
            heads = conn.execute(
                "SELECT turn, message_index, created_at FROM checkpoints WHERE session_id = ?"
                " ORDER BY turn", (session_id,),
            ).fetchall()
            files = conn.execute(
                "SELECT turn, path FROM checkpoint_files WHERE session_id = ? ORDER BY turn, seq",
                (session_id,),
            ).fetchall()
        by_turn: dict[int, list[str]] = {}
        for turn, path in files:
            by_turn.setdefault(turn, []).append(path)
        return [
            Checkpoint(turn, index, _parse_time(created), tuple(by_turn.get(turn, ())))
            for turn, index, created in heads
        ]

    def files_since(self, session_id: str, turn: int) -> list[TrackedFile] | None:
        """Every file changed by `turn` or a later turn, with its text from
        before the first of those turns that changed it and the hashes of its
        newest row. None when `turn` has no checkpoint; SessionNotFound."""
        with self.store.transaction(f"reading checkpoints of session {session_id}",
                                    write=False) as conn:
            self._require_session(conn, session_id)
            head = conn.execute(
                "SELECT 1 FROM checkpoints WHERE session_id = ? AND turn = ?", (session_id, turn),
            ).fetchone()
            if head is None:
                return None
            rows = conn.execute(
                "SELECT path, turn, existed, content, written_hash, pending_hash"
                " FROM checkpoint_files WHERE session_id = ? AND turn >= ? ORDER BY turn, seq",
                (session_id, turn),
            ).fetchall()
        first: dict[str, tuple[Any, ...]] = {}
        last: dict[str, tuple[Any, ...]] = {}
        for row in rows:
            first.setdefault(row[0], row)
            last[row[0]] = row
        return [
            TrackedFile(
                path=path,
                before=row[3] if row[2] else None,
                latest_turn=last[path][1],
                written_hash=last[path][4],
                pending_hash=last[path][5],
            )
            for path, row in first.items()
        ]


def _parse_time(raw: str) -> datetime:
    try:
        value = datetime.fromisoformat(raw)
    except (TypeError, ValueError):
        return datetime.fromtimestamp(0, UTC)
    return value if value.tzinfo else value.replace(tzinfo=UTC)
