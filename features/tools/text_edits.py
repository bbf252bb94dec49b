"""Text edits the file tools build (features/tools/files.py): LSP
positions in any encoding (`PositionMap`), the minimal replacements turning
one text into another (`diff_regions`, `text_edits`), the lines they touch,
exact string replacements (`apply_string_edits`) and bounded unified-diff
previews (`unified_preview`). Pure functions of their inputs."""

from __future__ import annotations

import bisect
import difflib
import re
from dataclasses import dataclass
from typing import Any

from agentls.core.editor.positions import code_units
from agentls.core.tools.contract import ToolRefused
from agentls.features.tools.near_match import nearest_lines

__all__ = [
    "PREVIEW_MAX_CHARS",
    "PREVIEW_MAX_LINES",
    "PositionMap",
    "Replacement",
    "StringEdit",
    "all_lines",
    "apply_string_edits",
    "bounded",
    "changed_line_ranges",
    "diff_regions",
    "preview_lines",
    "text_edits",
    "unified_diff",
    "unified_preview",
]

PREVIEW_MAX_LINES = 120
PREVIEW_MAX_CHARS = 6000
_DIFF_MAX_LINES = 20_000  # beyond this, the changed middle is one edit (no line diff)

# LSP line breaks: \r\n, \r and \n (not the other characters str.splitlines knows).
_BREAK = re.compile(r"\r\n|\r|\n")


# --------------------------------------------------------------------------- positions


class PositionMap:
    """Offsets (code points) in a text -> LSP positions {line, character}."""

    def __init__(self, text: str, encoding: str = "utf-16") -> None:
        self.text = text
        self.encoding = encoding
        self.starts = [0, *(m.end() for m in _BREAK.finditer(text))]

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1

    def position(self, offset: int) -> dict[str, int]:
        line = self.line_of(offset)
        segment = self.text[self.starts[line] : offset]
        return {"line": line, "character": code_units(segment, self.encoding)}

    @property
    def last_line(self) -> int:
        return len(self.starts) - 1


# --------------------------------------------------------------------------- minimal edits


@dataclass(frozen=True)
class Replacement:
    """old[start:end] becomes new[new_start:new_end]."""

    start: int
    end: int
    new_start: int
    new_end: int


def _common_prefix(a: str, b: str, limit: int) -> int:
    n = 0
    while n < limit and a[n] == b[n]:
        n += 1
    return n


