"""autogen's messages <-> core Messages, and autogen tools -> ToolSpecs,
for the ChatCompletionClient in autogen_client.py (which re-exports the
public names). Real autogen message objects are read through their
`model_dump()`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, TypeAdapter

from agentls.core.compat.autogen_types import (
    AssistantMessage,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    SystemMessage,
    UserMessage,
)
from agentls.core.provider.contract import ToolSpec
from agentls.core.types.conversation import Message

__all__ = ["content_text", "from_core_messages", "is_image", "to_core_messages", "tool_spec"]

_LLM_MESSAGE: TypeAdapter[LLMMessage] = TypeAdapter(LLMMessage)


def to_core_messages(messages: Sequence[Any]) -> list[Message]:
    """autogen LLMMessages -> core Messages (a FunctionExecutionResultMessage
    becomes one role "tool" Message per result)."""
    out: list[Message] = []
    for raw in messages:
        message = _coerce(raw)
        if isinstance(message, SystemMessage):
            out.append(Message(role="system", content=message.content))
        elif isinstance(message, UserMessage):
            out.append(_user_message(message))
        elif isinstance(message, AssistantMessage):
            out.append(_assistant_message(message))
        else:
            for result in message.content:
                metadata: dict[str, Any] = {"tool_call_id": result.call_id, "name": result.name}
                if result.is_error is not None:
                    metadata["is_error"] = result.is_error
                out.append(Message(role="tool", content=result.content, metadata=metadata))
    return out


def from_core_messages(messages: Sequence[Message]) -> list[LLMMessage]:
    """core Messages -> autogen LLMMessages (consecutive tool messages are
    grouped into one FunctionExecutionResultMessage)."""
    out: list[LLMMessage] = []
    names: dict[str, str] = {}  # tool call id -> tool name, for results without one
    for message in messages:
        meta = message.metadata or {}
        if message.role == "system":
            out.append(SystemMessage(content=content_text(message.content)))
        elif message.role == "user":
            content: str | list[Any] = (
                list(message.multipart_content)
                if message.multipart_content
                else content_text(message.content)
            )
            out.append(UserMessage(content=content, source=str(meta.get("source", "user"))))
        elif message.role == "assistant":
            source = str(meta.get("source", "assistant"))
            calls = [_function_call(c, i) for i, c in enumerate(message.tool_calls)]
            names.update((c.id, c.name) for c in calls)
            if calls:
                thought = content_text(message.content) or meta.get("thought")
                out.append(AssistantMessage(content=calls, thought=thought or None, source=source))
            else:
                out.append(
                    AssistantMessage(
                        content=content_text(message.content),
                        thought=meta.get("thought"),
                        source=source,
                    )
                )
        else:
            call_id = message.tool_call_id or ""
            result = FunctionExecutionResult(
                content=content_text(message.content),
                name=str(meta.get("name") or names.get(call_id, "")),
                call_id=call_id,
                is_error=meta.get("is_error"),
            )
            last = out[-1] if out else None
            if isinstance(last, FunctionExecutionResultMessage):
                last.content.append(result)
            else:
                out.append(FunctionExecutionResultMessage(content=[result]))
    return out


def tool_spec(tool: Any) -> ToolSpec:
    """An autogen ToolSchema dict, or a Tool (anything with `.schema`) -> ToolSpec."""
    schema = tool if isinstance(tool, Mapping) else getattr(tool, "schema", None)
    if not isinstance(schema, Mapping) or not schema.get("name"):
        raise TypeError(
            f"A tool must be a ToolSchema dict with a 'name' or an object with a .schema; "
            f"got {type(tool).__name__}"
        )
    parameters = schema.get("parameters") or {"type": "object", "properties": {}}
    return {
        "name": str(schema["name"]),
        "description": str(schema.get("description", "")),
        "parameters": dict(parameters),
    }


def _coerce(message: Any) -> LLMMessage:
    if isinstance(
        message, SystemMessage | UserMessage | AssistantMessage | FunctionExecutionResultMessage
    ):
        return message
    if isinstance(message, BaseModel):  # autogen's own classes: same fields, same `type`
        return _LLM_MESSAGE.validate_python(message.model_dump())
    return _LLM_MESSAGE.validate_python(message)


def _user_message(message: UserMessage) -> Message:
    meta = {"source": message.source}
    if isinstance(message.content, str):
        return Message(role="user", content=message.content, metadata=meta)
    parts = [_part(p) for p in message.content]
    text = "\n".join(p["text"] for p in parts if p.get("type") == "text")
    return Message(role="user", content=text, metadata=meta, multipart_content=parts)


def _part(item: Any) -> dict[str, Any]:
    if isinstance(item, str):
        return {"type": "text", "text": item}
    if isinstance(item, Mapping):
        return dict(item)
    data_uri = getattr(item, "data_uri", None)  # autogen_core.Image
    if isinstance(data_uri, str):
        return {"type": "image_url", "image_url": {"url": data_uri}}
    raise TypeError(f"Cannot send a {type(item).__name__} in a UserMessage")


def is_image(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") not in (None, "text")


def _assistant_message(message: AssistantMessage) -> Message:
    meta: dict[str, Any] = {"source": message.source}
    if isinstance(message.content, str):
        if message.thought:
            meta["thought"] = message.thought
        return Message(role="assistant", content=message.content, metadata=meta)
    meta["tool_calls"] = [_core_tool_call(c) for c in message.content]
    return Message(role="assistant", content=message.thought or "", metadata=meta)


def _core_tool_call(call: FunctionCall) -> dict[str, Any]:
    entry: dict[str, Any] = {"tool": call.name, "id": call.id}
    try:
        arguments = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError:
        arguments = None
    if isinstance(arguments, dict):
        entry["arguments"] = arguments
    else:
        # The model sent arguments that are not a JSON object; keep them verbatim
        # so the history round-trips and the model sees what it said.
        entry["arguments"] = {}
        entry["raw_arguments"] = call.arguments
    return entry


def _function_call(call: Mapping[str, Any], index: int) -> FunctionCall:
    raw = call.get("raw_arguments")
    arguments = raw if isinstance(raw, str) else json.dumps(call.get("arguments") or {})
    return FunctionCall(
        id=str(call.get("id") or f"call_{index}"),
        arguments=arguments,
        name=str(call.get("tool") or call.get("name") or ""),
    )


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) if isinstance(p, Mapping) else str(p) for p in content
        )
    return "" if content is None else str(content)
