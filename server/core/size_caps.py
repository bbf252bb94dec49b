"""Size caps on what enters a session: chat prompts and tool results.

Everything stored in a session is sent to the model again on every later
call and held in memory while a turn runs, so one 50 MB prompt or tool
output makes every later turn slow, expensive and memory-hungry. A prompt
over the cap is refused with a message that says the limit and what to do;
a tool result over the cap keeps its head and tail with a note in between,
so the model still sees how the output starts and ends and knows it was cut.
"""

from __future__ import annotations

from typing import Any

__all__ = ["cap_text", "cap_tool_result", "prompt_too_large"]

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
    head = limit * 3 // 4
    tail = limit - head
    omitted = len(text) - head - tail
    note = (
        f"\n\n[… {omitted:,} characters of this {what} left out: it is {len(text):,} "
        f"characters and the limit is {limit:,} (session.maxToolResultChars). "
        "Ask for a narrower range or filter the output. …]\n\n"
    )
    return text[:head] + note + text[-tail:]


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
