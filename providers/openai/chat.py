"""The openai provider's chat wire format: core messages and tools to a
`/chat/completions` body, and its stream's chunks back to StreamChunks.

Split from openai.py so that the FIM path (inline completion, on every
keystroke) does not import the pydantic models the chat needs; the first
chat request imports this module.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from agentls.core.provider.contract import ToolSpec
from agentls.core.types.conversation import Message
from agentls.core.types.errors import ModelError
from agentls.core.types.messages import StreamChunk, ToolCallDelta, Usage
from agentls.providers.http.provider import text_of, tool_result_text
from agentls.providers.openai.stream import SseChunkReader, first_choice

__all__ = ["ChatChunkReader", "prompt_chars", "to_openai_messages", "to_openai_tools"]


# --------------------------------------------------------------------------- requests


def to_openai_messages(messages: Iterable[Message], *, model: str = "") -> list[dict[str, Any]]:
    """Core messages -> chat completions `messages`."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            call_id = message.tool_call_id
            if not call_id:
                raise ModelError(
                    "openai: a tool message has no metadata.tool_call_id, so the model "
                    "cannot match it to its call",
                    model=model,
                    code="bad_request",
                )
            out.append(
                {"role": "tool", "tool_call_id": call_id, "content": tool_result_text(message)}
            )
        elif message.role == "assistant" and message.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": text_of(message.content) or None,
                    "tool_calls": [_tool_call(call) for call in message.tool_calls],
                }
            )
        else:
            content = message.content
            if message.multipart_content and message.role == "user":
                content = message.multipart_content  # OpenAI content parts, as given
            out.append({"role": message.role, "content": _content(content)})
    return out


def to_openai_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool["name"],
                "description": tool.get("description", ""),
                "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
            },
        }
        for tool in tools
    ]


def _tool_call(call: Any) -> dict[str, Any]:
    if hasattr(call, "model_dump"):  # a ToolCall rather than its dict form
        call = call.model_dump()
    name = call.get("tool") or call.get("name")
    arguments = call.get("arguments") or {}
    return {
        "id": call.get("id"),
        "type": "function",
        "function": {
            "name": name,
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        },
    }


def _content(value: Any) -> Any:
    return value if isinstance(value, list) else text_of(value)


def prompt_chars(body: dict[str, Any]) -> int:
    """The size of a chat request's prompt, for the usage estimate."""
    return len(json.dumps(body["messages"])) + len(json.dumps(body.get("tools", [])))


# --------------------------------------------------------------------------- responses


class ChatChunkReader(SseChunkReader):
    """The chat stream's chunks as StreamChunks (text, reasoning, tool call
    deltas) and its closing usage chunk."""

    def chat_chunk(self, data: str) -> StreamChunk | None:
        payload = self.payload(data)
        choice = first_choice(payload)
        if choice is None:
            return None  # the usage-only chunk; usage goes out in usage_chunk()
        delta = choice.get("delta") or {}
        text = delta.get("content") or ""
        reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
        calls = _tool_call_deltas(delta)
        if calls:
            self.saw_tool_calls = True
        self.output_chars += len(text) + len(reasoning) + sum(len(c.arguments) for c in calls)
        finish = self.finish_reason(choice)
        if not (text or reasoning or calls or finish):
            return None
        return StreamChunk(
            delta=text, reasoning=reasoning, tool_call_deltas=calls, finish_reason=finish
        )

    def usage_chunk(self) -> StreamChunk:
        """The closing chunk with the usage; raises if the stream was cut short."""
        input_tokens, output_tokens, total = self.token_counts()
        return StreamChunk(usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens,
                                       total_tokens=total))


def _tool_call_deltas(delta: dict[str, Any]) -> list[ToolCallDelta]:
    raw = delta.get("tool_calls")
    if not raw and isinstance(delta.get("function_call"), dict):
        raw = [{"index": 0, "function": delta["function_call"]}]  # the legacy form
    if not isinstance(raw, list):
        return []
    calls = []
    for position, call in enumerate(raw):
        if not isinstance(call, dict):
            continue
        function = call.get("function") or {}
        calls.append(
            ToolCallDelta(
                index=int(call.get("index", position)),
                id=call.get("id") or None,
                name=function.get("name") or None,
                arguments=function.get("arguments") or "",
            )
        )
    return calls
