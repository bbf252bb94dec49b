"""Where an edit's old_string was probably meant to go: the lines of the file
most like it, numbered, so a model whose old_string is not in the file
(a small model retypes it from memory, with other indentation or a changed
word) can copy the real text instead of guessing again.

Every window of as many lines as old_string has is scored by the words and
symbols it shares with old_string (a sliding count, cheap), and difflib's
SequenceMatcher ratio (indentation aside) picks the best of the top
candidates, so a file of thousands of lines costs milliseconds.
"""

from __future__ import annotations

import difflib
import heapq
import re
from collections import Counter

__all__ = ["MIN_SIMILARITY", "nearest_lines"]

MIN_SIMILARITY = 0.4  # below this, nothing in the file is like old_string
_CONTEXT = 2  # lines shown before and after the match
_MAX_SHOWN = 40  # lines shown at most
_CANDIDATES = 24  # windows scored with the real ratio
_TOKEN = re.compile(r"\w+|[^\w\s]")


def _overlap(window: Counter[str], want: Counter[str]) -> int:
    return sum(min(count, window[token]) for token, count in want.items())


def nearest_lines(text: str, old: str, shown: str = "the file") -> str | None:
    """The lines of `text` closest to `old`, with 1-based line numbers and a
    sentence saying what they are; None when nothing is similar enough."""
    lines = text.splitlines()
    wanted = old.strip("\n").splitlines()
    if not lines or not wanted:
        return None
    size = min(len(wanted), len(lines))
    target = "\n".join(line.strip() for line in wanted)
    want = Counter(_TOKEN.findall(target))
    # Shared words and symbols first (cheap, and far more telling than
    # shared characters), over windows sliding one line at a time.
    per_line = [Counter(_TOKEN.findall(line)) for line in lines]
    window: Counter[str] = Counter()
    for line in per_line[:size]:
        window.update(line)
    scored = [(_overlap(window, want), 0)]
    for start in range(1, len(lines) - size + 1):
        window.subtract(per_line[start - 1])
        window.update(per_line[start + size - 1])
        scored.append((_overlap(window, want), start))
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(target)  # compared against every candidate: its index is built once
    best_ratio, best_start = 0.0, 0
    for _, start in heapq.nlargest(_CANDIDATES, scored):
        matcher.set_seq1("\n".join(line.strip() for line in lines[start:start + size]))
        ratio = matcher.ratio()
        if ratio > best_ratio or (ratio == best_ratio and start < best_start):
            best_ratio, best_start = ratio, start
    if best_ratio < MIN_SIMILARITY:
        return None
    first = max(0, best_start - _CONTEXT)
    last = min(len(lines), best_start + size + _CONTEXT, first + _MAX_SHOWN)
    width = len(str(last))
    numbered = "\n".join(f"{number:>{width}}| {lines[number - 1]}"
                         for number in range(first + 1, last + 1))
    span = (f"line {best_start + 1}" if size == 1
            else f"lines {best_start + 1}-{best_start + size}")
    return (f"The text most like old_string is at {span} of {shown} "
            f"({round(best_ratio * 100)}% similar); here it is with the lines around it, as "
            "the file has it now (the line numbers and '| ' are not part of the file):\n"
            f"{numbered}")
