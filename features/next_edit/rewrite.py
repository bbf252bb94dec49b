"""From the model's answer to edits: pull the rewritten region out of the
answer, refuse answers that are not a rewrite of that region (garbage, the
whole file, another part of it), and turn the rewrite into the smallest
edits that produce it.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

from agentls.core.editor.next_edit import SuggestedEdit
from agentls.features.next_edit.prompt import REGION_END, REGION_START
from agentls.features.next_edit.region import CURSOR_MARKER, EditableRegion

__all__ = ["extract_rewrite", "minimal_edits", "similarity"]

MIN_SIMILARITY = 0.6  # below this the answer is about something else
_FENCE = re.compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.S)
_MARKUP = re.compile(r"<\|[a-z_]+\|>")


def extract_rewrite(answer: str, region: EditableRegion) -> tuple[str | None, str]:
    """(the rewritten region, "") or (None, why it is not one)."""
    text = answer
    start = text.find(REGION_START)
    if start >= 0:
        text = text[start + len(REGION_START) :]
        if text.startswith("\n"):
            text = text[1:]
    end = text.find(REGION_END)
    if end >= 0:
        text = text[:end]
    elif start < 0:
        fenced = _FENCE.search(text)
        if fenced:
            text = fenced.group(1)
    text = text.replace(CURSOR_MARKER, "")
    if _MARKUP.search(text):
        return None, "the answer holds prompt markup"
    original = region.text
    if original.endswith("\n") and not text.endswith("\n") and text:
        text += "\n"
    if original.endswith("\n") and text.endswith("\n\n") and not original.endswith("\n\n"):
        text = text.rstrip("\n") + "\n"  # a chat model's trailing blank line
    if not text.strip() and original.strip():
        return None, "the answer is empty"
    old_lines = original.count("\n")
    new_lines = text.count("\n")
    if new_lines > old_lines + max(6, old_lines // 2):
        return None, "the answer is much longer than the region (the whole file?)"
    if text == original:
        return text, ""
    if similarity(original, text) < MIN_SIMILARITY:
        return None, "the answer is not a rewrite of the region"
    return text, ""


def similarity(old: str, new: str) -> float:
    """How much of `old` survives in `new`, 0..1: lines matched as lines,
    and changed lines compared character by character pairwise (a ratio over
    the whole text by characters costs milliseconds for a 20-line region)."""
    a = old.split("\n")
    b = new.split("\n")
    matched = 0.0
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            matched += i2 - i1
        elif tag == "replace":
            for x, y in zip(a[i1:i2], b[j1:j2], strict=False):
                matched += SequenceMatcher(None, x, y, autojunk=False).ratio()
    return matched / max(len(a), len(b))


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def minimal_edits(old: str, new: str, base: int) -> list[SuggestedEdit]:
    """Edits turning `old` (at document offset `base`) into `new`: changed
    line groups, each trimmed to the changed characters and widened to
    whole words (a rename shows as the name replaced, not a few letters)."""
    a = old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    starts = [0]
    for line in a:
        starts.append(starts[-1] + len(line))
    edits: list[SuggestedEdit] = []
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    groups: list[tuple[int, str, str]] = []  # (first old line, old text, new text)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            # Line for line: one edit per line, so a rejected one (say, over
            # the text just typed) does not take its neighbours with it.
            groups.extend((i1 + k, a[i1 + k], b[j1 + k]) for k in range(i2 - i1))
        else:
            groups.append((i1, "".join(a[i1:i2]), "".join(b[j1:j2])))
    for i1, was, now in groups:
        if was == now:
            continue
        prefix = 0
        limit = min(len(was), len(now))
        while prefix < limit and was[prefix] == now[prefix]:
            prefix += 1
        suffix = 0
        limit -= prefix
        while suffix < limit and was[-1 - suffix] == now[-1 - suffix]:
            suffix += 1
        # Widen to word boundaries, equally in both (the trimmed parts are equal).
        while prefix > 0 and _is_word(was[prefix - 1]) and (
            (prefix < len(was) and _is_word(was[prefix])) or (prefix < len(now) and
            _is_word(now[prefix]))):
            prefix -= 1
        while suffix > 0 and _is_word(was[len(was) - suffix]) and (
            (len(was) - suffix - 1 >= prefix and _is_word(was[len(was) - suffix - 1]))
            or (len(now) - suffix - 1 >= prefix and _is_word(now[len(now) - suffix - 1]))):
            suffix -= 1
        at = base + starts[i1]
        edits.append(SuggestedEdit(at + prefix, at + len(was) - suffix,
                                   now[prefix : len(now) - suffix]))
    return edits
