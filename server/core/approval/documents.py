"""Questions too long for a message: their whole text as a document the
editor opens (a question never hides a byte that changes the answer;
docs/security.md, "Long questions: the whole text, never a cut").

The approval gate (core/approval/gate.py) asks every question through here:
the workspace-trust questions (core/trust/question.py), a tool call's
(an MCP call's arguments, a command line, an edit's whole diff), a
restore's, a hook's. A question whose text fits a message is sent whole;
a longer one is written to a file only the user can read in the state
directory (`QuestionDocuments`: folder 0700, file 0600, old files removed),
the editor is asked to open it (a `DocumentOpener`: window/showDocument in
the LSP layer), and the message is the question's short form plus a
sentence saying where the whole text is. It is never a cut that looks
complete. When no file can be written, the whole text is the message.

Characters that would not show as themselves (control characters other
than the line break, bidi overrides, zero-width characters) are escaped
as `<U+202E>` in both forms (`shown_question`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from agentls.core.trust.display import visible

__all__ = [
    "APPROVAL_QUESTIONS_FOLDER",
    "MESSAGE_MAX_CHARS",
    "MESSAGE_MAX_LINES",
    "DocumentOpener",
    "QuestionDocuments",
    "fits_message",
    "shown_question",
    "where_text",
]

log = logging.getLogger("agentls.questions")

# Longer questions go to a document the editor opens: a message this long is
# still shown whole by VS Code's notification and Neovim's prompt.
MESSAGE_MAX_CHARS = 1500
MESSAGE_MAX_LINES = 24
APPROVAL_QUESTIONS_FOLDER = "approval-questions"
# Old question files are removed when a new one is written: more than this
# many, or older than this.
KEEP_FILES = 50
MAX_AGE_SECONDS = 7 * 24 * 3600.0

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class DocumentOpener(Protocol):
    async def show_document(self, path: Path) -> bool:
        """Ask the editor to show this file; False when it could not."""
        ...


def shown_question(text: str) -> str:
    """`text` with every character that would not show as itself written
    as <U+XXXX>, line breaks kept (a tab or a carriage return is escaped)."""
    return "\n".join(line if line.isascii() and line.isprintable() else visible(line)
                     for line in text.split("\n"))


def fits_message(text: str, max_chars: int = MESSAGE_MAX_CHARS,
                 max_lines: int = MESSAGE_MAX_LINES) -> bool:
    return len(text) <= max_chars and text.count("\n") < max_lines


def where_text(document: Path, opened: bool) -> str:
    """The sentence of a short form that says where the whole text is."""
    shown = "is open in your editor" if opened else "is in this file"
    return (f"It is too long for this message: the whole text {shown}:\n\n"
            f"    {visible(str(document))}\n\nRead it before you answer.")


class QuestionDocuments:
    """Whole question texts as files only the user can read, in one folder
    of the state directory (created 0700 on first use). Writing one removes
    files older than `max_age` and all but the newest `keep`."""

    def __init__(self, folder: Path | Callable[[], Path | None] | None, *,
                 keep: int = KEEP_FILES, max_age: float = MAX_AGE_SECONDS) -> None:
        # A callable is asked on first use: finding the state directory
        # (platformdirs) is not work for the server's start-up.
        self._folder = folder
        self.keep = keep
        self.max_age = max_age

    @property
    def folder(self) -> Path | None:
        """None: nothing is written (no state directory)."""
        if callable(self._folder):
            self._folder = self._folder()
        return self._folder

    @staticmethod
    def name_for(subject: str, text: str) -> str:
        """A file name from what the question is about and its content."""
        stem = _UNSAFE_NAME.sub("_", subject).strip("._")[:60] or "question"
        import hashlib  # the first long question, not the server's start-up

        return f"{stem}-{hashlib.sha256(text.encode('utf-8', 'replace')).hexdigest()[:16]}"

    def write(self, name: str, text: str) -> Path | None:
        """`text` in `<folder>/<name>.txt` (0600, replaced whole); None when
        there is no folder or it failed (logged)."""
        if self.folder is None:
            return None
        from agentls.core.support.state_dir import ensure_private_dir

        folder = self.folder
        target = folder / f"{_UNSAFE_NAME.sub('_', name).strip('.') or 'question'}.txt"
        try:
            ensure_private_dir(folder)  # 0700, and the state dir above it
            import tempfile

            fd, tmp = tempfile.mkstemp(prefix=".question-", suffix=".txt", dir=folder)
            try:  # mkstemp creates it 0600
                with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as handle:
                    handle.write(text)
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            log.warning("Cannot write the question to %s: %s", folder, exc)
            return None
        self.prune(keep=target)
        return target

    def prune(self, keep: Path | None = None) -> None:
        """Remove old question files (never `keep`, never anything but this
        folder's own regular `.txt` files)."""
        if self.folder is None:
            return
        now = time.time()
        found: list[tuple[float, Path]] = []
        try:
            with os.scandir(self.folder) as entries:
                for entry in entries:
                    if not entry.name.endswith(".txt") or not entry.is_file(follow_symlinks=False):
                        continue
                    path = Path(entry.path)
                    if keep is not None and path == keep:
                        continue
                    found.append((entry.stat(follow_symlinks=False).st_mtime, path))
        except OSError as exc:
            log.debug("Cannot list %s: %s", self.folder, exc)
            return
        found.sort(reverse=True)  # newest first
        room = max(self.keep - (1 if keep is not None else 0), 0)
        for index, (mtime, path) in enumerate(found):
            if index >= room or now - mtime > self.max_age:
                with contextlib.suppress(OSError):
                    path.unlink()
