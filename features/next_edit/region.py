"""The editable region: the whole lines around the cursor that the model
may rewrite, and the read-only context around them.

The region is small on purpose: the model answers with all of it, so its
size is the answer's length (latency), and a small region keeps a weak
model from wandering. The matching edit a few lines away (the call site of
a renamed parameter) is what it is for.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CURSOR_MARKER", "EditableRegion", "editable_region", "line_of"]

CURSOR_MARKER = "<|user_cursor|>"
LINES_BEFORE = 6
LINES_AFTER = 12
MAX_REGION_CHARS = 2400
CONTEXT_CHARS = 2000  # read-only text shown before and after the region


@dataclass(frozen=True, slots=True)
class EditableRegion:
    start: int  # offsets in the document, on line starts
    end: int
    text: str  # document[start:end]
    cursor: int  # the cursor, relative to start
    before: str  # read-only context ending at start
    after: str  # read-only context starting at end
    first_line: int  # 0-based line number of start

    @property
    def marked(self) -> str:
        """The region with the cursor marker."""
        return self.text[: self.cursor] + CURSOR_MARKER + self.text[self.cursor :]


def editable_region(
    text: str,
    offset: int,
    *,
    lines_before: int = LINES_BEFORE,
    lines_after: int = LINES_AFTER,
    max_chars: int = MAX_REGION_CHARS,
    context_chars: int = CONTEXT_CHARS,
) -> EditableRegion:
    start = text.rfind("\n", 0, offset) + 1
    for _ in range(lines_before):
        if start == 0:
            break
        previous = text.rfind("\n", 0, start - 1) + 1
        if offset - previous > max_chars // 2:
            break
        start = previous
    end = text.find("\n", offset)
    end = len(text) if end < 0 else end + 1
    for _ in range(lines_after):
        if end >= len(text):
            break
        following = text.find("\n", end)
        following = len(text) if following < 0 else following + 1
        if following - start > max_chars:
            break
        end = following
    before = text[max(0, start - context_chars) : start]
    if start - context_chars > 0:
        cut = before.find("\n")
        before = before[cut + 1 :] if cut >= 0 else before
    after = text[end : end + context_chars]
    if end + context_chars < len(text):
        cut = after.rfind("\n")
        after = after[: cut + 1] if cut >= 0 else after
    return EditableRegion(
        start=start,
        end=end,
        text=text[start:end],
        cursor=offset - start,
        before=before,
        after=after,
        first_line=text.count("\n", 0, start),
    )


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset)


