"""Tool and template names the model and the user see:
`mcp__<server>__<name>`, only `[A-Za-z0-9_-]`, at most 64 characters (the
limit OpenAI and Anthropic put on tool names).

A name that is too long keeps its start and gets a short hash of the full
name, so two long names that share a prefix stay apart; a name that
collides with one already given (two tools that differ only in characters
that were replaced) gets the same treatment. The same inputs always give
the same names, so "Allow for session" and `approval.rules` globs keep
meaning the same tool across restarts.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = ["MAX_NAME", "PREFIX", "assign_names", "sanitize"]

PREFIX = "mcp"
MAX_NAME = 64
_BAD = re.compile(r"[^A-Za-z0-9_-]")


def sanitize(text: str) -> str:
    return _BAD.sub("_", text) or "_"


def _hashed(full: str, salt: str, limit: int) -> str:
    tag = hashlib.sha256(salt.encode()).hexdigest()[:8]
    return f"{full[: limit - len(tag) - 1]}_{tag}"


def assign_names(server: str, names: Iterable[str], taken: set[str] | None = None
                 ) -> dict[str, str]:
    """original name -> exposed name for one server's tools (or prompts).
    `taken` holds names already given (other servers'); it is updated."""
    used = taken if taken is not None else set()
    result: dict[str, str] = {}
    for original in names:
        if original in result:
            continue  # a server listing one name twice: the first wins
        full = f"{PREFIX}__{sanitize(server)}__{sanitize(original)}"
        candidate = full if len(full) <= MAX_NAME else _hashed(full, f"{server}\0{original}",
                                                                 MAX_NAME)
        attempt = 0
        while candidate in used:
            attempt += 1
            candidate = _hashed(full, f"{server}\0{original}\0{attempt}", MAX_NAME)
        used.add(candidate)
        result[original] = candidate
    return result
