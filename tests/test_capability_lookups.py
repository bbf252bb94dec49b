"""The server finds what plugins offer by typed contract (core.registry.offers):
the built-in plugins offer the contracts lsp asks them for, AgentHost.feature
hands out only a plugin that offers the asked Protocol, and the tool executor
asks for each optional part of a tool plugin on its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentls.core.editor.inline_completion import InlineCompleter
from agentls.core.editor.next_edit import NextEditSuggester
from agentls.core.plugins.capabilities import StatusReporter, StatusSource, TemplateSource
from agentls.core.plugins.registry import PluginRegistry, offers
from agentls.core.provider.contract import ProviderConfig
from agentls.core.tools.contract import DeclaresNeed, RunsTool, ToolContext, ToolNeed
from agentls.core.tools.executor import ToolExecutor
from agentls.core.types.messages import ToolCall
from agentls.lsp.state import ServerState


def test_builtin_features_offer_the_contracts_lsp_asks_for() -> None:
    registry = PluginRegistry.discover()
    templates, mcp = registry.get("feature", "templates"), registry.get("feature", "mcp")
    inline, next_edit = (registry.get("feature", "inline-completion"),
                         registry.get("feature", "next-edit"))
    assert offers(templates, TemplateSource) and offers(mcp, TemplateSource)
    assert offers(mcp, StatusSource) and not offers(templates, StatusSource)
    assert offers(next_edit, NextEditSuggester) and not offers(next_edit, InlineCompleter)
    assert offers(inline, InlineCompleter) and not offers(inline, NextEditSuggester)


@pytest.mark.parametrize("name", ["openai", "ollama"])
def test_fim_providers_report_status(name: str) -> None:
    factory = PluginRegistry.discover().provider_factory(name)
    provider = factory(ProviderConfig(name=name, base_url="http://127.0.0.1:9"))
    assert offers(provider, StatusReporter)
    assert "fim" in provider.status_report()
    scripted = PluginRegistry.discover().provider_factory("scripted")(ProviderConfig(name="s"))
    assert not offers(scripted, StatusReporter)


class _Suggests:
    name = "next-edit"
    version = "1"

    async def suggest(self, request: Any, provider: Any, settings: Any,
                      model: str | None = None) -> Any:
        return None


class _DoesNotSuggest:
    name = "next-edit"
    version = "1"

    def get_completions(self, config: dict[str, Any], text: str) -> list[Any]:
        return []


def _state(tmp_path: Path, plugin: Any) -> ServerState:
    state = ServerState(environ={"AGENTLS_CONFIG_FILE": str(tmp_path / "none.toml"),
                                 "AGENTLS_STATE_DIR": str(tmp_path / "state")})
    registry = PluginRegistry.discover()
    registry.register("feature", "next-edit", plugin)
    state.host._registry = registry
    state.host.set_init_options({"provider": "scripted"})
    return state


def test_state_feature_hands_out_only_a_plugin_offering_the_protocol(tmp_path: Path) -> None:
    state = _state(tmp_path, _Suggests())
    found = state.host.feature("next-edit", NextEditSuggester)
    assert isinstance(found, _Suggests)
    assert state.host.feature("next-edit", InlineCompleter) is None
    assert state.host.feature("no-such-feature", NextEditSuggester) is None
    # Off in the settings: not handed out after the reload.
    state.host.set_init_options({"provider": "scripted", "features": {"disabled": ["next-edit"]}})
    assert state.host.feature("next-edit", NextEditSuggester) is None

    assert _state(tmp_path, _DoesNotSuggest()).host.feature("next-edit", NextEditSuggester) is None


class _NeedOnly:
    """Declares its need but has no run_tool: runs through the agent_core adapter."""

    name = "need-only"
    version = "1"

    def get_tool_schemas(self, state: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"name": "probe", "description": "", "parameters": {"type": "object"}}]

    def tool_need(self, tool_name: str, arguments: Any, state: dict[str, Any]) -> ToolNeed:
        return ToolNeed(kind="read", title="declared")

    async def execute_tool_async(self, tool_name: str, arguments: Any, state: Any,
                                 **kwargs: Any) -> dict[str, Any]:
        return {"success": True, "result": "seed path"}


async def test_tool_executor_asks_for_each_part_on_its_own() -> None:
    plugin = _NeedOnly()
    assert offers(plugin, DeclaresNeed) and not offers(plugin, RunsTool)
    executor = ToolExecutor([plugin])
    call = ToolCall(id="c1", tool="probe", arguments={})
    assert executor.need(call).title == "declared"
    done = await executor.execute(call, ToolContext())
    assert done.result.success and "seed path" in done.content
