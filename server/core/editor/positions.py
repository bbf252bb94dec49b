"""LSP positions and text offsets: a position's character counts code units
of the negotiated encoding ("utf-16", the LSP default, "utf-8" or
"utf-32"); Python strings count code points. One place for the conversions
the inline completion, next edit and file tool paths all need.

Lines end at "\\n", "\\r\\n" or a lone "\\r", as the LSP specification
says (and as the file tools' PositionMap, features/tools/files.py, counts
them). The common texts, without a lone "\\r", take a fast path that looks
only for "\\n".
"""

from __future__ import annotations

import re

__all__ = ["PositionOutOfRange", "code_units", "offset_at", "position_at"]


class PositionOutOfRange(ValueError):
    """The position names a line the document does not have."""


def offset_at(text: str, line: int, character: int, encoding: str = "utf-16") -> int:
    """The code-point offset of an LSP position in `text`.

    `character` counts code units of `encoding` ("utf-16", the LSP default,
    "utf-8" or "utf-32"). Lines end at "\\n", "\\r\\n" or a lone "\\r". A
    character past the end of its line means the end of the line, as the LSP
    specification says; a line past the end of the document raises
    PositionOutOfRange.
    """
    if line < 0 or character < 0:
        raise PositionOutOfRange(f"line and character must not be negative ({line}:{character})")
    if _has_lone_cr(text):
        start, end = _line_bounds(text, line)
    else:
        start = _line_start(text, line)
        if start < 0:
            count = text.count("\n") + 1
            raise PositionOutOfRange(
                f"line {line} is past the end of the document ({count} line(s))")
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
_BREAK = re.compile(r"\r\n|\r|\n")


def _has_lone_cr(text: str) -> bool:
    """Whether some "\\r" is a line break of its own (two C-speed counts)."""
    returns = text.count("\r")
    return returns > 0 and returns != text.count("\r\n")


def _line_bounds(text: str, line: int) -> tuple[int, int]:
    """(start, end without the line break) of `line`, every kind of break
    counted; the slow path for texts with a lone "\\r"."""
    start, seen = 0, 0
    for match in _BREAK.finditer(text):
        if seen == line:
            return start, match.start()
        start, seen = match.end(), seen + 1
    if seen == line:
        return start, len(text)
    raise PositionOutOfRange(
        f"line {line} is past the end of the document ({seen + 1} line(s))")


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


def position_at(text: str, offset: int, encoding: str = "utf-16") -> tuple[int, int]:
    """The LSP (line, character) of a code-point offset, `character` in
    code units of `encoding`."""
    offset = max(0, min(offset, len(text)))
    if _has_lone_cr(text):
        breaks = [match for match in _BREAK.finditer(text, 0, offset)]
        line, start = len(breaks), breaks[-1].end() if breaks else 0
    else:
        line = text.count("\n", 0, offset)
        start = text.rfind("\n", 0, offset) + 1
    return line, code_units(text[start:offset], encoding)


def code_units(text: str, encoding: str = "utf-16") -> int:
    """Length of `text` in the code units of an LSP position encoding."""
    if text.isascii():
        return len(text)
    kind = str(encoding).lower()
    if kind == "utf-8":
        return len(text.encode("utf-8", "surrogatepass"))
    if kind == "utf-32":
        return len(text)
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)
