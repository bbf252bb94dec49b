"""Prompts for next edit suggestions: the user's recent edits as small
diffs, then the file with the editable region marked and the cursor in it;
the model answers with the region rewritten.

Two shapes: a chat prompt (instructions + markers) for chat models of any
provider, and a plain-text continuation for base/completion models (the
embedded model among them) that ends where the rewritten region begins, so
the model's most likely continuation is the region itself, with the
change carried through.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentls.core.editor.history import Hunk
from agentls.core.types.conversation import Message
from agentls.features.next_edit.region import CURSOR_MARKER, EditableRegion

__all__ = [
    "REGION_END",
    "REGION_START",
    "SYSTEM_PROMPT",
    "NextEditPrompt",
    "before_edit",
    "build_prompt",
    "describe_change",
    "render_edits",
]

REGION_START = "<|editable_region_start|>"
REGION_END = "<|editable_region_end|>"
# One worked example: small base models copy a pattern far better than they
# follow a description.
BASE_EXAMPLE = (
    "File: example.py\n```python\ndef add(count, step):\n    return count + step\n\n"
    "print(add(count=1, step=2))\n```\n"
    "The same code after renaming `count` to `total` everywhere:\n```python\n"
    "def add(total, step):\n    return total + step\n\nprint(add(total=1, step=2))\n```\n\n"
)
MAX_HUNK_LINES = 8  # of old and of new text, per hunk shown
MAX_HISTORY_CHARS = 2000

SYSTEM_PROMPT = (
    "You predict a programmer's next edit. You get their most recent edits (as diffs) "
    f"and an excerpt of the file they are in, with the part you may change between "
    f"{REGION_START} and {REGION_END} and their cursor at {CURSOR_MARKER}. Rewrite that "
    "part as it should look after their next edit: carry the change they started "
    "through (a renamed name at its other uses, a changed signature at its calls, the "
    "same change on similar lines), and change nothing else. Do not undo their edits. "
    "If nothing follows from their edits, return the part unchanged. Reply with only "
    f"the rewritten part between {REGION_START} and {REGION_END}, without the cursor "
    "marker, without explanations."
)


@dataclass(frozen=True, slots=True)
class NextEditPrompt:
    chat: bool
    messages: tuple[Message, ...]  # chat
    text: str  # base/completion: the prompt to continue
    stop: tuple[str, ...]


def render_edits(
    history: Sequence[tuple[str, Hunk]],
    document_text: Callable[[str], str | None],
    display: Callable[[str], str],
) -> str:
    """Recent hunks as unified-diff-like blocks with whole lines, oldest
    first, newest kept when over budget."""
    blocks: list[str] = []
    for uri, hunk in history:
        if hunk.clipped:
            continue
        text = document_text(uri)
        if text is None or hunk.end > len(text):
            continue
        line_start = text.rfind("\n", 0, hunk.start) + 1
        line_end = text.find("\n", hunk.end)
        if line_end < 0:
            line_end = len(text)
        new = text[line_start:line_end]
        old = text[line_start : hunk.start] + hunk.old + text[hunk.end : line_end]
        line = text.count("\n", 0, line_start) + 1
        minus = [f"-{x}" for x in old.split("\n")][:MAX_HUNK_LINES] if old else []
        plus = [f"+{x}" for x in new.split("\n")][:MAX_HUNK_LINES] if new else []
        blocks.append("\n".join([f"--- {display(uri)}", f"@@ line {line} @@", *minus, *plus]))
    kept: list[str] = []
    size = 0
    for block in reversed(blocks):
        size += len(block) + 1
        if size > MAX_HISTORY_CHARS and kept:
            break
        kept.append(block)
    return "\n".join(reversed(kept))


def build_prompt(
    region: EditableRegion,
    edits: str,
    *,
    chat: bool,
    path: str,
    language_id: str,
    change: str = "after the next edit",
    original: str | None = None,
) -> NextEditPrompt:
    """Base models: `change` is describe_change(...) of the user's last edit
    and `original` the region as it was before that edit, so the model's
    task is the example's (apply one change everywhere) rather than
    finishing a half-done one, which small models undo instead."""
    if chat:
        user = (
            f"Recent edits (oldest first):\n{edits}\n\n"
            f"File: {path} ({language_id})\n"
            f"{region.before}{REGION_START}\n{region.marked}{REGION_END}\n{region.after}"
        )
        return NextEditPrompt(
            chat=True,
            messages=(Message(role="system", content=SYSTEM_PROMPT),
                      Message(role="user", content=user)),
            text="",
            stop=(),
        )
    # A base model continues text, and a small one cannot follow markup: show
    # the region as plain code in a fence, then open a second fence under a
    # sentence saying what changed, so copying the code with that change
    # carried through is the natural continuation. It stops at the fence.
    fence = "```"
    return NextEditPrompt(
        chat=False,
        messages=(),
        text=(f"{BASE_EXAMPLE}"
              f"File: {path}\n{fence}{language_id}\n{original or region.text}{fence}\n"
              f"The same code {change}:\n{fence}{language_id}\n"),
        stop=(fence,),
    )


def before_edit(region: EditableRegion, hunk: Hunk | None) -> str | None:
    """The region's text with the user's last edit undone, when that edit
    lies inside the region."""
    if hunk is None or hunk.clipped or not region.start <= hunk.start <= hunk.end <= region.end:
        return None
    start, end = hunk.start - region.start, hunk.end - region.start
    return region.text[:start] + hunk.old + region.text[end:]


def describe_change(text: str, hunk: Hunk | None) -> str:
    """What the user's last edit did, in words a small model can act on:
    "after renaming `factor` to `ratio`" for a changed name (the hunk widened
    to whole identifiers), else the changed line before and after."""
    if hunk is None or hunk.clipped or hunk.end > len(text):
        return "after the next edit"
    start, end = hunk.start, hunk.end
    while start > 0 and _word(text[start - 1]):
        start -= 1
    while end < len(text) and _word(text[end]):
        end += 1
    new = text[start:end]
    old = text[start : hunk.start] + hunk.old + text[hunk.end : end]
    if old != new and _identifier(old) and _identifier(new):
        return f"after renaming `{old}` to `{new}` everywhere"
    line_start = text.rfind("\n", 0, hunk.start) + 1
    line_end = text.find("\n", hunk.end)
    line_end = len(text) if line_end < 0 else line_end
    now = text[line_start:line_end].strip()
    was = (text[line_start : hunk.start] + hunk.old + text[hunk.end : line_end]).strip()
    if "\n" in now or "\n" in was or len(now) > 120 or len(was) > 120:
        return "after the same kind of change is made wherever it applies"
    return (f"after `{was}` was changed to `{now}` and the same change is made "
            "wherever it applies")


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _identifier(word: str) -> bool:
    return bool(word) and (word[0].isalpha() or word[0] == "_") and all(map(_word, word))
