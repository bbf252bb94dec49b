"""`SingleTool`: the plugin scaffolding every built-in tool shares.

Each built-in tool plugin offers exactly one tool whose schema is its class
attributes, and is a `TypedTool` (core/tools/contract.py): subclasses write
`tool_need` (what a call will do, for the approval gate), `call` (the work,
raising ToolRefused or WorkspacePathError for a failure the model should
read) and `render` (the output as the model sees it). The failure branch of
the result and of its text lives here, once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from agentls.core.tools.contract import ToolContext, ToolNeed, ToolRefused, failure_result
from agentls.features.tools.workspace import WorkspacePathError

__all__ = ["TOOLS_VERSION", "SingleTool", "error_text",]

TOOLS_VERSION = "0.1.0"


def error_text(result: Mapping[str, Any]) -> str:
    """The model's text for a failed result: `Error: <message>`."""
    error = result.get("error") or {}
    message = error.get("message") if isinstance(error, dict) else error
    return f"Error: {message}"


class SingleTool:
    name: ClassVar[str]
    version: ClassVar[str] = TOOLS_VERSION
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]]

    def init(self, config: dict[str, Any]) -> dict[str, Any]:
        return {"config": config}

    def get_tool_schemas(self, state: dict[str, Any], **kwargs: Any) -> list[dict[str, Any]]:
        return [{"name": self.name, "description": self.description,
                 "parameters": self.parameters}]

    def get_ui_elements(
        self, config: dict[str, Any], context: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        return []

    # -- TypedTool --------------------------------------------------------------------
    def tool_need(self, tool_name: str, arguments: Mapping[str, Any],
                  state: dict[str, Any]) -> ToolNeed:
        raise NotImplementedError

    async def run_tool(self, tool_name: str, arguments: dict[str, Any], state: dict[str, Any],
                       context: ToolContext) -> dict[str, Any]:
        """`call`, with its failures as results."""
        try:
            return await self.call(arguments, state, context)
        except ToolRefused as refused:
            return refused.result()
        except WorkspacePathError as exc:
            return failure_result(str(exc), exc.code)

    async def call(self, arguments: dict[str, Any], state: dict[str, Any],
                   context: ToolContext) -> dict[str, Any]:
        raise NotImplementedError

    # -- agent_core's entry point: not a way around the approval gate ------------------
    async def execute_tool_async(self, tool_name: str | None, payload: Any,
                                 state: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return failure_result(
            f"{self.name} runs only through agentls' tool executor, after the approval gate "
            "cleared the call (ToolExecutor.execute -> run_tool).", "not_approved")

    # -- what the model sees -------------------------------------------------------------
    def format_tool_result(self, result: dict[str, Any], state: dict[str, Any]) -> str:
        output = result.get("output")
        if not result.get("success") and not isinstance(output, dict):
            return error_text(result)
        return self.render(output if isinstance(output, dict) else {})

    def render(self, output: dict[str, Any]) -> str:
        raise NotImplementedError
