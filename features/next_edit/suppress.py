"""Which suggested edits are not worth showing.

- no-ops (the text in the range already is the new text), and edits that
  only change whitespace (a model copying the region drops a blank line);
- an edit that only undoes the user's last change (models like to "fix"
  what was just typed back to what it was), or all of them together doing
  that;
- an edit inside the suffix the user is typing: at or after the cursor on
  the cursor's line, which is inline completion's place, and a suggestion
  there would fight the ghost text;
- an edit over the text the user just typed;
- an edit that does not carry the user's recent edits on: it neither brings
  in a name the user brought in nor takes out one the user took out. Next
  edits carry a change through; a model that "improves" unrelated code (a
  small one turning `*` into `/`, or adding a line of its own) is not
  suggesting one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from agentls.core.editor.history import Hunk
from agentls.core.editor.next_edit import SuggestedEdit

__all__ = ["apply_edits", "worth_showing"]


def apply_edits(text: str, edits: Sequence[SuggestedEdit]) -> str:
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        text = text[: edit.start] + edit.text + text[edit.end :]
    return text


_TOKEN = re.compile(r"\w+|[^\w\s]+")
_NAME = re.compile(r"[A-Za-z_]\w*|\d+")


def tokens(texts: Iterable[str]) -> set[str]:
    return {token for text in texts for token in _TOKEN.findall(text)}


def _names(text: str) -> set[str]:
    return set(_NAME.findall(text))


class _Relevance:
    """Whether an edit carries the user's change on: it brings in a name
    (or number) the user brought in, or takes out one the user took out.
    When the user's edits changed no names (an operator, punctuation), any
    shared token will do."""

    def __init__(self, recent: Sequence[Hunk]) -> None:
        self.added: set[str] = set()
        self.removed: set[str] = set()
        for hunk in recent:
            if hunk.clipped:
                continue
            old, new = _names(hunk.old), _names(hunk.new)
            self.added |= new - old
            self.removed |= old - new
        self.symbols = tokens(part for hunk in recent if not hunk.clipped
                              for part in (hunk.old, hunk.new))
        self.active = bool(recent)

    def __call__(self, old: str, new: str) -> bool:
        if not self.active:
            return True
        if self.added or self.removed:
            before, after = _names(old), _names(new)
            return bool((after - before) & self.added or (before - after) & self.removed)
        return bool(tokens((old, new)) & self.symbols)


def worth_showing(
    edits: Sequence[SuggestedEdit], text: str, cursor: int, last: Hunk | None,
    recent: Sequence[Hunk] = (),
) -> tuple[list[SuggestedEdit], str]:
    """The edits to show (possibly none) and, when some were dropped, why.
    `recent`: the user's recent hunks (all documents); none means the
    relevance rule does not apply."""
    relevant = _Relevance(recent)
    line_end = text.find("\n", cursor)
    if line_end < 0:
        line_end = len(text)
    kept: list[SuggestedEdit] = []
    why = ""
    for edit in edits:
        if text[edit.start : edit.end] == edit.text:
            why = why or "no-op"
            continue
        if "".join(text[edit.start : edit.end].split()) == "".join(edit.text.split()):
            why = why or "whitespace only"  # a model that dropped a blank line
            continue
        if cursor <= edit.start <= line_end:
            why = why or "inside the suffix being typed"
            continue
        if last is not None and not last.clipped and _overlaps(edit, last):
            why = why or "over the text just typed"
            continue
        if not relevant(text[edit.start : edit.end], edit.text):
            why = why or "unrelated to the recent edits"
            continue
        kept.append(edit)
    if kept and last is not None and not last.clipped:
        undone = text[: last.start] + last.old + text[last.end :]
        if apply_edits(text, kept) == undone:
            return [], "it undoes the last edit"
    if not kept and not why:
        why = "no change"
    return kept, why


def _overlaps(edit: SuggestedEdit, hunk: Hunk) -> bool:
    if edit.start == edit.end:  # an insertion strictly inside the typed text
        return hunk.start < edit.start < hunk.end
    return edit.start < hunk.end and edit.end > hunk.start
