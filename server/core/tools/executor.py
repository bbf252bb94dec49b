"""Tool catalog and execution over ToolPlugins.

A plugin whose tools come and go while the server runs (MCP servers start
in the background and announce `tools/list_changed`) defines
`tools_version(state) -> int`; the executor re-reads its schemas whenever
that number changes, so a turn always offers the tools available now.

Tool plugins may describe their tools in OpenAI's function format, the flat
{name, description, parameters} form, or Anthropic's {name, description,
input_schema}; `normalize_tool_schema` brings them to the flat form
(`ToolSpec`) that providers translate to their own wire format.

A tool plugin written for agentls implements `TypedTool` (core/tools/contract.py,
the one file to read to write a tool): `tool_need` declares what a call will do before it runs,
`prepare_call` (optional) adds what the user is shown, and `run_tool` runs it
with a frozen `ToolContext`. An agent_core ToolPlugin (`execute_tool_async(...,
context=dict)`) runs through the one adapter here, with
`ToolContext.as_seed_context()` and the default need (it asks).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentls.core.plugins.protocols import ToolPlugin, plugin_call, plugin_name
from agentls.core.plugins.registry import offers
from agentls.core.provider.contract import ToolSpec
from agentls.core.tools.contract import (
    DeclaresNeed,
    DynamicTools,
    PreparesCall,
    RunsTool,
    ToolContext,
    ToolNeed,
    ToolRefused,
    default_need,
)
from agentls.core.types.conversation import ToolDescriptor
from agentls.core.types.messages import ToolCall, ToolResult

__all__ = ["ToolExecution", "ToolExecutor", "failed", "normalize_tool_schema"]


log = logging.getLogger("agentls.tools")


def normalize_tool_schema(schema: dict[str, Any]) -> ToolSpec | None:
    if schema.get("type") == "function" and isinstance(schema.get("function"), dict):
        schema = schema["function"]
    name = schema.get("name")
    if not isinstance(name, str) or not name:
        return None
    parameters = (
        schema.get("parameters")
        or schema.get("input_schema")
        or {
            "type": "object",
            "properties": {},
        }
    )
    return {
        "name": name,
        "description": str(schema.get("description") or ""),
        "parameters": parameters,
    }


@dataclass(frozen=True)
class ToolExecution:
    """A finished tool call: the result, and the text the model is shown."""

    call: ToolCall
    result: ToolResult
    content: str


@dataclass
class _Bound:
    plugin: Any
    state: dict[str, Any]
    descriptor: ToolDescriptor


class ToolExecutor:
    """Maps tool names to the enabled plugins that provide them."""

    def __init__(self, plugins: Sequence[Any], config: dict[str, Any] | None = None) -> None:
        self._static: dict[str, _Bound] = {}
        # (plugin, state, version seen) of plugins whose tools change at run time
        self._dynamic: list[list[Any]] = []
        self._dynamic_tools: dict[str, _Bound] = {}
        config = config or {}
        for plugin in plugins:
            try:
                state = plugin_call(plugin, ToolPlugin, "init", config) or {}
            except Exception:
                log.exception("Tool plugin %s failed to initialise; skipped", plugin_name(plugin))
                continue
            if offers(plugin, DynamicTools):
                self._dynamic.append([plugin, state, None])
                continue
            self._bind(plugin, state, self._static, self._static)
        self._refresh()

    def _bind(self, plugin: Any, state: dict[str, Any], into: dict[str, _Bound],
              taken: dict[str, _Bound]) -> None:
        try:
            schemas = plugin_call(plugin, ToolPlugin, "get_tool_schemas", state) or []
        except Exception:
            log.exception("Tool plugin %s failed to list its tools; skipped", plugin_name(plugin))
            return
        for raw in schemas:
            spec = normalize_tool_schema(raw) if isinstance(raw, dict) else None
            if spec is None:
                log.error("Tool plugin %s gave an invalid schema: %r", plugin_name(plugin), raw)
                continue
            holder = taken.get(spec["name"]) or into.get(spec["name"])
            if holder is not None:
                log.warning("Tool %r is provided twice; keeping %s", spec["name"],
                            plugin_name(holder.plugin))
                continue
            descriptor = ToolDescriptor(plugin_name(plugin), spec["name"], spec)
            into[spec["name"]] = _Bound(plugin, state, descriptor)

    def _refresh(self) -> None:
        """Re-read the schemas of dynamic plugins whose tools_version moved."""
        changed = False
        for entry in self._dynamic:
            plugin, state, seen = entry
            try:
                version = plugin.tools_version(state)
            except Exception:
                log.exception("tools_version of %s failed", plugin_name(plugin))
                continue
            if version != seen:
                entry[2] = version
                changed = True
        if not changed:
            return
        tools: dict[str, _Bound] = {}
        for plugin, state, _ in self._dynamic:
            self._bind(plugin, state, tools, self._static)
        self._dynamic_tools = tools

    @property
    def _tools(self) -> dict[str, _Bound]:
        if self._dynamic:
            self._refresh()
            return {**self._static, **self._dynamic_tools}
        return self._static

    @property
    def descriptors(self) -> list[ToolDescriptor]:
        return [bound.descriptor for bound in self._tools.values()]

    @property
    def specs(self) -> list[ToolSpec]:
        return [bound.descriptor.schema for bound in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def preview(self, call: ToolCall) -> str:
        bound = self._tools.get(call.tool)
        if bound is None:
            return ""
        try:
            return str(
                plugin_call(
                    bound.plugin,
                    ToolPlugin,
                    "format_tool_call_preview",
                    call.tool,
                    call.arguments,
                    bound.state,
                    tool_call=call.model_dump(),
                )
                or ""
            )
        except Exception:
            log.exception("format_tool_call_preview failed for %s", call.tool)
            return ""

    def unknown(self, call: ToolCall) -> ToolExecution | None:
        """The failure of a call to a tool nobody provides, else None."""
        tools = self._tools
        if call.tool in tools:
            return None
        known = ", ".join(sorted(tools)) or "none"
        return failed(call, f"Unknown tool {call.tool!r}. Available tools: {known}.",
                      "unknown_tool")

    def need(self, call: ToolCall) -> ToolNeed:
        """What the call will do, as its tool declares it (the default need
        for a tool that declares nothing). ToolRefused for bad arguments."""
        bound = self._tools.get(call.tool)
        plugin = bound.plugin if bound is not None else None
        if bound is None or not offers(plugin, DeclaresNeed):
            return default_need(call.arguments)
        need = plugin.tool_need(call.tool, call.arguments, bound.state)
        if not isinstance(need, ToolNeed):
            raise ToolRefused(f"The tool {call.tool!r} did not say what it will do; not run.",
                              "tool_error")
        return need

    async def prepare(self, call: ToolCall, context: ToolContext, need: ToolNeed) -> ToolNeed:
        """`need` completed by the tool's prepare_call, if it has one."""
        bound = self._tools.get(call.tool)
        plugin = bound.plugin if bound is not None else None
        if bound is None or not offers(plugin, PreparesCall):
            return need
        prepared = await plugin.prepare_call(call.tool, dict(call.arguments), bound.state,
                                             context, need)
        return prepared if isinstance(prepared, ToolNeed) else need

    async def execute(self, call: ToolCall, context: ToolContext | None = None) -> ToolExecution:
        tools = self._tools
        bound = tools.get(call.tool)
        if bound is None:
            return self.unknown(call) or failed(call, f"Unknown tool {call.tool!r}.",
                                                "unknown_tool")
        context = context or ToolContext()
        plugin = bound.plugin
        try:
            if offers(plugin, RunsTool):
                raw = await plugin.run_tool(call.tool, dict(call.arguments), bound.state, context)
            else:  # an agent_core ToolPlugin: the one adapter
                raw = await plugin_call(
                    bound.plugin,
                    ToolPlugin,
                    "execute_tool_async",
                    call.tool,
                    call.arguments,
                    bound.state,
                    payload_kind="object",
                    tool_call=call.model_dump(),
                    context=context.as_seed_context(),
                )
        except ToolRefused as refused:
            raw = refused.result()
        except Exception as exc:
            log.exception("Tool %s raised", call.tool)
            return failed(
                call, f"Tool {call.tool!r} raised {type(exc).__name__}: {exc}", "tool_error"
            )
        raw = raw if isinstance(raw, dict) else {"success": True, "result": raw}
        result = _to_tool_result(raw)
        try:
            content = plugin_call(bound.plugin, ToolPlugin, "format_tool_result", raw, bound.state)
        except Exception:
            log.exception("format_tool_result failed for %s", call.tool)
            content = None
        if not isinstance(content, str):
            content = _default_content(result)
        return ToolExecution(call, result, content)


def _to_tool_result(raw: dict[str, Any]) -> ToolResult:
    success = bool(raw.get("success", "error" not in raw))
    output = raw.get("output", raw.get("result"))
    error = raw.get("error")
    if error is not None and not isinstance(error, dict):
        error = {"message": str(error)}
    if not success and error is None:
        error = {"message": "The tool reported failure without a message."}
    return ToolResult(success=success, output=output, error=error)


def _default_content(result: ToolResult) -> str:
    if result.success:
        return "" if result.output is None else str(result.output)
    return f"Error: {(result.error or {}).get('message', result.error)}"


def failed(call: ToolCall, message: str, code: str) -> ToolExecution:
    """A call that did not run (or failed), as the model is told it."""
    result = ToolResult(success=False, error={"message": message, "code": code})
    return ToolExecution(call, result, f"Error: {message}")
