"""Context from other open documents of the same language.

Each open document is cut into windows of a few lines, and each window is
indexed by the identifiers it uses; a completion prompt gets the windows
that share the most identifiers with the lines just before the cursor (the
"neighbouring tabs" idea). The index of a document is rebuilt only when its
version changes, so while the user types in one file the others cost a few
set intersections per provider call, and nothing on a cache hit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from agentls.core.editor.inline_completion import OpenDocument

__all__ = ["NeighbourIndex", "Snippet", "display_path"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
# Words too common to say anything about relatedness.
_STOP = frozenset(
    "the and for def class return import from self this let const var function "
    "int str none true false null void public private static new not".split()
)
WINDOW_LINES = 12
QUERY_LINES = 10
MAX_DOCUMENTS = 5  # the most recently given ones
MAX_DOCUMENT_CHARS = 200_000  # bigger files (generated, minified) are skipped


@dataclass(frozen=True, slots=True)
class Snippet:
    path: str  # for display in the prompt
    text: str
    score: int


@dataclass(frozen=True, slots=True)
class _Window:
    text: str
    identifiers: frozenset[str]


def display_path(uri: str) -> str:
    """The last two segments of a document's path (`pkg/mod.py`)."""
    path = unquote(urlsplit(uri).path) or uri
    return "/".join([part for part in path.split("/") if part][-2:]) or uri


def _identifiers(text: str) -> frozenset[str]:
    return frozenset(_IDENTIFIER.findall(text)) - _STOP


class NeighbourIndex:
    def __init__(self, *, max_entries: int = 32) -> None:
        self._windows: dict[str, tuple[int | None, int, list[_Window]]] = {}
        self._max_entries = max_entries

    def snippets(
        self, before_cursor: str, documents: Iterable[OpenDocument], budget_chars: int
    ) -> list[Snippet]:
        """The best windows of `documents` for the code before the cursor,
        best first, together at most `budget_chars` long."""
        if budget_chars <= 0:
            return []
        # The lines before the cursor's own: the choice (the prompt's first
        # text) stays the same while the user types within a line, so the
        # engine's prompt cache keeps it.
        head = before_cursor[-4000:]
        head = head[: head.rfind("\n") + 1] or head  # on a first line, that line
        tail = head.split("\n")[-QUERY_LINES - 1:]
        query = _identifiers("\n".join(tail))
        if not query:
            return []
        scored: list[tuple[int, int, str, str]] = []
        for rank, document in enumerate(documents):
            if rank >= MAX_DOCUMENTS:
                break
            path = display_path(document.uri)
            for window in self._index(document):
                score = len(query & window.identifiers)
                if score:
                    scored.append((score, -rank, path, window.text))
        scored.sort(reverse=True)
        chosen: list[Snippet] = []
        used = 0
        for score, _, path, text in scored:
            cost = len(text) + len(path) + 16
            if used + cost > budget_chars:
                continue
            chosen.append(Snippet(path, text, score))
            used += cost
        return chosen

    def _index(self, document: OpenDocument) -> list[_Window]:
        if len(document.text) > MAX_DOCUMENT_CHARS:
            return []
        cached = self._windows.get(document.uri)
        if cached is not None and cached[0] == document.version and cached[1] == len(
            document.text
        ):
            return cached[2]
        lines = document.text.split("\n")
        windows = []
        for start in range(0, len(lines), WINDOW_LINES):
            text = "\n".join(lines[start : start + WINDOW_LINES]).strip("\n")
            if text.strip():
                windows.append(_Window(text, _identifiers(text)))
        if len(self._windows) >= self._max_entries:
            self._windows.pop(next(iter(self._windows)))
        self._windows[document.uri] = (document.version, len(document.text), windows)
        return windows
