"""What the user reads when a turn ends without the model's answer.

A turn never ends with an empty answer (turns with a real small
model ended `completed` and blank after failed calls): after an empty
reply, the iteration limit, a third identical tool call or a second tool
call in a row that could not be read, the last message of the turn is
agentls's own assistant message (metadata source "agentls", `explanation`
the reason code) saying what happened, what the tools did, and what the
user can do next.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agentls.core.types.conversation import Message
from agentls.core.types.messages import ToolCall

__all__ = [
    "ADVICE",
    "TurnStop",
    "empty_reply_text",
    "ended_with_explanation",
    "explanation",
    "malformed_again_text",
    "malformed_call_note",
    "malformed_messages",
    "max_iterations_text",
    "repeated_call_text",
    "tool_summary",
]

ADVICE = ("Try again with a more specific request (name the file or function), or use a "
           "larger model.")


@dataclass(frozen=True)
class TurnStop:
    """Why the turn must end after the current tool call: a code for the
    turn's error, and the text for the user."""

    code: str
    message: str


def explanation(code: str, text: str, metadata: dict[str, Any] | None = None) -> Message:
    """agentls's final assistant message of a turn."""
    return Message("assistant", text, {
        **(metadata or {}), "source": "agentls", "explanation": code,
        "timestamp": datetime.now(UTC).isoformat()})


def tool_summary(messages: Sequence[Message]) -> str:
    """One or two sentences on the tool calls among `messages` (one turn's)."""
    results = [m for m in messages if m.role == "tool"]
    if not results:
        return "No tool was called."
    names = Counter(str((m.metadata or {}).get("tool_name") or "a tool") for m in results)
    listed = ", ".join(f"{name} x{n}" if n > 1 else name for name, n in names.items())
    failed = [m for m in results if not (m.tool_result or {}).get("success", True)]
    text = f"{len(results)} tool call{'s' if len(results) != 1 else ''} ({listed})"
    if not failed:
        return text + ", all succeeded."
    last = failed[-1]
    error = (last.tool_result or {}).get("error") or {}
    why = str(error.get("message") or last.content or "no reason given")
    if len(why) > 300:
        why = why[:300] + "…"
    tool = (last.metadata or {}).get("tool_name") or "a tool"
    return (f"{text}, {len(failed)} failed; the last failure: {tool}: {why}")


def empty_reply_text(messages: Sequence[Message]) -> str:
    return (f"The model ended its reply without an answer. {tool_summary(messages)} "
            f"{ADVICE}")


def max_iterations_text(limit: int, messages: Sequence[Message]) -> str:
    return (f"I stopped after {limit} model calls (session.maxIterations = {limit}) without "
            f"finishing. {tool_summary(messages)} Ask me to continue, or raise "
            "session.maxIterations.")


def repeated_call_text(call: ToolCall, times: int, messages: Sequence[Message]) -> str:
    return (f"I stopped: the model called {call.tool} with the same arguments {times} times in "
            "this turn, although it already had the result, so it was going around in "
            f"circles. {tool_summary(messages)} {ADVICE}")


def malformed_call_note(reason: str) -> str:
    """What the model is told after a tool call it wrote that could not be read."""
    return (f"Error: your last tool call was not run. {reason} Write the call again, "
            "correctly, or answer in words if no tool is needed.")


def malformed_messages(text: str, reason: str, model: str, *, note: bool) -> list[Message]:
    """After a tool call that could not be read: what the model wrote (so it
    sees its mistake) and, with `note`, a system message right after it
    saying why it was not run (sent in place: core/plugins/injections.py)."""
    now = datetime.now(UTC).isoformat()
    written = Message("assistant", text, {"malformed_tool_call": reason, "model": model,
                                          "timestamp": now})
    if not note:
        return [written]
    return [written, Message("system", malformed_call_note(reason),
                             {"source": "agentls", "tool_error": True, "timestamp": now})]


def malformed_again_text(reason: str, messages: Sequence[Message]) -> str:
    return (f"I stopped: the model wrote a tool call that could not be read, twice in a row "
            f"({reason}). {tool_summary(messages)} {ADVICE}")


def ended_with_explanation(messages: Sequence[Message]) -> bool:
    """The turn's last message is agentls's own explanation (an empty reply,
    repeated or malformed calls, the iteration limit): the user has read
    what happened and what to do."""
    last = messages[-1] if messages else None
    return last is not None and last.role == "assistant" and (
        (last.metadata or {}).get("source") == "agentls")
