"""The ollama provider's chat wire format: core messages and tools to an
/api/chat body, and its NDJSON lines back to StreamChunks.

Split from ollama.py so that the FIM path (/api/generate, inline completion
on every keystroke) does not import the pydantic models the chat needs; the
first chat request imports this module.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Any

from agentls.core.provider.contract import ToolSpec
from agentls.core.types.conversation import Message
from agentls.core.types.errors import ModelError
from agentls.core.types.messages import StreamChunk, ToolCallDelta, Usage
from agentls.providers.http.provider import text_of, tool_result_text
from agentls.providers.ollama.stream import LineReader, text_or_empty
from agentls.providers.openai.chat import to_openai_tools

__all__ = ["ChatLineReader", "to_ollama_messages", "to_ollama_tools"]


# --------------------------------------------------------------------------- requests


def to_ollama_messages(messages: Iterable[Message], *, model: str = "") -> list[dict[str, Any]]:
    """Core messages -> /api/chat `messages`."""
    out: list[dict[str, Any]] = []
    names_by_id: dict[str, str] = {}  # tool call id -> tool name, for tool results
    for message in messages:
        if message.role == "tool":
            name = (message.metadata or {}).get("tool_name")
            if not name and message.tool_call_id:
                name = names_by_id.get(message.tool_call_id)
            entry: dict[str, Any] = {"role": "tool", "content": tool_result_text(message)}
            if name:
                entry["tool_name"] = name
            out.append(entry)
        elif message.role == "assistant" and message.tool_calls:
            calls = []
            for call in message.tool_calls:
                converted, call_id = _tool_call(call, model)
                if call_id:
                    names_by_id[call_id] = converted["function"]["name"]
                calls.append(converted)
            out.append(
                {"role": "assistant", "content": text_of(message.content), "tool_calls": calls}
            )
        else:
            entry = {"role": message.role, "content": text_of(message.content)}
            if message.multipart_content and message.role == "user":
                entry.update(_multipart(message.multipart_content, model))
            out.append(entry)
    return out


def to_ollama_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """/api/chat takes OpenAI's function-tool form."""
    return to_openai_tools(tools)


def _tool_call(call: Any, model: str) -> tuple[dict[str, Any], str | None]:
    if hasattr(call, "model_dump"):  # a ToolCall rather than its dict form
        call = call.model_dump()
    name = call.get("tool") or call.get("name")
    arguments = call.get("arguments") or {}
    if isinstance(arguments, str):  # Ollama wants an object, not a JSON string
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            raise ModelError(
                f"ollama: the arguments of tool call {name!r} in the history are not JSON: "
                f"{arguments[:200]!r}",
                model=model,
                code="bad_request",
            ) from None
    call_id = call.get("id")
    return (
        {"function": {"name": name, "arguments": arguments}},
        str(call_id) if call_id else None,
    )


def _multipart(parts: list[Any], model: str) -> dict[str, Any]:
    """OpenAI-style content parts -> Ollama's `content` text + `images` (base64)."""
    texts: list[str] = []
    images: list[str] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            texts.append(str(part.get("text", "")))
        elif part.get("type") == "image_url":
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            if not isinstance(url, str) or not url.startswith("data:") or "," not in url:
                raise ModelError(
                    "ollama: images must be inline (data: URLs with base64); Ollama "
                    "cannot fetch image URLs",
                    model=model,
                    code="bad_request",
                )
            images.append(url.split(",", 1)[1])
    result: dict[str, Any] = {"content": "\n".join(texts)}
    if images:
        result["images"] = images
    return result


# --------------------------------------------------------------------------- responses


class ChatLineReader(LineReader):
    """/api/chat's lines as StreamChunks (text, thinking, whole tool calls)
    and its closing usage chunk."""

    def chat_chunk(self, value: Any) -> StreamChunk | None:
        line = self.check(value)
        message = line.get("message")
        message = message if isinstance(message, dict) else {}
        text = text_or_empty(message.get("content"))
        reasoning = text_or_empty(message.get("thinking"))
        self.output_chars += len(text) + len(reasoning)
        finish = self.finish_reason(line) if line.get("done") is True else None
        raw_calls = message.get("tool_calls")
        if not raw_calls:
            # The common line: one text piece. Only the fields that are set
            # are passed (a measurable share of the per-chunk cost).
            if finish is not None:
                return StreamChunk(delta=text, reasoning=reasoning, finish_reason=finish)
            if reasoning:
                return StreamChunk(delta=text, reasoning=reasoning)
            return StreamChunk(delta=text) if text else None
        calls = self._tool_call_deltas(raw_calls)
        self.output_chars += sum(len(c.arguments) for c in calls)
        if finish == "stop" and calls:  # calls and "done" on one line
            finish = "tool_calls"
        return StreamChunk(
            delta=text, reasoning=reasoning, tool_call_deltas=calls, finish_reason=finish
        )

    def _tool_call_deltas(self, raw: Any) -> list[ToolCallDelta]:
        if not isinstance(raw, list):
            return []
        deltas = []
        for call in raw:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise self.invalid(
                    f"a tool call without a function name: {json.dumps(call)[:200]!r}"
                )
            arguments = function.get("arguments")
            if arguments is None:
                arguments = {}
            # Ollama sends whole calls, arguments as an object and (before
            # 0.12) no id: each call is one complete delta with an id of ours.
            call_id = call.get("id") if isinstance(call.get("id"), str) and call["id"] else None
            deltas.append(
                ToolCallDelta(
                    index=self.tool_calls,
                    id=call_id or f"call_{uuid.uuid4().hex[:12]}",
                    name=function["name"],
                    arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
                )
            )
            self.tool_calls += 1
        return deltas

    def finish(self) -> StreamChunk:
        """The chat stream's closing usage chunk; raises if it was cut short."""
        prompt, output = self.token_counts()
        return StreamChunk(
            usage=Usage(input_tokens=prompt, output_tokens=output, total_tokens=prompt + output)
        )
