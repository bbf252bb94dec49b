"""ACP `session/update` payloads and permission options built from the
core's types (messages, tool needs, approval requests). Pure functions:
channels.py and the agent send what these return; `replay` turns a stored
session back into the updates a client saw, for `session/load`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp.helpers import (
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    ContentToolCallContent,
    PermissionOption,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
)

from agentls.core.approval.documents import shown_question

if TYPE_CHECKING:
    from agentls.core.approval.gate import ApprovalRequest, MessageLevel
    from agentls.core.tools.contract import ToolNeed
    from agentls.core.types.conversation import Message

__all__ = [
    "assistant_text",
    "chunk",
    "diff_update",
    "message_calls",
    "need_update",
    "notice",
    "output_update",
    "permission_options",
    "question_call",
    "question_done",
    "question_title",
    "replay",
    "text_content",
    "tool_kind",
]

RESULT_MAX_CHARS = 20_000

_KIND_BY_TOOL = {
    "read_file": "read", "list_files": "search", "search_text": "search",
    "write_file": "edit", "edit_file": "edit", "delete_file": "delete",
    "rename_file": "move", "run_command": "execute",
}
_KIND_BY_NEED = {"read": "read", "edit": "edit", "run": "execute", "call": "other"}


def tool_kind(tool_name: str, need_kind: str | None = None) -> Any:
    """The ACP ToolKind of a tool: by its name for the built-in tools, else
    by what it declared (read / edit / run), else other."""
    if tool_name in _KIND_BY_TOOL:
        return _KIND_BY_TOOL[tool_name]
    return _KIND_BY_NEED.get(need_kind or "", "other")


def chunk(text: str, *, thought: bool = False) -> Any:
    return update_agent_thought_text(text) if thought else update_agent_message_text(text)


def notice(message: str, level: MessageLevel) -> Any:
    prefix = {"warning": "agentls (warning)", "error": "agentls (error)"}.get(level, "agentls")
    return update_agent_message_text(f"\n\n> {prefix}: {message}\n\n")


def text_content(text: str) -> ContentToolCallContent:
    return tool_content(text_block(text))


def assistant_text(message: Message) -> list[Any]:
    """The chunks of an assistant message that was not streamed."""
    found: list[Any] = []
    reasoning = (message.metadata or {}).get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        found.append(chunk(reasoning, thought=True))
    text = _text(message.content)
    if text:
        found.append(chunk(text))
    return found


def message_calls(message: Message, root: str | None) -> list[ToolCallStart | ToolCallProgress]:
    """An assistant message's tool calls as `tool_call` (pending); a tool
    result as the `tool_call_update` that ends its call."""
    if message.role == "assistant":
        starts: list[ToolCallStart | ToolCallProgress] = []
        for raw in message.tool_calls:
            name = str(raw.get("tool") or raw.get("name") or "tool")
            given = raw.get("arguments")
            arguments: dict[str, Any] = given if isinstance(given, dict) else {}
            starts.append(start_tool_call(
                str(raw.get("id") or ""), _call_title(name, arguments), kind=tool_kind(name),
                status="pending", raw_input=arguments,
                locations=_locations(_argument_paths(arguments), root) or None))
        return starts
    if message.role == "tool" and message.tool_call_id is not None:
        result = message.tool_result or {}
        ok = bool(result.get("success", True))
        text = _text(message.content)
        if len(text) > RESULT_MAX_CHARS:
            text = text[:RESULT_MAX_CHARS] + "\n[... cut for the display]"
        return [update_tool_call(message.tool_call_id, status="completed" if ok else "failed",
                                 content=[text_content(text)] if text else None)]
    return []


def need_update(call_id: str, tool_name: str, need: ToolNeed, root: str | None
                ) -> ToolCallProgress:
    """What a tool call will do, once the tool declared it."""
    # Shown to the user before the question: escaped as a question's text
    # is (a path may hold control characters or bidi overrides).
    title = need.title.removeprefix("agentls: ") if need.title else ""
    content: list[Any] = []
    if need.kind == "run" and need.command:
        title = title or need.command
        content.append(text_content(shown_question(f"$ {need.command}\n(in {need.cwd})")))
    elif need.kind == "edit" and need.preview:
        content.append(text_content(shown_question(need.preview)))
    title = shown_question(title).replace("\n", " ")
    return update_tool_call(call_id, kind=tool_kind(tool_name, need.kind), title=title or None,
                            status="pending", content=content or None,
                            locations=_locations(need.paths, root) or None)


def diff_update(call_id: str, changes: Iterable[tuple[str, str | None, str]]
                ) -> ToolCallProgress:
    """The files an edit writes, as diff content (path, old text, new text)."""
    return update_tool_call(call_id, status="in_progress", content=[
        tool_diff_content(path, new, old) for path, old, new in changes])


def output_update(call_id: str, text: str) -> ToolCallProgress:
    """A running tool's output so far."""
    return update_tool_call(call_id, status="in_progress", content=[text_content(text)])


