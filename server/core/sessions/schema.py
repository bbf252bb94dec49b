"""The session database's schema: one migration per version, run by
agentls.core.sessions.store (PRAGMA user_version records how many have run).

Tables: sessions, messages (session_store), checkpoints and
checkpoint_files (checkpoint_store).
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

# Each entry upgrades the schema by one version; PRAGMA user_version records how
# many have run. Append new migrations, never edit old ones: users' databases
# were created by them.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE sessions (
            session_id TEXT PRIMARY KEY,
            title      TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            metadata   TEXT NOT NULL DEFAULT '{}',
            status     TEXT NOT NULL
        )
        """,
        "CREATE INDEX sessions_by_updated_at ON sessions (updated_at)",
        """
        CREATE TABLE messages (
            session_id TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
            seq        INTEGER NOT NULL,
            role       TEXT NOT NULL,
            created_at TEXT NOT NULL,
            message    TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        )
        """,
    ),
    # 2: checkpoints (agentls.core.checkpoints.store): each file's content from
    # before a turn first changed it, and what the agent last left there.
    (
        """
        CREATE TABLE checkpoints (
            session_id    TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
            turn          INTEGER NOT NULL,
            message_index INTEGER NOT NULL,
            created_at    TEXT NOT NULL,
            PRIMARY KEY (session_id, turn)
        )
        """,
        """
        CREATE TABLE checkpoint_files (
            session_id   TEXT NOT NULL,
            turn         INTEGER NOT NULL,
            path         TEXT NOT NULL,
            seq          INTEGER NOT NULL,
            existed      INTEGER NOT NULL,
            content      TEXT,
            written_hash TEXT NOT NULL,
            pending_hash TEXT,
            PRIMARY KEY (session_id, turn, path),
            FOREIGN KEY (session_id, turn) REFERENCES checkpoints (session_id, turn)
                ON DELETE CASCADE
        )
        """,
        "CREATE INDEX checkpoint_files_by_path ON checkpoint_files (session_id, path, turn)",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)
