"""Errors of the session database, and sqlite3 errors turned into
sentences a user can act on (agentls.core.sessions.store)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agentls.core.support.state_dir import STATE_DIR_ENV  # moves the database; the hints name it
from agentls.core.types.errors import AgentlsError

__all__ = ["SessionNotFound", "SessionStoreError", "describe_sqlite_error"]


class SessionStoreError(AgentlsError):
    """The session database could not be read or written.

    The message names the database file and what the user can do about it.
    """

    def __init__(self, message: str, *, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class SessionNotFound(SessionStoreError):
    """No session with this id is stored."""

    def __init__(self, session_id: str, *, path: Path | None = None) -> None:
        where = f" in {path}" if path is not None else ""
        super().__init__(f"no session {session_id!r}{where}", path=path)
        self.session_id = session_id


def describe_sqlite_error(exc: sqlite3.Error, path: Path, action: str) -> str:
    """Turn a sqlite3 error into a sentence a user can act on.

    Python 3.11+ sets `sqlite_errorname` on errors raised by SQLite; the message
    text is the fallback (and what errors built by hand carry).
    """
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc).lower()
    kept = "nothing was lost of what was already saved"

    def is_(code: str, *phrases: str) -> bool:
        return name.startswith(code) or any(p in text for p in phrases)

    if is_("SQLITE_FULL", "disk is full"):
        hint = f"the disk holding {path} is full; free some space and try again ({kept})"
    elif is_("SQLITE_BUSY", "database is locked") or is_("SQLITE_LOCKED", "table is locked"):
        hint = (
            f"{path} is locked by another process (another agentls server?); "
            f"wait for it to finish or close it, then try again ({kept})"
        )
    elif is_("SQLITE_NOTADB", "file is not a database") or is_("SQLITE_CORRUPT", "malformed"):
        hint = (
            f"{path} is corrupt; stop agentls and move the file aside to start a new "
            f"session history (the old file can be inspected with the sqlite3 tool)"
        )
    elif is_("SQLITE_READONLY", "readonly database"):
        hint = f"{path} is read-only; make it and its directory writable, or set {STATE_DIR_ENV}"
    elif is_("SQLITE_CANTOPEN", "unable to open"):
        hint = (
            f"cannot open {path}; check that its directory exists and is writable, "
            f"or set {STATE_DIR_ENV} to another directory"
        )
    elif is_("SQLITE_IOERR", "disk i/o error"):
        hint = f"the disk holding {path} reported an I/O error; check the disk ({kept})"
    else:
        hint = f"database {path}: {exc}"
    return f"session store: {action} failed: {hint}"
