"""Sessions and their messages, persisted in SQLite.

The database lives in the user state directory
(`platformdirs.user_state_dir("agentls")/sessions.sqlite3`, or
`$AGENTLS_STATE_DIR/sessions.sqlite3`). Each message is committed on its own
as soon as it is final, with `synchronous=FULL`, so a server killed at any
moment loses nothing that `append_message` already returned for.

Methods are synchronous; async callers wrap them with `asyncio.to_thread`.
One connection is shared by all threads and guarded by a lock; other
processes (a second editor window) coordinate through SQLite's own locking.

Only the standard library's sqlite3 is used: `agentls.core` must not import
pygls or httpx.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import ValidationError

from agentls.core.sessions.errors import SessionNotFound, SessionStoreError
from agentls.core.sessions.errors import describe_sqlite_error as _describe_sqlite_error
from agentls.core.sessions.rows import SessionSummary
from agentls.core.sessions.rows import dumps as _dumps
from agentls.core.sessions.rows import iso_utc as _iso_utc
from agentls.core.sessions.rows import title_from as _title_from
from agentls.core.sessions.schema import MIGRATIONS, SCHEMA_VERSION
from agentls.core.support.state_dir import (
    STATE_DIR_ENV,
    PrivatePathError,
    create_private_file,
    default_store_path,
    ensure_private_dir,
    restrict_file,
)
from agentls.core.types.conversation import Message, Session
from agentls.core.types.messages import SessionStatus

__all__ = ["SessionStore"]

log = logging.getLogger("agentls.session_store")

DEFAULT_BUSY_TIMEOUT = 5.0  # seconds another process may hold the write lock


# --------------------------------------------------------------------------- store


class SessionStore:
    """Sessions and messages in one SQLite file (WAL, synchronous=FULL)."""

    def __init__(self, path: Path | str, *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> None:
        self.path = Path(path).expanduser()
        self._lock = threading.Lock()
        self._last_time = datetime.min.replace(tzinfo=UTC)
        try:
            self._make_private()
        except OSError as exc:
            raise SessionStoreError(
                f"session store: cannot create directory {self.path.parent}: {exc}; "
                f"make it writable or set {STATE_DIR_ENV} to another directory",
                path=self.path,
            ) from exc
        self._conn: sqlite3.Connection | None = None
        with self._guard("opening the database"):
            self._conn = self._connect(busy_timeout)
        try:
            with self._transaction("upgrading the database schema"):
                self._migrate()
        except BaseException:
            self.close()
            raise

    @classmethod
    def open_default(cls, environ: Mapping[str, str] = os.environ) -> SessionStore:
        return cls(default_store_path(environ))

    # ---------------------------------------------------------------- plumbing

    def _make_private(self) -> None:
        """The folder 0700 and the database files 0600 before SQLite opens
        them: they hold approved secret files' text (sessions, checkpoints).
        SQLite gives its -wal and -shm files the database file's mode."""
        ensure_private_dir(self.path.parent)
        create_private_file(self.path)
        for suffix in ("-wal", "-shm", "-journal"):
            try:
                restrict_file(self.path.with_name(self.path.name + suffix))
            except PrivatePathError as exc:
                log.warning("%s", exc)

    def _connect(self, busy_timeout: float) -> sqlite3.Connection:
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, so a message is
        # committed exactly when append_message says so.
        conn = sqlite3.connect(
            self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":  # e.g. some network file systems
                log.warning(
                    "session store %s: WAL unavailable, journal mode is %s", self.path, mode
                )
            # FULL: fsync the WAL on every commit, so "appended" means "durable".
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _migrate(self) -> None:
        conn = self._require_conn()
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise SessionStoreError(
                f"session store: {self.path} was written by a newer agentls (schema "
                f"{version}, this one knows {SCHEMA_VERSION}); upgrade agentls or set "
                f"{STATE_DIR_ENV} to another directory",
                path=self.path,
            )
        for target, statements in enumerate(MIGRATIONS[version:], start=version + 1):
            for statement in statements:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version={target}")  # part of the same transaction

    def _require_conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise SessionStoreError(f"session store {self.path} is closed", path=self.path)
        return self._conn

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Re-raise sqlite3 errors as SessionStoreError with an actionable message."""
        try:
            yield
        except sqlite3.Error as exc:
            message = _describe_sqlite_error(exc, self.path, action)
            raise SessionStoreError(message, path=self.path) from exc

    @contextmanager
    def _transaction(self, action: str, *, write: bool = True) -> Iterator[sqlite3.Connection]:
        """Hold the lock and run one SQLite transaction, committed on success.

        Writes use BEGIN IMMEDIATE: taking the write lock up front makes another
        process wait (busy_timeout) instead of failing when a read transaction
        would later need upgrading. Reads use a plain BEGIN for a consistent
        snapshot across their SELECTs.
        """
        with self._lock, self._guard(action):
            conn = self._require_conn()
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                # SQLite may already have rolled back (e.g. disk full).
                if conn.in_transaction:
                    with suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise

    def transaction(self, action: str, *, write: bool = True
                    ) -> AbstractContextManager[sqlite3.Connection]:
        """One transaction on this database, for the tables other core modules
        keep in it (checkpoint_store); same lock, errors and durability as
        messages."""
        return self._transaction(action, write=write)

    def _now(self) -> datetime:
        """Current UTC time, strictly increasing within this store.

        Coarse clocks would otherwise give two updates the same updated_at and
        make "most recently updated first" ambiguous. Called with the lock held.
        """
        now = datetime.now(UTC)
        if now <= self._last_time:
            now = self._last_time + timedelta(microseconds=1)
        self._last_time = now
        return now

    # ---------------------------------------------------------------- row decoding

    def _decode_status(self, session_id: str, raw: str, created_at: str) -> SessionStatus:
        try:
            return SessionStatus.model_validate(json.loads(raw))
        except (ValueError, TypeError) as exc:  # JSONDecodeError, ValidationError
            log.warning(
                "session store %s: unreadable status of session %s: %s", self.path, session_id, exc
            )
            return SessionStatus(session_id=session_id, started_at=self._parse_time(created_at))

    def _decode_metadata(self, session_id: str, raw: str) -> dict[str, Any]:
        try:
            value = json.loads(raw)
            if not isinstance(value, dict):
                raise TypeError(f"expected an object, got {type(value).__name__}")
            return value
        except (ValueError, TypeError) as exc:
            log.warning(
                "session store %s: unreadable metadata of session %s: %s",
                self.path,
                session_id,
                exc,
            )
            return {}

    def _decode_message(self, session_id: str, seq: int, raw: str) -> Message | None:
        try:
            data = json.loads(raw)
            if not isinstance(data, dict):
                raise TypeError(f"expected an object, got {type(data).__name__}")
            return Message.from_dict(data)
        except (ValueError, TypeError, KeyError, ValidationError) as exc:
            log.error(
                "session store %s: skipping corrupt message %d of session %s: %s",
                self.path,
                seq,
                session_id,
                exc,
            )
            return None

    def _parse_time(self, raw: str) -> datetime:
        try:
            value = datetime.fromisoformat(raw)
        except (ValueError, TypeError):
            log.warning("session store %s: unreadable timestamp %r", self.path, raw)
            return datetime.fromtimestamp(0, UTC)
        return value if value.tzinfo else value.replace(tzinfo=UTC)

    def _read_status(self, conn: sqlite3.Connection, session_id: str) -> SessionStatus:
        row = conn.execute(
            "SELECT status, created_at FROM sessions WHERE session_id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise SessionNotFound(session_id, path=self.path)
        return self._decode_status(session_id, row[0], row[1])

    def _touch(self, conn: sqlite3.Connection, session_id: str, **columns: str) -> None:
        """Set `columns` (trusted names) and updated_at; SessionNotFound if missing."""
        assignments = "".join(f"{name} = ?, " for name in columns)
        cursor = conn.execute(
            f"UPDATE sessions SET {assignments}updated_at = ? WHERE session_id = ?",
            (*columns.values(), _iso_utc(self._now()), session_id),
        )
        if cursor.rowcount == 0:
            raise SessionNotFound(session_id, path=self.path)

    # ---------------------------------------------------------------- sessions

    def create_session(
        self,
        session_id: str | None = None,
        *,
        title: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> Session:
        """Store a new empty session (status running, started now)."""
        session_id = session_id if session_id is not None else uuid.uuid4().hex
        if not session_id:
            raise ValueError("session_id must not be empty")
        metadata = dict(metadata or {})
        with self._transaction(f"creating session {session_id}") as conn:
            if conn.execute(
                "SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone():
                raise SessionStoreError(
                    f"session store: session {session_id!r} already exists in {self.path}",
                    path=self.path,
                )
            now = self._now()
            status = SessionStatus(session_id=session_id, started_at=now)
            conn.execute(
                "INSERT INTO sessions (session_id, title, created_at, updated_at, metadata, status)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    session_id,
                    title,
                    _iso_utc(now),
                    _iso_utc(now),
                    _dumps(metadata),
                    _dumps(status.model_dump(mode="json")),
                ),
            )
        return Session(session_id=session_id, metadata=metadata)

    def exists(self, session_id: str) -> bool:
        with self._transaction(f"looking up session {session_id}", write=False) as conn:
            row = conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,))
            return row.fetchone() is not None

    def load(self, session_id: str) -> Session:
        """The session with its messages in order; corrupt message rows are skipped."""
        with self._transaction(f"loading session {session_id}", write=False) as conn:
            row = conn.execute(
                "SELECT metadata FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise SessionNotFound(session_id, path=self.path)
            rows = conn.execute(
                "SELECT seq, message FROM messages WHERE session_id = ? ORDER BY seq",
                (session_id,),
            ).fetchall()
        messages = [self._decode_message(session_id, seq, raw) for seq, raw in rows]
        return Session(
            session_id=session_id,
            messages=[m for m in messages if m is not None],
            metadata=self._decode_metadata(session_id, row[0]),
        )

    def list_sessions(self, *, limit: int | None = None) -> list[SessionSummary]:
        """Summaries, most recently updated first."""
        if limit is not None and limit < 0:
            raise ValueError("limit must be >= 0")
        with self._transaction("listing sessions", write=False) as conn:
            rows = conn.execute(
                "SELECT s.session_id, s.title, s.created_at, s.updated_at, s.status,"
                " (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.session_id),"
                " s.metadata"
                " FROM sessions s ORDER BY s.updated_at DESC, s.session_id DESC LIMIT ?",
                (-1 if limit is None else limit,),
            ).fetchall()
        return [
            SessionSummary(
                session_id=sid,
                title=title,
                created_at=self._parse_time(created),
                updated_at=self._parse_time(updated),
                status=self._decode_status(sid, status, created),
                message_count=count,
                metadata=self._decode_metadata(sid, metadata),
            )
            for sid, title, created, updated, status, count, metadata in rows
        ]

    def delete(self, session_id: str) -> bool:
        """Delete a session, its messages and checkpoints; True if it existed."""
        with self._transaction(f"deleting session {session_id}") as conn:
            # Checkpoints hold copies of files: they go with their session.
            conn.execute("DELETE FROM checkpoint_files WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM checkpoints WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
            cursor = conn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
            return cursor.rowcount > 0

    # ---------------------------------------------------------------- messages

    def append_message(self, session_id: str, message: Message) -> int:
        """Durably store one final message; returns its 0-based sequence number."""
        return self.append_messages(session_id, [message])[0]

    def append_messages(self, session_id: str, messages: Sequence[Message]) -> list[int]:
        """Durably store messages in one transaction; returns their sequence numbers."""
        encoded = [self._encode_message(session_id, m) for m in messages]
        with self._transaction(f"saving messages of session {session_id}") as conn:
            row = conn.execute(
                "SELECT title, status, created_at FROM sessions WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            if row is None:
                raise SessionNotFound(session_id, path=self.path)
            title, status_raw, created = row
            # Sequence numbers come from inside the write transaction, so another
            # process appending to the same session cannot take the same number.
            next_seq = conn.execute(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM messages WHERE session_id = ?",
                (session_id,),
            ).fetchone()[0]
            now = _iso_utc(self._now())
            seqs = list(range(next_seq, next_seq + len(messages)))
            conn.executemany(
                "INSERT INTO messages (session_id, seq, role, created_at, message)"
                " VALUES (?, ?, ?, ?, ?)",
                [
                    (session_id, seq, m.role, now, raw)
                    for seq, m, raw in zip(seqs, messages, encoded, strict=True)
                ],
            )
            for message in messages:
                title = title or _title_from(message)
            status = self._decode_status(session_id, status_raw, created)
            status = status.model_copy(update={"total_messages": status.total_messages + len(seqs)})
            conn.execute(
                "UPDATE sessions SET title = ?, status = ?, updated_at = ? WHERE session_id = ?",
                (title, _dumps(status.model_dump(mode="json")), now, session_id),
            )
        return seqs

    def _encode_message(self, session_id: str, message: Message) -> str:
        try:
            return _dumps(message.to_dict())
        except (TypeError, ValueError) as exc:
            raise SessionStoreError(
                f"session store: a {message.role} message of session {session_id} cannot be "
                f"saved because it is not JSON-serialisable ({exc}); this is a bug in agentls",
                path=self.path,
            ) from exc

    # ---------------------------------------------------------------- status, metadata

    def get_status(self, session_id: str) -> SessionStatus:
        with self._transaction(f"reading the status of session {session_id}", write=False) as conn:
            return self._read_status(conn, session_id)

    def update_status(self, session_id: str, status: SessionStatus) -> None:
        """Replace the stored status (counters included) with `status`."""
        if status.session_id != session_id:
            raise ValueError(f"status is for session {status.session_id!r}, not {session_id!r}")
        with self._transaction(f"saving the status of session {session_id}") as conn:
            self._touch(conn, session_id, status=_dumps(status.model_dump(mode="json")))

    def update_metadata(self, session_id: str, **updates: Any) -> None:
        """Merge `updates` into the session's metadata (top-level keys replaced)."""
        # Encode first: an unserialisable value fails before anything is written,
        # and the merged metadata holds exactly what load() will return.
        payload = _dumps(updates)
        with self._transaction(f"saving the metadata of session {session_id}") as conn:
            row = conn.execute(
                "SELECT metadata FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise SessionNotFound(session_id, path=self.path)
            merged = {**self._decode_metadata(session_id, row[0]), **json.loads(payload)}
            self._touch(conn, session_id, metadata=_dumps(merged))

    def set_title(self, session_id: str, title: str) -> None:
        with self._transaction(f"renaming session {session_id}") as conn:
            self._touch(conn, session_id, title=title)

    # ---------------------------------------------------------------- lifetime

    def close(self) -> None:
        """Checkpoint the WAL into the main file and close; safe to call twice."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is None:
                return
            try:
                # Best effort: another process reading the file can make it busy.
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                log.debug("session store %s: checkpoint on close failed: %s", self.path, exc)
            finally:
                conn.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
