"""Plugin protocols (agent_core's `types`) with their documented
defaults.

A plugin may subclass one of these Protocols explicitly to inherit the
defaults, or implement only the methods it needs: `plugin_call()` falls back
to the protocol's default for anything a plugin leaves out (agent_core's
signatures stay supported this way). What a feature offers beyond agent_core
(start, tool_plugins, hook_modules, complete, enrich_prompt, ...) is a typed
Protocol each (core/plugins/capabilities.py), found with core.registry's `offers` /
`offering`, never by probing for method names.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentls.core.types.conversation import Session, ToolDescriptor

__all__ = [
    "BasePlugin",
    "FeaturePlugin",
    "ProviderExtensionPlugin",
    "ProviderPlugin",
    "ToolInteropContribution",
    "ToolPlugin",
    "plugin_call",
    "plugin_name",
    "plugin_priority",
]

DEFAULT_PRIORITY = 100


@dataclass
class ToolInteropContribution:
    """Tool-call format accessors/adapters a plugin contributes (none by default)."""

    accessors: list[Any] = field(default_factory=list)
    adapters: list[Any] = field(default_factory=list)


class BasePlugin(Protocol):
    """Identity, configuration UI and lifecycle shared by non-tool plugins."""

    name: str
    version: str

    def get_config_schema(self) -> dict[str, Any]:
        return {}

    def get_ui_elements(
        self, config: dict[str, Any], context: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        return []


class _Enablement(Protocol):
    def required_tags(self) -> list[str]:
        return []

    def forbidden_tags(self) -> list[str]:
        return []

    def is_enabled(
        self,
        config: dict[str, Any],
        tags: list[str],
        models: list[dict[str, Any]],
        context: dict[str, Any],
    ) -> bool | None:
        return None

    def get_tags(self, config: dict[str, Any], models: list[dict[str, Any]]) -> list[str]:
        return []


class _ColdPath(Protocol):
    """Message transforms and lifecycle shared by features and provider
    extensions (identical in agent_core's two protocols)."""

    def init(self, config: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        return state

    def initialize_request(
        self,
        native_messages: list[dict[str, Any]],
        state: dict[str, Any],
        *,
        context: dict[str, Any] | None = None,
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return native_messages, state

    def to_native_messages(
        self,
        messages: list[dict[str, Any]],
        native_messages: list[dict[str, Any]],
        state: dict[str, Any] | None = None,
        *,
        context: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        return list(native_messages)

    def from_native_messages(
        self,
        native_messages: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        state: dict[str, Any] | None = None,
        *,
        context: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        return list(messages)

    def finalize(
        self,
        final_messages: list[dict[str, Any]],
        native_messages: list[dict[str, Any]],
        state: dict[str, Any],
        *,
        context: dict[str, Any] | None = None,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
        return final_messages, native_messages, state

    def get_models(
        self, config: dict[str, Any], models: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        return list(models)

    def get_actions(self, state: dict[str, Any]) -> list[dict[str, Any]]:
        return []

    def execute_action(
        self,
        action_id: str,
        session: Session,
        native_messages: list[dict[str, Any]],
        params: dict[str, Any],
        context: dict[str, Any] | None,
        state: dict[str, Any],
    ) -> dict[str, Any]:
        return {"native_messages": list(native_messages)}


class FeaturePlugin(BasePlugin, _Enablement, _ColdPath, Protocol):
    """Cold-path feature: completions, templates, message transforms, actions."""

    priority: int

    def prepare_tools(
        self,
        config: dict[str, Any],
        tools: list[ToolDescriptor],
        context: dict[str, Any] | None = None,
    ) -> list[ToolDescriptor]:
        return list(tools)

    def get_completions(self, config: dict[str, Any], text: str) -> list[dict[str, Any]]:
        return []

    def apply_completion(
        self, config: dict[str, Any], text: str, completion: dict[str, Any]
    ) -> str:
        return ""

    def get_template(self, config: dict[str, Any]) -> str:
        return ""


class ProviderExtensionPlugin(BasePlugin, _Enablement, _ColdPath, Protocol):
    """Observes/transforms provider chunks (hot path) and finals (cold path)."""

    priority: int

    def accepted_tool_schema_formats(
        self, config: dict[str, Any], state: dict[str, Any] | None = None
    ) -> list[str]:
        return []

    def emitted_tool_call_formats(
        self, config: dict[str, Any], state: dict[str, Any] | None = None
    ) -> list[str]:
        return []

    def get_tool_interop_contribution(
        self, config: dict[str, Any], state: dict[str, Any] | None = None
    ) -> ToolInteropContribution:
        return ToolInteropContribution()

    def process_chunk(
        self,
        native_chunk: dict[str, Any] | None,
        partial_messages: list[dict[str, Any]],
        final_messages: list[dict[str, Any]],
        native_messages: list[dict[str, Any]],
        state: dict[str, Any],
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
        return partial_messages, final_messages, native_messages, state


class ProviderPlugin(BasePlugin, _Enablement, Protocol):
    """agent_core's provider protocol (native messages, call_api/stream_api).

    agentls' own providers implement `agentls.core.provider.contract.Provider`; an
    adapter runs a ProviderPlugin as one (see agentls.providers).
    """

    def init(self, config: dict[str, Any]) -> dict[str, Any]:
        return {"config": config}

    def accepted_tool_schema_formats(
        self, config: dict[str, Any], state: dict[str, Any] | None = None
    ) -> list[str]:
        return []

    def emitted_tool_call_formats(
        self, config: dict[str, Any], state: dict[str, Any] | None = None
    ) -> list[str]:
        return []

    def get_tool_interop_contribution(
        self, config: dict[str, Any], state: dict[str, Any] | None = None
    ) -> ToolInteropContribution:
        return ToolInteropContribution()

    def get_models(self, config: dict[str, Any]) -> list[dict[str, Any]]:
        return []

    def initialize_request(
        self,
        native_messages: list[dict[str, Any]],
        state: dict[str, Any],
        *,
        request_id: str | None = None,
        context: dict[str, Any] | None = None,
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return native_messages, state

    def to_native_messages(
        self,
        messages: list[dict[str, Any]],
        state: dict[str, Any],
        *,
        context: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        return [
            {"role": m.get("role", "user"), "content": m.get("content", "")}
            for m in messages
            if isinstance(m, dict)
        ]

    def from_native_messages(
        self,
        native_messages: list[dict[str, Any]],
        state: dict[str, Any],
        *,
        context: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        finals: list[dict[str, Any]] = []
        for m in native_messages:
            if not isinstance(m, dict) or not ("role" in m or "content" in m):
                continue
            finals.append(
                {
                    "role": m.get("role", "assistant"),
                    "content": m.get("content", ""),
                    "metadata": {},
                }
            )
        return finals

    def call_api(
        self,
        native_messages: list[dict[str, Any]],
        state: dict[str, Any],
        *,
        request_id: str | None = None,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
        return [], [], native_messages, state

    def stream_api(
        self,
        native_messages: list[dict[str, Any]],
        state: dict[str, Any],
        *,
        request_id: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        return iter([])

    def process_chunk(
        self,
        native_chunk: dict[str, Any],
        native_messages: list[dict[str, Any]],
        state: dict[str, Any],
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
        return [], [], native_messages, state

    def finalize(
        self,
        native_messages: list[dict[str, Any]],
        state: dict[str, Any],
        *,
        context: dict[str, Any] | None = None,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
        return [], native_messages, state

    def cancel_request(self, request_id: str) -> bool:
        return False

    def to_display_format(self, message: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        return message


class ToolPlugin(_Enablement, Protocol):
    """Provides tool schemas and executes tool calls with its own state."""

    name: str
    version: str

    def get_config_schema(self) -> dict[str, Any]:
        return {}

    def get_ui_elements(
        self, config: dict[str, Any], context: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        return []

    def init(self, config: dict[str, Any]) -> dict[str, Any]:
        return {"config": config}

    def prepare(
        self,
        config: dict[str, Any],
        state: dict[str, Any],
        *,
        context: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return {}

    async def prepare_async(
        self,
        config: dict[str, Any],
        state: dict[str, Any],
        *,
        context: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return self.prepare(config, state, context=context)

    def get_tool_schemas(
        self, state: dict[str, Any], *, prepared: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        return []

    def get_tool_interop_contribution(self, state: dict[str, Any]) -> ToolInteropContribution:
        return ToolInteropContribution()

    def can_handle_tool_call(
        self,
        tool_name: str | None,
        payload: Any,
        state: dict[str, Any],
        *,
        payload_kind: str | None = None,
        payload_format: str | None = None,
        payload_metadata: dict[str, Any] | None = None,
        tool_call: dict[str, Any] | None = None,
        tool_schema: dict[str, Any] | None = None,
        prepared: dict[str, Any] | None = None,
    ) -> bool | None:
        return None

    def execute_tool(
        self,
        tool_name: str | None,
        payload: Any,
        state: dict[str, Any],
        *,
        payload_kind: str | None = None,
        payload_format: str | None = None,
        payload_metadata: dict[str, Any] | None = None,
        tool_call: dict[str, Any] | None = None,
        cancellation: Any | None = None,
        context: dict[str, Any] | None = None,
        prepared: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return {"success": False, "error": f"Unknown tool: {tool_name}"}

    async def execute_tool_async(
        self,
        tool_name: str | None,
        payload: Any,
        state: dict[str, Any],
        *,
        payload_kind: str | None = None,
        payload_format: str | None = None,
        payload_metadata: dict[str, Any] | None = None,
        tool_call: dict[str, Any] | None = None,
        cancellation: Any | None = None,
        context: dict[str, Any] | None = None,
        prepared: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return self.execute_tool(
            tool_name,
            payload,
            state,
            payload_kind=payload_kind,
            payload_format=payload_format,
            payload_metadata=payload_metadata,
            tool_call=tool_call,
            cancellation=cancellation,
            context=context,
            prepared=prepared,
        )

    def stream_tool(
        self,
        tool_name: str | None,
        payload: Any,
        state: dict[str, Any],
        **kwargs: Any,
    ) -> Iterator[dict[str, Any]]:
        return iter(())

    async def stream_tool_async(
        self,
        tool_name: str | None,
        payload: Any,
        state: dict[str, Any],
        **kwargs: Any,
    ) -> AsyncIterator[dict[str, Any]]:
        for chunk in self.stream_tool(tool_name, payload, state, **kwargs):
            yield chunk

    def format_tool_call_preview(
        self,
        tool_name: str | None,
        payload: Any,
        state: dict[str, Any],
        *,
        payload_kind: str | None = None,
        payload_format: str | None = None,
        payload_metadata: dict[str, Any] | None = None,
        tool_call: dict[str, Any] | None = None,
        prepared: dict[str, Any] | None = None,
    ) -> str:
        return ""

    def format_tool_result(self, result: dict[str, Any], state: dict[str, Any]) -> Any:
        if result.get("success"):
            return f"Result: {result.get('result')}"
        return f"Error: {result.get('error')}"

    def to_display_format(
        self, text: str, result: dict[str, Any], state: dict[str, Any]
    ) -> dict[str, Any]:
        return {"type": "text", "content": text}


def plugin_name(plugin: Any) -> str:
    return str(getattr(plugin, "name", None) or type(plugin).__name__)


def plugin_priority(plugin: Any) -> int:
    value = getattr(plugin, "priority", DEFAULT_PRIORITY)
    return value if isinstance(value, int) else DEFAULT_PRIORITY


def plugin_call(plugin: Any, protocol: type, method: str, *args: Any, **kwargs: Any) -> Any:
    """Call `plugin.method(...)`, or the protocol's default when the plugin
    does not define it (plugins implement only what they need)."""
    bound = getattr(plugin, method, None)
    if callable(bound):
        return bound(*args, **kwargs)
    default = getattr(protocol, method)
    return default(plugin, *args, **kwargs)

