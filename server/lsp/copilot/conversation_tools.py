"""The client's side of a Copilot chat's tool calls (docs/copilot-plugins.md,
"Chat (conversation/*)").

- `LiveConversations`: the conversations of this process and the turn each
  is running, shared by the chat (conversation.py) and the two below.
- `ClientTools`: the tools a Copilot client registers
  (`conversation/registerTools`), offered to the model as one tool plugin
  whose tools change at run time. A call declares a `call` need (asked,
  every path-like argument confined by the policy), so it passes the one
  approval gate like any agentls tool; only then is it sent to the client
  as `conversation/invokeClientTool`, whose LanguageModelToolResult
  becomes the tool's result.
- `ConversationApproval`: the gate's channel while a conversation's turn
  runs: the question goes as `conversation/invokeClientToolConfirmation`
  (the plugin's own confirmation prompt), "accept" allows once, anything
  else denies. Questions agentls asks every time (a protected file, a
  command line: no "Allow for session" offered) and questions outside a
  conversation keep the standard channel, so a plugin's "always" memory
  never answers what agentls would not remember itself.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentls.core.approval.gate import ApprovalChannel, ApprovalRequest
from agentls.core.tools.contract import (
    PATH_KEYS,
    PATH_LIST_KEYS,
    ToolContext,
    ToolNeed,
    ToolRefused,
    failure_result,
    path_arguments,
)
from agentls.lsp.agent.channels import send_request
from agentls.lsp.wire.convert import to_plain

__all__ = [
    "CLIENT_TOOLS",
    "CONFIRM_TOOL",
    "INVOKE_TOOL",
    "ClientTools",
    "ConversationApproval",
    "LiveConversations",
    "parse_tools",
]

log = logging.getLogger("agentls.lsp.copilot.tools")

INVOKE_TOOL = "conversation/invokeClientTool"
CONFIRM_TOOL = "conversation/invokeClientToolConfirmation"
CLIENT_TOOLS = "copilot-client-tools"  # the plugin's name (features.disabled turns it off)

# A client's tool runs in the editor (a shell command, a download): bounded,
# but long enough for a build; a cancelled turn stops the wait at once.
INVOKE_SECONDS = 600.0
MAX_TOOLS = 128
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
# The path arguments Copilot clients' tools use, besides agentls's own names.
_CLIENT_PATH_KEYS = (*PATH_KEYS, "filePath", "dirPath")
_CLIENT_PATH_LIST_KEYS = (*PATH_LIST_KEYS, "filePaths")


@dataclass
class Conversation:
    """One conversation: its agentls session and the turn it runs now."""

    conversation_id: str
    turn_id: str = ""  # the running turn; "" between turns
    # The tool call being cleared or run (the turn's observer sets it): the
    # plugin ties a confirmation to its invocation by it.
    call_id: str = ""

    def ids(self) -> dict[str, str]:
        found = {"conversationId": self.conversation_id, "turnId": self.turn_id}
        return {**found, "toolCallId": self.call_id} if self.call_id else found


class LiveConversations:
    """conversation id (= agentls session id) -> Conversation."""

    def __init__(self) -> None:
        self.by_id: dict[str, Conversation] = {}

    def running(self, session_id: str) -> Conversation | None:
        conversation = self.by_id.get(session_id)
        return conversation if conversation is not None and conversation.turn_id else None


def parse_tools(params: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """`conversation/registerTools` params -> name -> tool spec; ValueError
    saying what to change."""
    tools = params.get("tools")
    if not isinstance(tools, list):
        raise ValueError("conversation/registerTools needs `tools`, an array of "
                         "{name, description, inputSchema}.")
    if len(tools) > MAX_TOOLS:
        raise ValueError(f"At most {MAX_TOOLS} tools can be registered, not {len(tools)}.")
    found: dict[str, dict[str, Any]] = {}
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise ValueError(f"tools[{index}] must be an object {{name, description, "
                             "inputSchema}.")
        name = tool.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"tools[{index}].name must be 1-64 letters, digits, '_', '.' "
                             "or '-'.")
        if name in found:
            raise ValueError(f"The tool {name!r} is registered twice.")
        description = tool.get("description", "")
        if not isinstance(description, str):
            raise ValueError(f"tools[{index}].description must be a string.")
        schema = tool.get("inputSchema", {"type": "object", "properties": {}})
        if not isinstance(schema, dict):
            raise ValueError(f"tools[{index}].inputSchema must be a JSON Schema object.")
        found[name] = {"name": name, "description": description, "parameters": schema}
    return found


class ClientTools:
    """The registered client tools as one agentls tool plugin (module
    docstring). `tools_version` moves with every registration, so the next
    model call offers the new set."""

    name = CLIENT_TOOLS

    def __init__(self, ls: Any, conversations: LiveConversations) -> None:
        self.ls = ls
        self.conversations = conversations
        self.tools: dict[str, dict[str, Any]] = {}
        self.version = 0

    def register(self, tools: dict[str, dict[str, Any]]) -> None:
        """The client's whole set, replacing the one it registered before."""
        self.tools = dict(tools)
        self.version += 1

    # -- the tool plugin --------------------------------------------------------------
    def tools_version(self, state: dict[str, Any]) -> int:
        return self.version

    def get_tool_schemas(self, state: dict[str, Any]) -> list[dict[str, Any]]:
        return list(self.tools.values())

    def tool_need(self, tool_name: str, arguments: Mapping[str, Any],
                  state: dict[str, Any]) -> ToolNeed:
        shown = json.dumps(dict(arguments), ensure_ascii=False, indent=1, sort_keys=True)
        return ToolNeed(
            "call", _paths(arguments), remember=True,
            title=f"agentls: the editor's tool {tool_name}",
            question=(f"The agent wants the editor to run its tool {tool_name!r} with these "
                      f"arguments:\n{shown}"),
            summary=f"The agent wants the editor to run its tool {tool_name!r}.",
        )

    def format_tool_result(self, result: dict[str, Any], state: dict[str, Any]) -> str:
        """What the model reads: the client's text, or the error's message."""
        if result.get("success"):
            return str(result.get("result") or "")
        error = result.get("error")
        return f"Error: {error.get('message') if isinstance(error, dict) else error}"

    async def run_tool(self, tool_name: str, arguments: dict[str, Any], state: dict[str, Any],
                       context: ToolContext) -> dict[str, Any]:
        conversation = self.conversations.running(context.session_id)
        if conversation is None:
            raise ToolRefused(f"The tool {tool_name!r} belongs to the editor's Copilot chat and "
                              "runs only in its conversations.", "unavailable")
        params = {**conversation.ids(), "name": tool_name, "input": arguments}
        try:
            answer = await send_request(self.ls, INVOKE_TOOL, params, INVOKE_SECONDS)
        except TimeoutError:
            return failure_result(f"The editor did not finish {tool_name!r} within "
                                  f"{INVOKE_SECONDS:g} s.", "timeout")
        except Exception as exc:  # the client answered with an error
            return failure_result(f"The editor could not run {tool_name!r}: {exc}",
                                  "tool_error")
        return _tool_result(tool_name, answer)


