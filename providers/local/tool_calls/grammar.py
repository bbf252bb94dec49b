"""Messages and tool calls for a small GGUF model with no native tool calls.

Tool calls: these models cannot produce native tool calls. With tools,
generation is constrained by a JSON-schema grammar to exactly one object,
either {"tool": <one of the names>, "arguments": {...}} or {"text": "..."},
which is converted to ToolCallDeltas or text. So: at most one tool call per
reply, the grammar guarantees the shape but not good judgement, and the
arguments follow each tool's schema only as far as llama.cpp's
schema-to-grammar converter supports it.

to_local_messages() renders the conversation for any GGUF chat template,
writing earlier tool calls and answers in that same reply format;
tool_reply_schema() is the grammar's schema; ToolReplyDecoder turns the
constrained reply back into StreamChunks.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agentls.core.plugins.injections import SYSTEM_REMINDER, is_leading_system
from agentls.core.provider.contract import ToolSpec
from agentls.core.types.conversation import Message, MessageRole
from agentls.core.types.errors import FinishReason, ModelError
from agentls.core.types.messages import StreamChunk, ToolCallDelta


def _text_of(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts: keep the text ones
        texts = [part.get("text", "") if isinstance(part, dict) else str(part) for part in value]
        return "\n".join(text for text in texts if text)
    return json.dumps(value, default=str)


def _call_json(call: Mapping[str, Any]) -> str:
    arguments = call.get("arguments") or {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    return json.dumps({"tool": call.get("tool") or call.get("name"), "arguments": arguments})


def to_local_messages(messages: Iterable[Message], tools: Sequence[ToolSpec] = ()) -> list[Message]:
    """Core messages -> system/user/assistant messages with string content,
    which any GGUF chat template renders.

    Tool calls become the JSON the model is asked to write, tool results
    become user messages naming the tool, the tool instructions join the
    leading system message (later system messages stay in place as user
    text, so the prompt's start does not change), and consecutive messages
    of one role are merged (Gemma's template rejects two user turns in a
    row).
    """
    names: dict[str, str] = {}
    out: list[tuple[MessageRole, str]] = []
    system: list[str] = []
    leading = True
    for message in messages:
        if message.role == "system":
            text = _text_of(message.content)
            if is_leading_system((message.metadata or {}).get("source"), leading):
                system.append(text)
            elif text.strip():  # in place, as chat_template.template_messages does
                out.append(("user", SYSTEM_REMINDER.format(text=text)))
            continue
        leading = False
        if message.role == "tool":
            call_id = message.tool_call_id or ""
            result = message.tool_result or {}
            body = _text_of(message.content)
            if not body:
                body = (
                    _text_of(result.get("output"))
                    if result.get("success", True)
                    else f"Error: {_text_of(result.get('error'))}"
                )
            tool = names.get(call_id) or "the tool"
            out.append(("user", f"Result of {tool}:\n{body}"))
            continue
        text = _text_of(message.content)
        if message.role == "assistant":
            calls = message.tool_calls
            for call in calls:
                if hasattr(call, "model_dump"):
                    call = call.model_dump()
                names[str(call.get("id"))] = str(call.get("tool") or call.get("name"))
            parts = []
            if text:  # with tools, earlier answers are shown in the reply format
                parts.append(json.dumps({"text": text}) if tools and not calls else text)
            parts += [_call_json(call) for call in calls]
            out.append(("assistant", "\n".join(parts)))
        else:
            out.append(("user", text))
    if tools:
        system.append(_tool_instructions(tools))
    merged: list[Message] = []
    if any(system):
        merged.append(Message(role="system", content="\n\n".join(s for s in system if s)))
    for role, text in out:
        if merged and merged[-1].role == role and role != "system":
            merged[-1] = Message(role=role, content=f"{merged[-1].content}\n\n{text}")
        else:
            merged.append(Message(role=role, content=text))
    return merged


def _tool_instructions(tools: Sequence[ToolSpec]) -> str:
    # Concrete examples rather than placeholders: a 135M model copies
    # "<your reply>" verbatim.
    first = tools[0]
    lines = [
        "You have tools. Answer with one JSON object only.",
        f"To use a tool, write its name and arguments, for example: "
        f"{json.dumps({'tool': first['name'], 'arguments': _example_arguments(first)})}",
        'To answer in words, write for example: {"text": "Sure, here is my answer."}',
        "Tools:",
    ]
    for tool in tools:
        params = tool.get("parameters") or {"type": "object", "properties": {}}
        properties = params.get("properties") or {}
        required = set(params.get("required") or ())
        args = ", ".join(
            f"{name} ({(spec or {}).get('type', 'any')}{', required' if name in required else ''})"
            for name, spec in properties.items()
        )
        description = " ".join(str(tool.get("description", "")).split())
        lines.append(f"- {tool['name']}({args}): {description}")
    return "\n".join(lines)


def _example_arguments(tool: ToolSpec) -> dict[str, Any]:
    params = tool.get("parameters") or {}
    properties = params.get("properties") or {}
    required = params.get("required") or list(properties)[:1]
    samples = {"string": "README.md", "integer": 1, "number": 1, "boolean": True, "array": []}
    return {
        name: samples.get(str((properties.get(name) or {}).get("type")), "README.md")
        for name in required
        if name in properties
    }


def tool_reply_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """The JSON schema the reply is constrained to (llama.cpp turns it into a
    GBNF grammar): one tool call or one text answer."""
    choices: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {
                "tool": {"const": tool["name"]},
                "arguments": tool.get("parameters") or {"type": "object", "properties": {}},
            },
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        }
        for tool in tools
    ]
    choices.append(
        {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": False,
        }
    )
    return {"anyOf": choices}


_TEXT_OPENING = '{"text":"'


class ToolReplyDecoder:
    """Turns the constrained JSON reply back into StreamChunks: the text of a
    {"text": ...} reply streams as it arrives; a {"tool": ...} reply becomes
    one ToolCallDelta at the end."""

    def __init__(self, tool_names: Iterable[str], *, model: str = "") -> None:
        self.tool_names = set(tool_names)
        self.model = model
        self._raw = ""
        self._mode = "unknown"  # "text" once {"text":" is seen, else "other"
        self._body_start = 0
        self._scan = 0  # how far the string body has been checked
        self._safe = 0  # end of the body prefix that decodes on its own
        self._closed = False
        self._emitted = ""

    def feed(self, delta: str) -> list[StreamChunk]:
        self._raw += delta
        if self._mode == "unknown":
            compact = re.sub(r"\s+", "", self._raw)
            if compact.startswith(_TEXT_OPENING):
                match = re.match(r'\s*\{\s*"text"\s*:\s*"', self._raw)
                if match is None:  # whitespace inside a key: not our grammar's output
                    self._mode = "other"
                else:
                    self._mode = "text"
                    self._body_start = match.end()
            elif not _TEXT_OPENING.startswith(compact):
                self._mode = "other"
        if self._mode == "text":
            text = self._new_text()
            return [StreamChunk(delta=text)] if text else []
        return []

    def _new_text(self) -> str:
        body = self._raw[self._body_start :]
        index = self._scan
        while index < len(body) and not self._closed:
            char = body[index]
            if char == "\\":
                width = 6 if body[index + 1 : index + 2] == "u" else 2
                if index + width > len(body):
                    break  # an escape still arriving
                index += width
            elif char == '"':
                self._closed = True
                break
            else:
                index += 1
            self._safe = index
        self._scan = index
        try:
            decoded = str(json.loads('"' + body[: self._safe] + '"'))
        except ValueError:
            return ""
        if decoded and "\ud800" <= decoded[-1] <= "\udbff":
            decoded = decoded[:-1]  # half a surrogate pair: wait for the other half
        new = decoded[len(self._emitted) :]
        self._emitted = decoded
        return new

    def finish(self, finish_reason: FinishReason | None) -> list[StreamChunk]:
        """The closing chunks; raises when a tool call was cut off."""
        try:
            value = json.loads(self._raw)
        except ValueError:
            value = None
        if self._mode == "text":
            rest = ""
            if isinstance(value, dict) and isinstance(value.get("text"), str):
                rest = value["text"][len(self._emitted) :]
            return [StreamChunk(delta=rest, finish_reason=finish_reason or "stop")]
        if isinstance(value, dict):
            name, arguments = value.get("tool"), value.get("arguments")
            if name in self.tool_names and isinstance(arguments, dict):
                delta = ToolCallDelta(
                    index=0,
                    id=f"call_{uuid.uuid4().hex[:12]}",
                    name=str(name),
                    arguments=json.dumps(arguments),
                )
                return [StreamChunk(tool_call_deltas=[delta], finish_reason="tool_calls")]
            if isinstance(value.get("text"), str):
                return [StreamChunk(delta=value["text"], finish_reason=finish_reason or "stop")]
        if finish_reason == "length":
            raise ModelError(
                "local: the model's constrained JSON reply was cut off at max_tokens "
                f"before it was complete: {self._raw[:200]!r}. Raise max_tokens.",
                model=self.model,
                code="invalid_response",
            )
        # Not the shape we asked for (the grammar fell back to plain JSON):
        # hand over what the model wrote rather than lose it.
        return [StreamChunk(delta=self._raw, finish_reason=finish_reason or "stop")]
