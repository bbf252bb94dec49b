"""Tool and template names the model and the user see, unambiguous by
origin: `mcp__<server>__<name>` for the user's servers (settings),
`mcp__ws__<server>__<name>` for a workspace `.mcp.json`'s, only
`[A-Za-z0-9_-]`, at most 64 characters (the limit OpenAI and Anthropic put
on tool names).

The server part never contains `__` and never starts or ends with `_`, so
the text between `mcp__` and the next `__` is always exactly one server's
part: a rule `mcp__time__*` matches the tools of the user's server `time`
and of no other server (not of a workspace server `time__x`, not of a
workspace server `time` exposing `x`). A server name that is not already
such a part (it holds `.`, `__`, a leading or trailing `_`, or is `ws`)
gets a readable stand-in with a short hash of the real name, the same at
every start, so different names never share a part.

A name that is too long keeps its start and gets a short hash of the full
name, so two long names that share a prefix stay apart; a name that
collides with one already given (two tools that differ only in characters
that were replaced) gets the same treatment. The user's servers are named
first, so they keep their names. The same inputs always give the same
names, so "Allow for session" and `approval.rules` globs keep meaning the
same tool across restarts.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = ["MAX_NAME", "PREFIX", "WORKSPACE", "assign_names", "sanitize", "server_part"]

PREFIX = "mcp"
# The part that marks a workspace server's names; never a user server's part.
WORKSPACE = "ws"
MAX_NAME = 64
MAX_PART = 40  # longest server part, so every name keeps room for the tool's
NUL = "\0"
_BAD = re.compile(r"[^A-Za-z0-9_-]")
# A server part as it can stand: no "__", no "_" at either end.
_PLAIN_PART = re.compile(r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*")


def sanitize(text: str) -> str:
    return _BAD.sub("_", text) or "_"


def _tag(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def server_part(server: str) -> str:
    """The server's part of its tools' names: the name itself when it can
    stand there, else a stand-in with a hash of the name."""
    if (_PLAIN_PART.fullmatch(server) and server.lower() != WORKSPACE
            and len(server) <= MAX_PART):
        return server
    squashed = re.sub(r"_+", "_", sanitize(server))[:MAX_PART - 9].strip("_") or "server"
    return f"{squashed}-{_tag(server)}"


def assign_names(server: str, names: Iterable[str], taken: set[str] | None = None,
                 *, workspace: bool = False) -> dict[str, str]:
    """original name -> exposed name for one server's tools (or prompts).
    `taken` holds names already given (other servers'); it is updated.
    `workspace`: the server comes from a workspace `.mcp.json`."""
    used = taken if taken is not None else set()
    result: dict[str, str] = {}
    origin = f"{WORKSPACE}__" if workspace else ""
    for original in names:
        if original in result:
            continue  # a server listing one name twice: the first wins
        head = f"{PREFIX}__{origin}{server_part(server)}__"
        tail = sanitize(original)
        salt = origin + server + NUL + original
        # Cut only in the tool's part: the head says whose tool it is.
        room = MAX_NAME - len(head) - 9
        full = head + tail
        candidate = full if len(full) <= MAX_NAME else f"{head}{tail[:room]}_{_tag(salt)}"
        attempt = 0
        while candidate in used:
            attempt += 1
            candidate = f"{head}{tail[:room]}_{_tag(salt + NUL + str(attempt))}"
        used.add(candidate)
        result[original] = candidate
    return result
