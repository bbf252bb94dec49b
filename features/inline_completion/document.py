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

    @property
    def indent(self) -> str:
        """The leading whitespace of the cursor's line."""
        stripped = self.line_prefix.lstrip(" \t")
        return self.line_prefix[: len(self.line_prefix) - len(stripped)]


def cursor_context(
    text: str, offset: int, *, max_prefix_chars: int, max_suffix_chars: int
) -> CursorContext:
    line_start = text.rfind("\n", 0, offset) + 1
    line_end = text.find("\n", offset)
    if line_end < 0:
        line_end = len(text)
    eol = "\r\n" if line_end > 0 and text[line_end - 1 : line_end] == "\r" else "\n"
    line_suffix = text[offset:line_end].rstrip("\r")

    # The window's start follows the cursor's line, not the cursor, in steps
    # of an eighth of the budget: it never moves while the user types within
    # a line and seldom from line to line, so an engine's prompt cache keeps
    # the prompt's beginning.
    step = max(1, max_prefix_chars // 8)
    start = max(0, line_start - max_prefix_chars + step)
    if start > 0:
        start = -(-start // step) * step
    if offset - start > max_prefix_chars:  # a long line: the budget from the cursor
        start = offset - max_prefix_chars
    if start > 0:
        # Begin at a line start inside the window (a line longer than the
        # whole budget keeps its tail).
        cut = text.find("\n", start, offset)
        if cut >= 0:
            start = cut + 1
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
