"""Where agentls keeps its per-user state (the session database, the
workspace-trust decisions): $AGENTLS_STATE_DIR or the platform's user state
directory. Its own module so that reading the trust file at start-up does not
import the session store (sqlite3)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import platformdirs

STATE_DIR_ENV = "AGENTLS_STATE_DIR"
DB_FILENAME = "sessions.sqlite3"


def default_store_path(environ: Mapping[str, str] = os.environ) -> Path:
    """Where the session database lives: $AGENTLS_STATE_DIR or the user state dir."""
    override = environ.get(STATE_DIR_ENV, "").strip()
    base = Path(override).expanduser() if override else Path(platformdirs.user_state_dir("agentls"))
    return base / DB_FILENAME
