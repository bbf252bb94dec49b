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

from agentls.core.edit_history import Hunk
from agentls.core.session_types import Message

from .region import CURSOR_MARKER, EditableRegion

__all__ = [
    "REGION_END",
    "REGION_START",
    "SYSTEM_PROMPT",
    "NextEditPrompt",
    "build_prompt",
    "render_edits",
]

REGION_START = "<|editable_region_start|>"
REGION_END = "<|editable_region_end|>"
BASE_STOP = "<|end|>"
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
) -> NextEditPrompt:
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
    # A base model continues text: show the edits, the region as it is, then
    # open the rewritten region. Short context: small models lose the thread.
    before = region.before[-600:]
    cut = before.find("\n")
    if len(region.before) > 600 and cut >= 0:
        before = before[cut + 1 :]
    text = (
        f"<|file|> {path}\n<|edits|>\n{edits}\n"
        f"<|excerpt|>\n{before}{REGION_START}\n{region.marked}{REGION_END}\n"
        f"<|rewritten|>\n{REGION_START}\n"
    )
    return NextEditPrompt(chat=False, messages=(), text=text, stop=(REGION_END, BASE_STOP))
