"""Identical tool calls within one turn (small local models loop: a 1.5B model read the
same file ten times, and applied the same edit seven times, until the
iteration limit).

The second call of a tool with the same arguments is not run again: the
model gets the first result back with a note that it already has it (so an
edit is never applied twice). The third ends the turn, with an explanation
for the user. A call that changed something (an edit, a command, a call of
an unknown kind) makes the turn forget the other results: after it, reading
a file again or running the tests again is a new question.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from agentls.core.types.messages import ToolCall, ToolResult

__all__ = ["END_AT", "RepeatedCall", "RepeatedCalls", "call_key"]

END_AT = 3  # the identical call that ends the turn
_CHANGES_STATE = frozenset({"edit", "run", "call"})  # ToolNeed kinds
_REQUEST_CHARS = 300  # of the user's request, restated in the note


def call_key(call: ToolCall) -> str:
    """The same key for the same tool with equal arguments (key order aside)."""
    return json.dumps([call.tool, call.arguments], sort_keys=True, default=str)


@dataclass(frozen=True)
class RepeatedCall:
    """An earlier identical call: its result, and how many times it was made."""

    times: int  # how many identical calls came before this one
    result: ToolResult
    content: str

    def note(self, call: ToolCall, request: str = "") -> str:
        """What the model is told instead of running the call again: the
        result, then the note, the user's request restated (a small model
        loses it behind a long result; the end of the prompt is what it
        reads best)."""
        asked = " ".join(request.split())
        if len(asked) > _REQUEST_CHARS:
            asked = asked[:_REQUEST_CHARS] + "…"
        restated = f' The user\'s request was: "{asked}".' if asked else ""
        return (f"{self.content}\n\nNote from agentls: you already called {call.tool} with "
                "exactly these arguments in this turn, so it was not run again (nothing was "
                f"changed twice); its result is above.{restated} Do not call {call.tool} with "
                "the same arguments again: answer the request from the result above, or call a "
                "different tool.")


class RepeatedCalls:
    """The tool calls of one turn and their results, by call_key."""

    def __init__(self) -> None:
        self._seen: dict[str, RepeatedCall] = {}

    def earlier(self, call: ToolCall) -> RepeatedCall | None:
        return self._seen.get(call_key(call))

    def record(self, call: ToolCall, result: ToolResult, content: str,
               need_kind: str | None) -> None:
        """A call that ran (or was refused); `need_kind` is its ToolNeed kind
        (None when it never got that far)."""
        key = call_key(call)
        if need_kind in _CHANGES_STATE and result.success:
            self._seen = {}  # the workspace may have changed: earlier answers are stale
        before = self._seen.get(key)
        self._seen[key] = RepeatedCall(1, result, content) if before is None else before

    def count_again(self, call: ToolCall) -> RepeatedCall | None:
        """Count one more identical call; the record with the new count."""
        key = call_key(call)
        before = self._seen.get(key)
        if before is None:
            return None
        again = RepeatedCall(before.times + 1, before.result, before.content)
        self._seen[key] = again
        return again
