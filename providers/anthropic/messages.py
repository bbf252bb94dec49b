"""The Messages API request: core messages and tools converted as the
anthropic provider's docstring says (leading system messages to `system`,
later ones and hook injections as <system-reminder> user text, tool calls
and results as tool_use / tool_result blocks, one role per turn).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable
from typing import Any

from agentls.core.plugins.injections import SYSTEM_REMINDER, is_leading_system
from agentls.core.provider.contract import CompletionOptions, ToolSpec
from agentls.core.types.conversation import Message
from agentls.core.types.errors import ModelError
from agentls.providers.http.provider import apply_extra, text_of, tool_result_text

__all__ = ["apply_options", "prompt_chars", "to_anthropic_messages", "to_anthropic_tools",
           "used_tools"]

def to_anthropic_messages(
    messages: Iterable[Message], *, model: str = ""
) -> tuple[str, list[dict[str, Any]]]:
    """Core messages -> (top-level `system`, Messages API `messages`)."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    leading = True
    for message in messages:
        if message.role == "system":
            text = text_of(message.content)
            if is_leading_system((message.metadata or {}).get("source"), leading):
                if text.strip():
                    system.append(text)
                continue
            role, blocks = "user", _text_blocks(SYSTEM_REMINDER.format(text=text) if text else "")
        else:
            leading = False
            role, blocks = _convert(message, model)
        if not blocks:
            continue  # empty text is rejected by the API; nothing to say
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": list(blocks)})
    for turn in turns:
        if turn["role"] == "user":
            # tool_result blocks must come first in their user message.
            turn["content"].sort(key=lambda block: block.get("type") != "tool_result")
    if turns and turns[-1]["role"] == "assistant":
        # A prefilled final assistant turn may not end in whitespace.
        last = turns[-1]["content"][-1]
        if last.get("type") == "text":
            last["text"] = last["text"].rstrip()
            if not last["text"]:
                turns[-1]["content"].pop()
                if not turns[-1]["content"]:
                    turns.pop()
    return "\n\n".join(system), turns


def _convert(message: Message, model: str) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "tool":
        call_id = message.tool_call_id
        if not call_id:
            raise ModelError(
                "anthropic: a tool message has no metadata.tool_call_id, so the model "
                "cannot match it to its call",
                model=model,
                code="bad_request",
            )
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
        text = tool_result_text(message)
        if text:
            block["content"] = text
        if (message.tool_result or {}).get("success", True) is False:
            block["is_error"] = True
        return "user", [block]
    if message.role == "assistant":
        blocks = _text_blocks(text_of(message.content))
        blocks += [_tool_use(call) for call in message.tool_calls]
        return "assistant", blocks
    parts = message.multipart_content or message.content
    if isinstance(parts, list):
        return "user", [b for b in (_part(p) for p in parts) if b is not None]
    return "user", _text_blocks(text_of(parts))


def used_tools(converted: Iterable[dict[str, Any]]) -> list[str]:
    """The tool names the converted messages' tool_use blocks call, each once."""
    names = [block.get("name") for message in converted
             if isinstance(message.get("content"), list)
             for block in message["content"]
             if isinstance(block, dict) and block.get("type") == "tool_use"]
    return list(dict.fromkeys(str(name) for name in names if name))


def to_anthropic_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "name": tool["name"],
            "description": tool.get("description", ""),
            "input_schema": tool.get("parameters") or {"type": "object", "properties": {}},
        }
        for tool in tools
    ]


def _tool_use(call: Any) -> dict[str, Any]:
    if hasattr(call, "model_dump"):  # a ToolCall rather than its dict form
        call = call.model_dump()
    arguments = call.get("arguments") or {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            arguments = {"arguments": arguments}
    if not isinstance(arguments, dict):
        arguments = {"arguments": arguments}
    return {
        "type": "tool_use",
        "id": call.get("id") or f"toolu_{uuid.uuid4().hex[:24]}",
        "name": call.get("tool") or call.get("name"),
        "input": arguments,
    }


def _part(part: Any) -> dict[str, Any] | None:
    """One user content part (OpenAI-style or Anthropic-style) -> a content block."""
    if isinstance(part, str):
        return {"type": "text", "text": part} if part else None
    if not isinstance(part, dict):
        return {"type": "text", "text": text_of(part)}
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": part["text"]} if part.get("text") else None
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        if isinstance(url, str):
            match = re.match(r"data:([^;,]+);base64,(.*)$", url, re.DOTALL)
            if match:
                source = {"type": "base64", "media_type": match[1], "data": match[2]}
                return {"type": "image", "source": source}
            return {"type": "image", "source": {"type": "url", "url": url}}
    if kind in ("image", "document", "tool_result", "tool_use"):
        return dict(part)  # already a Messages API block
    return {"type": "text", "text": text_of(part)}


def _text_blocks(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}] if text.strip() else []


def apply_options(body: dict[str, Any], options: CompletionOptions) -> None:
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if options.stop:
        body["stop_sequences"] = list(options.stop)
    apply_extra(body, options.extra)  # e.g. {"thinking": {...}}


def prompt_chars(body: dict[str, Any]) -> int:
    return (
        len(json.dumps(body["messages"]))
        + len(body.get("system", ""))
        + len(json.dumps(body.get("tools", [])))
    )
