"""The contract for sending a file's text to the model without read_file.

read_file asks before a secret file (`.env`, keys, `.git/config`, ...) is
read; every other way a file's text reaches the model (project instruction
files, `@file:` mentions, templates, MCP resources, next-edit context) must
apply the same rule, or a symlink named `AGENTS.md` or a mention inside
pasted code sends the secret with no question. The rule itself is policy
and lives with the list of secret paths (features/policy/sensitive.py,
`ModelFileAccess`); the core only holds the types, so core code such as
`instructions.py` takes a `ModelFileReader` and never opens a file on its
own.

A file the rule keeps back is a `Withheld` with a sentence saying why; the
caller shows that sentence (to the agent, the user, or both) instead of the
text, never skipping the file silently.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = ["ModelFile", "ModelFileReader", "ReadableFile", "Withheld"]


@dataclass(frozen=True)
class ReadableFile:
    """A path the rule lets through: where it really leads."""

    path: Path  # the real path (symlinks resolved)
    rel: str  # relative to its workspace folder ("/"-separated), or absolute when unconfined


@dataclass(frozen=True)
class ModelFile:
    """A file's text, read after the rule let it through."""

    path: Path  # the real path
    rel: str
    text: str
    size: int  # bytes on disk
    truncated: bool  # longer than the bytes asked for


@dataclass(frozen=True)
class Withheld:
    """A file whose text does not go to the model, and why (a whole
    sentence, fit for the user and the agent)."""

    shown: str  # the path as the caller named it
    reason: str


class ModelFileReader(Protocol):
    def check(self, path: str | os.PathLike[str], *, confine: bool = True
              ) -> ReadableFile | Withheld:
        """Whether `path`'s text may go to the model without a question
        (`confine=False`: an editor buffer the user opened outside the
        workspace; only the secret rule applies)."""
        ...

    def read_for_model(self, path: str | os.PathLike[str], *, max_bytes: int
                       ) -> ModelFile | Withheld | None:
        """The file's text (at most `max_bytes`), a Withheld, or None when
        there is no regular file to read."""
        ...
