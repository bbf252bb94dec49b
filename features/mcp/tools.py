"""MCP tools as agentls tools: one ToolPlugin for every running server's
tools, named `mcp__<server>__<tool>`.

Approval is the turn's, like for every tool: `tool_need` declares a call
(kind "call", "Allow for session" allowed, the question's words from
`approval_prompt`: the server, the tool, every argument whole and what the
server claims about the tool: readOnlyHint, destructiveHint...; when that
is too long for a message the gate sends it as a document and the message
is `approval_summary`). The policy
(features/policy/rules.py) and the approval gate decide before `run_tool`: a
`deny` rule stops the call, an `allow` rule lets it through without a
question, otherwise the user is asked with Allow once / Allow for session /
Deny. A server's claims are shown, never trusted: a read-only hint does not
skip the question; only the user's rules or answers do.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from agentls.core.tools.contract import ToolContext, ToolNeed, default_need, failure_result
from agentls.features.mcp.connection import McpCallError
from agentls.features.mcp.manager import McpManager, McpTool
from agentls.features.mcp.results import render_result

__all__ = ["McpTools", "approval_prompt", "approval_summary"]

log = logging.getLogger("agentls.mcp")

_HINTS = (("readOnlyHint", "read-only"), ("destructiveHint", "destructive"),
          ("idempotentHint", "idempotent"), ("openWorldHint", "reaches outside systems"))


def approval_prompt(tool: McpTool, arguments: dict[str, Any]) -> str:
    """The question for one call: every argument whole (no cut: the server
    receives all of it), with characters that would not show as themselves
    (U+202E, zero-width, control) written as <U+XXXX> (core/trust_display)."""
    from agentls.core.trust.display import visible

    try:
        shown = json.dumps(arguments, ensure_ascii=False, indent=1, default=str)
    except (TypeError, ValueError):
        shown = repr(arguments)
    claims = [f"{label}: {'yes' if tool.annotations[key] else 'no'}"
              for key, label in _HINTS if isinstance(tool.annotations.get(key), bool)]
    lines = [f"The agent wants to call the MCP tool {visible(repr(tool.name))} of server "
             f"{visible(repr(tool.server))} ({tool.exposed}) with:", "", visible(shown)]
    if claims:
        lines += ["", "The server says the tool is " + ", ".join(claims)
                  + " (its own claim, not checked)."]
    lines += ["", "Allow it?"]
    return "\n".join(lines)


def approval_summary(tool: McpTool, arguments: dict[str, Any]) -> str:
    """The question's short form, for when its whole text (approval_prompt)
    is too long for a message: the tool, the server, how many arguments
    and how long they are (the document holds every byte of them)."""
    from agentls.core.trust.display import visible

    try:
        size = len(json.dumps(arguments, ensure_ascii=False, default=str))
    except (TypeError, ValueError):
        size = len(repr(arguments))
    names = [visible(str(name))[:40] for name in arguments]
    listed = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    count = f"{len(names)} argument{'s' if len(names) != 1 else ''}"
    return "\n".join([
        f"The agent wants to call the MCP tool {visible(repr(tool.name))[:80]} of server "
        f"{visible(repr(tool.server))[:80]} ({tool.exposed}) with {count}"
        + (f" ({listed})" if names else "") + f", {size:,} characters in all.",
        "", "Allow it?"])


class McpTools:
    """ToolPlugin over an McpManager; its tools change at run time."""

    name = "mcp"
    version = "0.1.0"

    def __init__(self, manager: McpManager) -> None:
        self.manager = manager

    def init(self, config: dict[str, Any]) -> dict[str, Any]:
        return {}

    def tools_version(self, state: dict[str, Any]) -> int:
        return self.manager.version

    def get_tool_schemas(self, state: dict[str, Any], *, prepared: Any = None
                         ) -> list[dict[str, Any]]:
        return [{"name": t.exposed,
                 "description": (t.description or f"{t.name} (MCP server {t.server})")
                 + f"\n(MCP server {t.server}, tool {t.name})",
                 "parameters": t.schema}
                for t in self.manager.tools.values()]

    def format_tool_call_preview(self, tool_name: str | None, payload: Any, state: Any,
                                 **kwargs: Any) -> str:
        tool = self.manager.tools.get(tool_name or "")
        return f"MCP {tool.server}/{tool.name}" if tool else ""

    def tool_need(self, tool_name: str, arguments: Mapping[str, Any],
                  state: dict[str, Any]) -> ToolNeed:
        need = default_need(arguments)  # path-like arguments stay confined
        tool = self.manager.tools.get(tool_name)
        if tool is None:
            return need
        return replace(need, remember=True, question=approval_prompt(tool, dict(arguments)),
                       summary=approval_summary(tool, dict(arguments)))

    async def run_tool(self, tool_name: str, arguments: dict[str, Any], state: dict[str, Any],
                       context: ToolContext) -> dict[str, Any]:
        tool = self.manager.tools.get(tool_name)
        if tool is None:
            return failure_result(f"The MCP tool {tool_name!r} is not available now (its server "
                                  "stopped or no longer lists it).", "unknown_tool")
        conn = self.manager.connections.get(tool.server)
        if conn is None:
            return failure_result(f"The MCP server {tool.server!r} is not configured any more.",
                                  "mcp_error")
        try:
            raw = await conn.call_tool(tool.name, arguments, context.progress)
        except McpCallError as exc:
            return failure_result(str(exc), "mcp_error")
        ok, text = render_result(raw)
        if not ok:
            return failure_result(f"MCP tool {tool.server}/{tool.name} failed: {text}",
                                  "mcp_tool_error")
        return {"success": True, "result": text}
