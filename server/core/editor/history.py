"""The user's recent edits, per document: what next edit suggestions are
built from (docs/protocol.md, textDocument/copilotInlineEdit).

Fed from didChange. Keystrokes are coalesced into hunks: a change that
touches the most recent hunk of its document grows that hunk (typing a
word, backspacing into it), any other change starts a new one, and a hunk
whose text ends up as it was (typed, then deleted) disappears. Hunks keep
their place as the text around them moves. Changes made by the agent
(workspace/applyEdit) are tracked for positions but never become hunks: the
suggestion should follow what the user did, not repeat the agent.

Bounded: a few hunks per document, a cap on the text they hold, and a few
documents (the most recently edited). Pure Python, no LSP: the language
server hands over code-point offsets.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

__all__ = ["DocumentEdits", "EditHistory", "Hunk", "TextChange"]

MAX_HUNKS_PER_DOCUMENT = 16
MAX_CHARS_PER_DOCUMENT = 8192  # old + new text of every hunk of one document
MAX_HUNK_CHARS = 2048  # a bigger change (a paste) is kept as a clipped marker
MAX_DOCUMENTS = 8
# How long after an applyEdit a change carrying the agent's text is still the
# agent's (Neovim sends didChange up to ~150 ms after applying).
AGENT_ECHO_SECONDS = 3.0


@dataclass(frozen=True, slots=True)
class TextChange:
    """One content change in code points of the text it applies to."""

    start: int
    end: int
    text: str

    @classmethod
    def between(cls, before: str, after: str) -> TextChange:
        """The one change that turns `before` into `after`: what differs
        once their common head and tail are cut."""
        limit = min(len(before), len(after))
        head = 0
        while head < limit and before[head] == after[head]:
            head += 1
        tail = 0
        while tail < limit - head and before[-1 - tail] == after[-1 - tail]:
            tail += 1
        return cls(head, len(before) - tail, after[head : len(after) - tail])


@dataclass(slots=True)
class Hunk:
    start: int  # where `new` starts in the current text
    old: str  # the text before the user's change
    new: str  # the text now
    at: float  # monotonic time of the last keystroke in it
    clipped: bool = False  # too big to keep: `old`/`new` are cut, never merged or shown
    new_len: int = 0  # len of the full new text (differs from len(new) when clipped)

    @property
    def end(self) -> int:
        return self.start + self.new_len

    @property
    def size(self) -> int:
        return len(self.old) + len(self.new)


@dataclass(slots=True)
class DocumentEdits:
    uri: str
    hunks: list[Hunk] = field(default_factory=list)
    chars: int = 0

    def recount(self) -> None:
        self.chars = sum(h.size for h in self.hunks)


class EditHistory:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._documents: OrderedDict[str, DocumentEdits] = OrderedDict()
        self._agent_active: dict[str, int] = {}  # uri -> applyEdits in flight
        self._agent_texts: dict[str, list[tuple[str, float]]] = {}
        self._clock = clock

    # -- the agent's edits -------------------------------------------------------
    def agent_edit_started(self, uri: str, texts: Iterable[str]) -> None:
        """An applyEdit for `uri` is about to be sent: its changes are not the user's."""
        self._agent_active[uri] = self._agent_active.get(uri, 0) + 1
        until = self._clock() + AGENT_ECHO_SECONDS
        pending = self._agent_texts.setdefault(uri, [])
        pending.extend((text, until) for text in texts)

    def agent_edit_finished(self, uri: str) -> None:
        left = self._agent_active.get(uri, 0) - 1
        if left > 0:
            self._agent_active[uri] = left
        else:
            self._agent_active.pop(uri, None)
        until = self._clock() + AGENT_ECHO_SECONDS  # the echo may come after the answer
        pending = self._agent_texts.get(uri)
        if pending:
            self._agent_texts[uri] = [(text, until) for text, _ in pending]

    def _is_agent_change(self, uri: str, change: TextChange) -> bool:
        if self._agent_active.get(uri):
            return True
        pending = self._agent_texts.get(uri)
        if not pending:
            return False
        now = self._clock()
        pending[:] = [(text, until) for text, until in pending if until > now]
        if not pending:
            del self._agent_texts[uri]
            return False
        # Clients may send a smaller change than the edit (Neovim diffs
        # lines), so a part of the agent's text counts; a deletion counts
        # while an agent edit is pending.
        for index, (text, _) in enumerate(pending):
            if change.text == text:
                del pending[index]
                return True
            if not change.text or change.text in text:
                return True
        return False

    # -- recording ----------------------------------------------------------------
    def record(self, uri: str, before: str, changes: Iterable[TextChange]) -> None:
        """`changes` applied in order to `before` (each in the text the
        previous one produced), as one didChange carries them."""
        text = before
        changes = list(changes)
        for index, change in enumerate(changes):
            user = not self._is_agent_change(uri, change)
            self._apply(uri, text, change, user=user)
            if index < len(changes) - 1:  # the text the next change applies to
                text = text[: change.start] + change.text + text[change.end :]

    def forget(self, uri: str) -> None:
        """The document was closed: its offsets can no longer be followed."""
        self._documents.pop(uri, None)
        self._agent_texts.pop(uri, None)

    def _apply(self, uri: str, text: str, change: TextChange, *, user: bool) -> None:
        doc = self._documents.get(uri)
        if doc is None and not user:
            return
        if doc is None:
            doc = self._documents[uri] = DocumentEdits(uri)
        start, end, new = change.start, change.end, change.text
        delta = len(new) - (end - start)
        last = doc.hunks[-1] if doc.hunks else None
        touching = [h for h in doc.hunks if start <= h.end and end >= h.start]
        if user and last is not None and touching == [last] and not last.clipped \
                and last.size + len(new) + (end - start) <= MAX_HUNK_CHARS:
            self._merge(doc, last, text, change)
        else:
            for hunk in touching:  # overwritten by a new change or the agent: gone
                doc.hunks.remove(hunk)
            for hunk in doc.hunks:
                if hunk.start >= end:
                    hunk.start += delta
            if user and text[start:end] != new:
                doc.hunks.append(_new_hunk(start, text[start:end], new, self._clock()))
        if user:
            self._documents.move_to_end(uri)
        doc.recount()
        self._bound(doc)

    def _merge(self, doc: DocumentEdits, hunk: Hunk, text: str, change: TextChange) -> None:
        start, end = change.start, change.end
        merged_start, merged_end = min(start, hunk.start), max(end, hunk.end)
        # The original text of the merged span: what lies outside the hunk is
        # still original; inside it, the hunk remembers.
        old = text[merged_start : hunk.start] + hunk.old + text[hunk.end : merged_end]
        new = text[merged_start:start] + change.text + text[end:merged_end]
        delta = len(change.text) - (end - start)
        for other in doc.hunks:
            if other is not hunk and other.start >= end:
                other.start += delta
        if old == new:  # typed and deleted again: nothing happened
            doc.hunks.remove(hunk)
            return
        hunk.start, hunk.old, hunk.new, hunk.new_len = merged_start, old, new, len(new)
        hunk.at = self._clock()

    def _bound(self, doc: DocumentEdits) -> None:
        while doc.hunks and (len(doc.hunks) > MAX_HUNKS_PER_DOCUMENT
                             or doc.chars > MAX_CHARS_PER_DOCUMENT):
            dropped = doc.hunks.pop(0)
            doc.chars -= dropped.size
        if not doc.hunks:
            self._documents.pop(doc.uri, None)
        while len(self._documents) > MAX_DOCUMENTS:
            self._documents.popitem(last=False)

    # -- reading --------------------------------------------------------------------
    def hunks(self, uri: str) -> list[Hunk]:
        doc = self._documents.get(uri)
        return list(doc.hunks) if doc else []

    def recent(self, limit: int = 8) -> list[tuple[str, Hunk]]:
        """The newest `limit` hunks over every document, oldest first."""
        found = [(doc.uri, hunk) for doc in self._documents.values() for hunk in doc.hunks]
        found.sort(key=lambda item: item[1].at)
        return found[-limit:]

    def last(self) -> tuple[str, Hunk] | None:
        recent = self.recent(1)
        return recent[0] if recent else None

    def documents(self) -> list[str]:
        """URIs with edits, most recently edited last."""
        return list(self._documents)

    def __len__(self) -> int:
        return sum(len(doc.hunks) for doc in self._documents.values())


def _new_hunk(start: int, old: str, new: str, at: float) -> Hunk:
    if len(old) + len(new) > MAX_HUNK_CHARS:
        return Hunk(start, old[:64], new[:64], at, clipped=True, new_len=len(new))
    return Hunk(start, old, new, at, new_len=len(new))
