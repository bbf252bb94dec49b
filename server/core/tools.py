"""Tool catalog and execution over ToolPlugins.

Tool plugins may describe their tools in OpenAI's function format, the flat
{name, description, parameters} form, or Anthropic's {name, description,
input_schema}; `normalize_tool_schema` brings them to the flat form
(`ToolSpec`) that providers translate to their own wire format.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .models import ToolCall, ToolResult
from .plugins import ToolPlugin, plugin_call, plugin_name
from .provider import ToolSpec
from .session_types import ToolDescriptor

__all__ = ["ToolExecution", "ToolExecutor", "normalize_tool_schema"]

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
        self._tools: dict[str, _Bound] = {}
        config = config or {}
        for plugin in plugins:
            try:
                state = plugin_call(plugin, ToolPlugin, "init", config) or {}
                schemas = plugin_call(plugin, ToolPlugin, "get_tool_schemas", state) or []
            except Exception:
                log.exception("Tool plugin %s failed to initialise; skipped", plugin_name(plugin))
                continue
            for raw in schemas:
                spec = normalize_tool_schema(raw) if isinstance(raw, dict) else None
                if spec is None:
                    log.error("Tool plugin %s gave an invalid schema: %r", plugin_name(plugin), raw)
                    continue
                if spec["name"] in self._tools:
                    log.warning(
                        "Tool %r is provided twice; keeping %s",
                        spec["name"],
                        plugin_name(self._tools[spec["name"]].plugin),
                    )
                    continue
                descriptor = ToolDescriptor(plugin_name(plugin), spec["name"], spec)
                self._tools[spec["name"]] = _Bound(plugin, state, descriptor)

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

    async def execute(self, call: ToolCall, context: dict[str, Any] | None = None) -> ToolExecution:
        bound = self._tools.get(call.tool)
        if bound is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return _failed(
                call, f"Unknown tool {call.tool!r}. Available tools: {known}.", "unknown_tool"
            )
        try:
            raw = await plugin_call(
                bound.plugin,
                ToolPlugin,
                "execute_tool_async",
                call.tool,
                call.arguments,
                bound.state,
                payload_kind="object",
                tool_call=call.model_dump(),
                context=context,
            )
        except Exception as exc:
            log.exception("Tool %s raised", call.tool)
            return _failed(
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


def _failed(call: ToolCall, message: str, code: str) -> ToolExecution:
    result = ToolResult(success=False, error={"message": message, "code": code})
    return ToolExecution(call, result, f"Error: {message}")
