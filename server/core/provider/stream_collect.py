"""A chunk stream folded into its result: ToolCallDeltas joined into
ToolCalls (`ToolCallAccumulator`), and `collect_stream`, the non-streaming
ModelResponse that BaseProvider.complete() returns.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from agentls.core.types.errors import FinishReason, MalformedToolCall, ModelError

if TYPE_CHECKING:
    from agentls.core.types.messages import ModelResponse, StreamChunk, ToolCall

__all__ = ["ToolCallAccumulator", "collect_stream"]


class ToolCallAccumulator:
    """Joins ToolCallDeltas (by index) into ToolCalls, as orbiter's models.types describes."""

    def __init__(self) -> None:
        self._parts: dict[int, dict[str, Any]] = {}

    def add(self, chunk: StreamChunk) -> None:
        for delta in chunk.tool_call_deltas:
            part = self._parts.setdefault(delta.index, {"id": None, "name": None, "args": ""})
            if delta.id:
                part["id"] = delta.id
            if delta.name:
                part["name"] = delta.name
            part["args"] += delta.arguments

    def __bool__(self) -> bool:
        return bool(self._parts)

    def tool_calls(self, *, model: str = "") -> list[ToolCall]:
        from agentls.core.types.messages import ToolCall

        calls = []
        for index in sorted(self._parts):
            part = self._parts[index]
            if not part["name"]:
                raise ModelError(
                    f"The model streamed a tool call (index {index}) without a name",
                    model=model,
                    code="invalid_response",
                )
            calls.append(
                ToolCall(
                    id=part["id"] or f"call_{uuid.uuid4().hex[:12]}",
                    tool=part["name"],
                    arguments=_parse_arguments(part["args"], part["name"], model),
                )
            )
        return calls


def _parse_arguments(raw: str, tool: str, model: str) -> dict[str, Any]:
    if not raw.strip():
        return {}
    # MalformedToolCall: the turn answers it with a tool error and one retry.
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise MalformedToolCall(
            f"The model sent invalid JSON arguments for tool {tool!r}: {exc.msg} "
            f"(at char {exc.pos}): {raw[:200]!r}",
            model=model,
            text=f"{tool}({raw})",
            reason=f"The arguments of your {tool} call are not valid JSON ({exc.msg} at "
            f"character {exc.pos}).",
        ) from exc
    if not isinstance(value, dict):
        raise MalformedToolCall(
            f"The model sent arguments for tool {tool!r} that are not a JSON object: {raw[:200]!r}",
            model=model,
            text=f"{tool}({raw})",
            reason=f"The arguments of your {tool} call are not a JSON object.",
        )
    return value


async def collect_stream(stream: AsyncIterator[StreamChunk], *, model: str = "") -> ModelResponse:
    """Fold a chunk stream into one ModelResponse (the non-streaming result)."""
    from agentls.core.types.messages import ModelResponse, Usage

    text: list[str] = []
    reasoning: list[str] = []
    calls = ToolCallAccumulator()
    usage = Usage()
    finish: FinishReason | None = None
    async for chunk in stream:
        if chunk.delta:
            text.append(chunk.delta)
        if chunk.reasoning:
            reasoning.append(chunk.reasoning)
        calls.add(chunk)
        if chunk.usage.total_tokens or chunk.usage.input_tokens or chunk.usage.output_tokens:
            usage = chunk.usage
        if chunk.finish_reason is not None:
            finish = chunk.finish_reason
    tool_calls = calls.tool_calls(model=model)
    if finish is None:
        finish = "tool_calls" if tool_calls else "stop"
    return ModelResponse(
        model=model,
        content="".join(text),
        tool_calls=tool_calls,
        usage=usage,
        finish_reason=finish,
        reasoning_content="".join(reasoning),
    )