def _common_suffix(a: str, b: str, limit: int) -> int:
    n = 0
    while n < limit and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def _chunks(text: str) -> list[str]:
    return [m.group(0) for m in re.finditer(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+", text)]


def diff_regions(old: str, new: str) -> list[Replacement]:
    """The regions of `old` to replace so that it becomes `new`: sorted,
    non-overlapping, none of them starting or ending between the \\r and
    \\n of a CRLF (LSP cannot address that position).

    Whole lines are compared first (so an inserted line is one insertion at
    a line start), then each changed block is trimmed to the characters
    that really differ."""
    if old == new:
        return []
    limit = min(len(old), len(new))
    starts = PositionMap(old).starts
    # The shared head and tail, cut back to line starts of `old`.
    p = _common_prefix(old, new, limit)
    p = starts[bisect.bisect_right(starts, p) - 1]
    s = _common_suffix(old, new, limit - p)
    index = bisect.bisect_left(starts, len(old) - s)
    q = starts[index] if index < len(starts) else len(old)
    s = len(old) - q
    a, b = old[p:q], new[p : len(new) - s]
    a_lines, b_lines = _chunks(a), _chunks(b)
    blocks: list[Replacement] = []
    if len(a_lines) + len(b_lines) > _DIFF_MAX_LINES or not a_lines or not b_lines:
        blocks.append(Replacement(p, q, p, len(new) - s))
    else:
        a_off = [0]
        for line in a_lines:
            a_off.append(a_off[-1] + len(line))
        b_off = [0]
        for line in b_lines:
            b_off.append(b_off[-1] + len(line))
        matcher = difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=len(a_lines) > 2000)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "replace" and i2 - i1 == j2 - j1:
                # As many lines on both sides: line by line (one edit per
                # changed line rather than one for the block).
                blocks.extend(Replacement(p + a_off[i], p + a_off[i + 1],
                                          p + b_off[j], p + b_off[j + 1])
                              for i, j in zip(range(i1, i2), range(j1, j2), strict=True))
            elif tag != "equal":
                blocks.append(Replacement(p + a_off[i1], p + a_off[i2],
                                          p + b_off[j1], p + b_off[j2]))
    return _merge(_fix_crlf(old, _trim(old, new, block)) for block in blocks)


def _trim(old: str, new: str, r: Replacement) -> Replacement:
    """Drop what both sides of a block still share at either end."""
    start, end, new_start, new_end = r.start, r.end, r.new_start, r.new_end
    head = _common_prefix(old[start:end], new[new_start:new_end],
                          min(end - start, new_end - new_start))
    start, new_start = start + head, new_start + head
    tail = _common_suffix(old[start:end], new[new_start:new_end],
                          min(end - start, new_end - new_start))
    return Replacement(start, end - tail, new_start, new_end - tail)


def _fix_crlf(old: str, r: Replacement) -> Replacement:
    start, end, new_start, new_end = r.start, r.end, r.new_start, r.new_end
    # The characters just outside a region are shared by both texts, so
    # widening both sides by the same character keeps them equivalent.
    if 0 < start < len(old) and old[start - 1] == "\r" and old[start] == "\n":
        start, new_start = start - 1, new_start - 1
    if 0 < end < len(old) and old[end - 1] == "\r" and old[end] == "\n":
        end, new_end = end + 1, new_end + 1
    return Replacement(start, end, new_start, new_end)


def _merge(regions: Any) -> list[Replacement]:
    merged: list[Replacement] = []
    for r in regions:
        if merged and r.start <= merged[-1].end:
            last = merged[-1]
            merged[-1] = Replacement(last.start, max(last.end, r.end), last.new_start,
                                     max(last.new_end, r.new_end))
        else:
            merged.append(r)
    return merged


def text_edits(
    old: str, new: str, encoding: str = "utf-16", regions: list[Replacement] | None = None
) -> list[dict[str, Any]]:
    """Minimal LSP TextEdits turning `old` into `new` (ranges refer to `old`)."""
    positions = PositionMap(old, encoding)
    return [
        {
            "range": {"start": positions.position(r.start), "end": positions.position(r.end)},
            "newText": new[r.new_start : r.new_end],
        }
        for r in (diff_regions(old, new) if regions is None else regions)
    ]


def changed_line_ranges(new: str, regions: list[Replacement]) -> list[list[int]]:
    """0-based inclusive line ranges of `new` that the replacements touched
    (a pure deletion touches the line it happened on)."""
    positions = PositionMap(new)
    ranges: list[list[int]] = []
    for r in regions:
        first = positions.line_of(r.new_start)
        last = positions.line_of(max(r.new_start, r.new_end - 1))
        if ranges and first <= ranges[-1][1] + 1:
            ranges[-1][1] = max(ranges[-1][1], last)
        else:
            ranges.append([first, last])
    return ranges


def all_lines(text: str) -> list[list[int]]:
    if not text:
        return []
    positions = PositionMap(text)
    last = positions.line_of(len(text) - 1)
    return [[0, last]]


# --------------------------------------------------------------------------- string edits


@dataclass(frozen=True)
class StringEdit:
    old_string: str
    new_string: str
    replace_all: bool = False


def apply_string_edits(text: str, edits: list[StringEdit], shown: str = "the file") -> str:
    """Apply exact replacements in order, each to the result of the previous
    one; all or nothing (ToolRefused with code not_found / ambiguous /
    invalid_arguments)."""
    for index, edit in enumerate(edits):
        where = f"edits[{index}]: " if len(edits) > 1 else ""
        old, new = edit.old_string, edit.new_string
        if old == "":
            raise ToolRefused(
                f"{where}old_string is empty. Give the exact text to replace; to create a file "
                "or replace all of its content use write_file.", "invalid_arguments")
        if old == new:
            raise ToolRefused(f"{where}old_string and new_string are the same; nothing to "
                               "change.", "invalid_arguments")
        first = text.find(old)
        if first < 0 and "\r\n" in text and "\n" in old and "\r" not in old:
            # The model writes \n; the file uses CRLF: match it as the user sees it.
            old, new = old.replace("\n", "\r\n"), new.replace("\r\n", "\n").replace("\n", "\r\n")
            first = text.find(old)
        if first < 0:
            swapped = _other_quotes(text, old)
            if swapped is not None:
                old, first = swapped, text.find(swapped)
        if first < 0:
            near = nearest_lines(text, old, shown)
            raise ToolRefused(
                f"{where}old_string was not found in {shown}. Nothing was changed. "
                + (f"{near}\nCopy the exact text to replace from these lines, including "
                   "whitespace and indentation." if near else
                   "Nothing in the file is like it: read the file again (read_file) and copy "
                   "the exact text to replace, including whitespace and indentation."),
                "not_found")
        if edit.replace_all:
            text = text.replace(old, new)
            continue
        if text.find(old, first + 1) >= 0:
            count = max(text.count(old), 2)
            raise ToolRefused(
                f"{where}old_string was found {count} times in {shown}, so the edit is "
                "ambiguous. Nothing was changed. Add surrounding lines to old_string so it "
                "matches exactly once, or set replace_all: true to replace every occurrence.",
                "ambiguous")
        text = text[:first] + new + text[first + len(old) :]
    return text


def _other_quotes(text: str, old: str) -> str | None:
    """The one passage of `text` that equals `old` but for its quote
    characters (`'` for `"` or the reverse: small models rewrite a line's
    quotes when they copy it), or None (no such passage, or several)."""
    if "'" not in old and '"' not in old:
        return None
    pattern = re.compile("".join("[\"']" if c in "'\"" else re.escape(c) for c in old))
    found = pattern.findall(text)
    return found[0] if len(found) == 1 else None


# --------------------------------------------------------------------------- previews


def preview_lines(text: str) -> list[str]:
    lines = _BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def bounded(lines: list[str]) -> str:
    shown: list[str] = []
    size = 0
    for index, line in enumerate(lines):
        if index >= PREVIEW_MAX_LINES or size + len(line) + 1 > PREVIEW_MAX_CHARS:
            shown.append(f"... ({len(lines) - index} more lines of diff not shown)")
            break
        shown.append(line)
        size += len(line) + 1
    return "\n".join(shown)


def unified_diff(old_name: str | None, new_name: str | None, old: str, new: str) -> str:
    """The whole unified diff (what an approval question shows); None names
    mean /dev/null (a created or deleted file)."""
    lines = list(difflib.unified_diff(
        preview_lines(old), preview_lines(new),
        fromfile=f"a/{old_name}" if old_name else "/dev/null",
        tofile=f"b/{new_name}" if new_name else "/dev/null",
        lineterm="", n=3,
    ))
    if not lines:
        return f"(no changes to {new_name or old_name})"
    return "\n".join(lines)


def unified_preview(old_name: str | None, new_name: str | None, old: str, new: str) -> str:
    """A unified diff bounded in lines and characters (a transcript's or
    the editor's review preview)."""
    return bounded(unified_diff(old_name, new_name, old, new).split("\n"))