# The gate's option ids as PROTOCOL.md names them on the wire.
_WIRE_IDS = {"deny": "reject_once"}


def option_wire_id(option_id: str) -> str:
    return _WIRE_IDS.get(option_id, option_id)


def permission_options(request: ApprovalRequest) -> list[PermissionOption]:
    options = []
    for option in request.options:
        if option.allows and option.remember:
            if request.protected:
                continue  # protected and secret paths are asked every time
            kind = "allow_always"
        elif option.allows:
            kind = "allow_once"
        else:
            kind = "reject_once"
        options.append(PermissionOption(option_id=option_wire_id(option.id), name=option.label,
                                        kind=kind))
    return options


def question_title(request: ApprovalRequest) -> str:
    if request.tool_name:
        return shown_question(f"Allow {request.tool_name}?")
    return shown_question(request.reason or "agentls asks")


def question_call(call_id: str, request: ApprovalRequest) -> ToolCallStart:
    """A question that belongs to no tool call (workspace trust), as its own."""
    return start_tool_call(call_id, question_title(request), kind="other", status="pending",
                           content=[text_content(request.prompt)])


def question_done(call_id: str, allowed: bool | None) -> ToolCallProgress:
    return update_tool_call(call_id, status="completed" if allowed else "failed")


def replay(messages: Iterable[Message], root: str | None) -> list[Any]:
    """A stored conversation as the updates that show it again."""
    found: list[Any] = []
    for message in messages:
        if message.role == "user":
            if (message.metadata or {}).get("source") == "hook":
                continue
            prompt = (message.metadata or {}).get("prompt")
            text = prompt if isinstance(prompt, str) else _text(message.content)
            if text:
                found.append(update_user_message_text(text))
        elif message.role == "assistant":
            found.extend(assistant_text(message))
            found.extend(message_calls(message, root))
        elif message.role == "tool":
            found.extend(message_calls(message, root))
    return found


# --------------------------------------------------------------------------- helpers


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [str(p.get("text", "")) for p in content
                 if isinstance(p, Mapping) and p.get("type") == "text"]
        return "".join(parts)
    if content is None:
        return ""
    return json.dumps(content, ensure_ascii=False, default=str)


def _call_title(name: str, arguments: Mapping[str, Any]) -> str:
    if name == "run_command" and isinstance(arguments.get("argv"), list):
        title = " ".join(str(a) for a in arguments["argv"])
    else:
        paths = _argument_paths(arguments)
        title = f"{name} {', '.join(paths)}" if paths else name
    return shown_question(title).replace("\n", " ")[:200]


def _argument_paths(arguments: Mapping[str, Any]) -> list[str]:
    found = [arguments[k] for k in ("path", "old_path", "new_path", "file_path")
             if isinstance(arguments.get(k), str)]
    return [str(p) for p in found]


def _locations(paths: Iterable[str], root: str | None) -> list[ToolCallLocation]:
    found = []
    for raw in paths:
        path = Path(raw)
        if not path.is_absolute() and root is not None:
            path = Path(root) / path
        found.append(ToolCallLocation(path=str(path)))
    return found
