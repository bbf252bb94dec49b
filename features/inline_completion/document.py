"""The text around the cursor that every later step (cache, prompt,
post-processing) reads (LSP positions to offsets: agentls.core.editor.positions).

Runs on every inline completion request, so it only slices: no splitting of
the whole document into lines.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CursorContext", "cursor_context"]


@dataclass(frozen=True, slots=True)
class CursorContext:
    """The text around the cursor within the character budgets.

    `prefix` and `suffix` start and end on line boundaries when cut, so a
    model never sees half a line at the edge of its window.
    """

    offset: int  # code points from the start of the document
    prefix: str  # up to the budget, ending at the cursor
    suffix: str  # up to the budget, starting at the cursor
    line_prefix: str  # the cursor's line before the cursor
    line_suffix: str  # the cursor's line after the cursor (no line ending)
    eol: str = "\n"  # the document's line ending

    @property
    def mid_line(self) -> bool:
        """Code follows the cursor on its line: complete that line only."""
        return bool(self.line_suffix.strip())

    def within(self, max_prefix_chars: int) -> CursorContext:
        """This context with its prefix cut to `max_prefix_chars` the way
        cursor_context cuts it (room taken by neighbour snippets)."""
        if len(self.prefix) <= max_prefix_chars:
            return self
        base = self.offset - len(self.prefix)
        line_start = len(self.prefix) - len(self.line_prefix)
        start = window_start(self.prefix, base, line_start, len(self.prefix), max_prefix_chars)
        prefix = self.prefix[start:]
        return CursorContext(self.offset, prefix, self.suffix,
                             self.line_prefix[max(0, len(self.line_prefix) - len(prefix)):],
                             self.line_suffix, self.eol)

    @property
    def indent(self) -> str:
        """The leading whitespace of the cursor's line."""
        stripped = self.line_prefix.lstrip(" \t")
        return self.line_prefix[: len(self.line_prefix) - len(stripped)]


def window_start(text: str, base: int, line_start: int, offset: int, budget: int) -> int:
    """Where a prefix window of at most `budget` characters before `offset`
    starts in `text`, whose first character is at document position `base`.

    The start follows the cursor's line, not the cursor, in steps of an
    eighth of the budget counted in document positions: it never moves while
    the user types within a line and seldom from line to line, so an
    engine's prompt cache keeps the prompt's beginning. It begins at a line
    start (a line longer than the whole budget keeps its tail)."""
    step = max(1, budget // 8)
    start = max(0, base + line_start - budget + step)
    if start > 0:
        start = -(-start // step) * step
    start = max(0, start - base)
    if offset - start > budget:  # a long line: the budget from the cursor
        start = offset - budget
    if start > 0:
        cut = text.find("\n", start - 1, offset)
        if cut >= 0:
            start = cut + 1
    return start


def cursor_context(
    text: str, offset: int, *, max_prefix_chars: int, max_suffix_chars: int
) -> CursorContext:
    line_start = text.rfind("\n", 0, offset) + 1
    line_end = text.find("\n", offset)
    if line_end < 0:
        line_end = len(text)
    eol = "\r\n" if line_end > 0 and text[line_end - 1 : line_end] == "\r" else "\n"
    line_suffix = text[offset:line_end].rstrip("\r")

    start = window_start(text, 0, line_start, offset, max_prefix_chars)
    end = min(len(text), offset + max_suffix_chars)
    if end < len(text):
        cut = text.rfind("\n", offset, end)
        if cut >= 0:
            end = cut + 1
    return CursorContext(
        offset=offset,
        prefix=text[start:offset],
        suffix=text[offset:end],
        line_prefix=text[max(line_start, start) : offset],
        line_suffix=line_suffix,
        eol=eol,
    )
