"""MCP tools as agentls tools: one ToolPlugin for every running server's
tools, named `mcp__<server>__<tool>`.

Approval: the policy hook (features/policy.py) runs first like for every
tool (a `deny` rule stops the call there, an `allow` rule lets it through
without a question). Otherwise the verdict reaches here as "ask" and the
call is put to the user through the core's ApprovalGate with Allow once /
Allow for session / Deny, showing the server, the tool, the arguments and
what the server claims about the tool (readOnlyHint, destructiveHint...).
A server's claims are shown, never trusted: a read-only hint does not skip
the question; only the user's rules or answers do.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from agentls.core.approval import EDIT_OPTIONS, ApprovalRequest

from .connection import McpCallError
from .manager import McpManager, McpTool
from .results import render_result

__all__ = ["McpTools", "approval_prompt"]

log = logging.getLogger("agentls.mcp")

_HINTS = (("readOnlyHint", "read-only"), ("destructiveHint", "destructive"),
          ("idempotentHint", "idempotent"), ("openWorldHint", "reaches outside systems"))


def approval_prompt(tool: McpTool, arguments: dict[str, Any]) -> str:
    """The question for one call: every argument whole (no cut: the server
    receives all of it), with characters that would not show as themselves
    (U+202E, zero-width, control) written as <U+XXXX> (core/trust_display)."""
    from agentls.core.trust_display import visible

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


class McpTools:
    """ToolPlugin over an McpManager; its tools change at run time."""

    name = "mcp"
    version = "0.1.0"

    def __init__(self, manager: McpManager) -> None:
        self.manager = manager

    def init(self, config: dict[str, Any]) -> dict[str, Any]:
        approval = ((config.get("settings") or {}).get("approval") or {})
        return {"approval": approval}

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

    async def execute_tool_async(self, tool_name: str | None, payload: Any,
                                 state: dict[str, Any], *, context: dict[str, Any] | None = None,
                                 **kwargs: Any) -> dict[str, Any]:
        context = context or {}
        tool = self.manager.tools.get(tool_name or "")
        if tool is None:
            return {"success": False, "error": {
                "message": f"The MCP tool {tool_name!r} is not available now (its server "
                           "stopped or no longer lists it).", "code": "unknown_tool"}}
        arguments = dict(payload) if isinstance(payload, dict) else {}
        denied = await self._approve(tool, arguments, state, context)
        if denied is not None:
            return {"success": False, "error": {"message": denied, "code": "denied"}}
        conn = self.manager.connections.get(tool.server)
        if conn is None:
            return {"success": False, "error": {
                "message": f"The MCP server {tool.server!r} is not configured any more.",
                "code": "mcp_error"}}
        progress = context.get("progress")
        try:
            raw = await conn.call_tool(tool.name, arguments,
                                       progress if callable(progress) else None)
        except McpCallError as exc:
            return {"success": False, "error": {"message": str(exc), "code": "mcp_error"}}
        ok, text = render_result(raw)
        if not ok:
            return {"success": False, "error": {
                "message": f"MCP tool {tool.server}/{tool.name} failed: {text}",
                "code": "mcp_tool_error"}}
        return {"success": True, "result": text}

    async def _approve(self, tool: McpTool, arguments: dict[str, Any], state: dict[str, Any],
                       context: dict[str, Any]) -> str | None:
        """None when the call may run, else why not."""
        verdict = context.get("approval", "ask")
        if verdict == "allow":
            return None
        core = context.get("core")
        gate = getattr(core, "gate", None)
        session_id = str(context.get("session_id") or "")
        if gate is None:
            return (f"{tool.exposed} needs the user's approval and no approval channel is "
                    "attached; denied.")
        if not gate.needs_user(verdict, session_id, tool.exposed):
            return None
        approval = state.get("approval") or {}
        timeout = approval.get("timeoutSeconds")
        request = ApprovalRequest(
            prompt=approval_prompt(tool, arguments),
            options=EDIT_OPTIONS,
            timeout=float(timeout) if isinstance(timeout, int | float) else 300.0,
            default="allow" if approval.get("default") == "allow" else "deny",
            session_id=session_id,
            tool_name=tool.exposed,
            tool_input=arguments,
            protected=verdict == "protected",
        )
        decision = await gate.ask(request)
        return None if decision.allowed else decision.reason
