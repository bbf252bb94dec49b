"""A read whose text the request already holds is not sent again.

A file the prompt names is attached to it (features/prompt/named_files.py),
and a small model then reads it anyway: the same text twice in one request
cost a context check its window ("this turn alone needs about 3,682
tokens"). A read-only result whose whole text already appears in this turn
(the prompt's attachments, an earlier result) is replaced by a note that
points at it; the file is unchanged, since its text is verbatim above.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentls.core.types.conversation import Message

__all__ = ["MIN_REPEATED_CHARS", "shown_above", "slimmed_output"]

MIN_REPEATED_CHARS = 200  # shorter texts cost less than the note about them


def shown_above(content: str, subject: str, messages: Sequence[Message]) -> str | None:
    """The note that replaces `content` (what a read of `subject` returned)
    when one of `messages` holds it whole, else None."""
    text = content.strip()
    if len(text) < MIN_REPEATED_CHARS:
        return None
    for message in reversed(messages):
        if isinstance(message.content, str) and text in message.content:
            where = ("attached to the user's message" if message.role == "user"
                     else "returned by an earlier call")
            return (f"[agentls: {subject} is unchanged: its whole text is already above, "
                    f"{where}, so it is not repeated here. Read it there.]")
    return None


def slimmed_output(output: Any, note: str) -> Any:
    """The tool result's output with its text replaced by the note, so the
    session keeps the text once."""
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        return {**output, "content": note, "shownAbove": True}
    return output
