"""Size caps on what enters a session: chat prompts and tool results.

Everything stored in a session is sent to the model again on every later
call and held in memory while a turn runs, so one 50 MB prompt or tool
output makes every later turn slow, expensive and memory-hungry. A prompt
over the cap is refused with a message that says the limit and what to do;
a tool result over the cap keeps its head and tail with a note in between,
so the model still sees how the output starts and ends and knows it was cut.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["cap_text", "cap_tool_result", "head_and_tail", "prompt_too_large"]

DEFAULT_MAX_PROMPT_CHARS = 262_144
DEFAULT_MAX_TOOL_RESULT_CHARS = 100_000


def prompt_too_large(prompt: str, limit: int | None) -> str | None:
    """The error message for a prompt over `limit` characters, else None."""
    if limit is None or len(prompt) <= limit:
        return None
    return (
        f"The prompt is {len(prompt):,} characters; the limit is {limit:,} "
        "(session.maxPromptChars). Attach large files with #file mentions or let the "
        "agent read them with its tools instead of pasting them, or raise the setting."
    )


def cap_text(text: str, limit: int | None, *, what: str = "tool result") -> str:
    """`text` unchanged when it fits in `limit` characters; else its head and
    tail (together about `limit` characters) around a note saying how much
    was left out."""
    if limit is None or len(text) <= limit:
        return text
    return head_and_tail(text, limit, lambda omitted: (
        f"\n\n[… {omitted:,} characters of this {what} left out: it is {len(text):,} "
        f"characters and the limit is {limit:,} (session.maxToolResultChars). "
        "Ask for a narrower range or filter the output. …]\n\n"
    ))


def head_and_tail(
    text: str, chars: int, note: Callable[[int], str], *, head_share: tuple[int, int] = (3, 4)
) -> str:
    """`text` cut to its first and last characters, together `chars` of them
    (`head_share` of those from the head), with `note(characters left out)`
    between them. The one head/tail cut: session size caps and the
    context's excerpts of old tool results (compaction.py) both use it."""
    numerator, denominator = head_share
    head = chars * numerator // denominator
    tail = chars - head
    return text[:head] + note(len(text) - head - tail) + text[-tail:]


def cap_tool_result(result: dict[str, Any], limit: int | None) -> dict[str, Any]:
    """A tool result (ToolResult.model_dump()) whose string fields fit `limit`.

    The stored result is shown in the chat view and kept with the session, so
    its big text fields (a command's stdout, a file's content) are capped the
    same way as the text sent to the model; short fields pass unchanged."""
    if limit is None:
        return result
    return {key: _cap_values(value, limit) for key, value in result.items()}


def _cap_values(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return cap_text(value, limit)
    if isinstance(value, dict):
        return {k: _cap_values(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_cap_values(v, limit) for v in value]
    return value
