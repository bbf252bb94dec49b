"""`SingleTool`: the plugin scaffolding every built-in tool shares.

Each built-in ToolPlugin offers exactly one tool whose schema is its class
attributes; subclasses write only `execute_tool_async` (and previews).
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["TOOLS_VERSION", "SingleTool"]

TOOLS_VERSION = "0.1.0"


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