def _paths(arguments: Mapping[str, Any]) -> tuple[str, ...]:
    return path_arguments(arguments, _CLIENT_PATH_KEYS, _CLIENT_PATH_LIST_KEYS)


def _tool_result(tool_name: str, answer: Any) -> dict[str, Any]:
    """A LanguageModelToolResult ({status, content: [{value}]}, alone or as
    the first of a [result, error] pair) -> agentls's tool result."""
    answer = to_plain(answer)
    if isinstance(answer, list) and answer:
        answer = answer[0]
    if not isinstance(answer, dict):
        return failure_result(f"The editor did not run {tool_name!r} (it sent no result).",
                              "tool_error")
    content = answer.get("content")
    parts = content if isinstance(content, list) else []
    text = "\n".join(str(p.get("value")) for p in parts
                     if isinstance(p, dict) and p.get("value") is not None)
    status = answer.get("status", "success")
    if status == "success":
        return {"success": True, "result": text}
    code = "cancelled" if status == "cancelled" else "tool_error"
    return failure_result(text or f"The editor reported {status!r} for {tool_name!r}.", code)


class ConversationApproval:
    """The gate's channel: a running conversation's questions through the
    client's tool confirmation, the rest through `standard` (module
    docstring)."""

    def __init__(self, ls: Any, standard: ApprovalChannel | None,
                 conversations: LiveConversations) -> None:
        self.ls = ls
        self.standard = standard
        self.conversations = conversations

    async def request_approval(self, request: ApprovalRequest) -> str | None:
        conversation = self.conversations.running(request.session_id)
        # The plugin's "always" remembers a tool for the conversation: only
        # for questions agentls itself lets the user answer for the session.
        for_session = any(option.remember for option in request.options)
        if conversation is None or request.protected or not for_session:
            return await self.standard.request_approval(request) if self.standard else None
        params = {**conversation.ids(),
                  "name": request.tool_name or "", "input": request.tool_input,
                  "title": request.summary or (request.prompt.splitlines() or [""])[0],
                  "message": request.prompt}
        answer = await send_request(self.ls, CONFIRM_TOOL, params)
        return _chosen(request, answer)


def _chosen(request: ApprovalRequest, answer: Any) -> str | None:
    """{"result": "accept"} -> the allow-once option; "dismiss" -> deny;
    anything else -> None (dismissed: the gate denies)."""
    answer = to_plain(answer)
    if isinstance(answer, list) and answer:
        answer = answer[0]
    result = answer.get("result") if isinstance(answer, dict) else None
    if result == "accept":
        wanted = [o for o in request.options if o.allows and not o.remember]
    elif result == "dismiss":
        wanted = [o for o in request.options if not o.allows]
    else:
        return None
    return wanted[0].id if wanted else None
