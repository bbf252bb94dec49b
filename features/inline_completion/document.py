"""Where the cursor is: LSP positions to text offsets, and the text around
the cursor that every later step (cache, prompt, post-processing) reads.

Runs on every inline completion request, so it only slices: no splitting of
the whole document into lines.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CursorContext", "PositionOutOfRange", "cursor_context", "offset_at"]


class PositionOutOfRange(ValueError):
    """The position names a line the document does not have."""


def offset_at(text: str, line: int, character: int, encoding: str = "utf-16") -> int:
    """The code-point offset of an LSP position in `text`.

    `character` counts code units of `encoding` ("utf-16", the LSP default,
    "utf-8" or "utf-32"). Lines end at "\\n" (a "\\r" before it belongs to
    the line ending). A character past the end of its line means the end of
    the line, as the LSP specification says; a line past the end of the
    document raises PositionOutOfRange.
    """
    if line < 0 or character < 0:
        raise PositionOutOfRange(f"line and character must not be negative ({line}:{character})")
    start = _line_start(text, line)
    if start < 0:
        count = text.count("\n") + 1
        raise PositionOutOfRange(f"line {line} is past the end of the document ({count} line(s))")
    end = text.find("\n", start)
    if end < 0:
        end = len(text)
    if end > start and text[end - 1] == "\r":
        end -= 1
    if character == 0:
        return start
    line_text = text[start:end]
    if line_text.isascii() or encoding == "utf-32":
        return start + min(character, len(line_text))
    return start + _code_points(line_text, character, encoding)


_STRIDE = 512  # characters counted at a time while skipping whole lines


def _line_start(text: str, line: int) -> int:
    """The offset where `line` starts, or -1. Skips blocks of lines with
    str.count (C speed) before walking the last few lines with find: about
    10x faster than a find per line on a file of thousands of lines."""
    position, remaining, size = 0, line, len(text)
    count = text.count
    while remaining:
        end = position + _STRIDE
        if end >= size:
            break
        newlines = count("\n", position, end)
        if newlines >= remaining:
            break
        remaining -= newlines
        position = end
    find = text.find
    for _ in range(remaining):
        position = find("\n", position) + 1
        if position == 0:
            return -1
    return position


def _code_points(line_text: str, units: int, encoding: str) -> int:
    """How many code points of `line_text` fill `units` code units."""
    counted = 0
    for index, char in enumerate(line_text):
        if counted >= units:
            return index
        point = ord(char)
        if encoding == "utf-8":
            counted += 1 if point < 0x80 else 2 if point < 0x800 else 3 if point < 0x10000 else 4
        else:  # utf-16
            counted += 2 if point >= 0x10000 else 1
    return len(line_text)


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

    start = max(0, offset - max_prefix_chars)
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
