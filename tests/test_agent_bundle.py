"""Where the agent is assembled: app.build_agent, the bundle the language
server holds and swaps, the orchestrator that pins it per turn, and the
capability adapter that finds what features offer (core.plugins.offers)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentls.app import build_agent
from agentls.core.agent.bundle import AgentBundle, ContextSettings, EditorChannels
from agentls.core.agent.orchestrator import Orchestrator
from agentls.core.editor.inline_completion import InlineCompleter
from agentls.core.editor.prompt_enrichment import (
    EditorContext,
    PromptDraft,
    PromptEnricher,
    PromptSources,
)
from agentls.core.plugins.capabilities import (
    Closable,
    HookSource,
    Startable,
    ToolSource,
    contributed_hook_modules,
    contributed_tool_plugins,
)
from agentls.core.plugins.registry import PluginRegistry, offering, offers, select_enabled
from agentls.core.provider.contract import ProviderConfig
from agentls.core.settings.load import load_settings
from agentls.core.tools.contract import ToolNeed
from agentls.core.tools.executor import ToolExecutor
from agentls.core.types.conversation import Session
from agentls.lsp.state import ServerState
from agentls.providers.scripted import ScriptedProvider


def scripted(*answers: dict[str, Any]) -> ScriptedProvider:
    return ScriptedProvider(ProviderConfig(name="scripted", options={"script": list(answers)}))


def settings_of(**init: Any) -> Any:
    return load_settings(init_options={"provider": "scripted", **init}, environ={},
                         user_config_file=Path("/nonexistent/agentls.toml")).settings


# --------------------------------------------------------------------------- build_agent


def test_build_agent_makes_the_bundle_from_settings_registry_and_channels(
        tmp_path: Path) -> None:
    settings = settings_of(session={"maxIterations": 7, "maxOutputTokens": 900},
                           contextWindow=16000)
    display = object()
    channels = EditorChannels(display=display)  # type: ignore[arg-type]
    provider = scripted({"text": "hi"})
    agent = build_agent(settings, PluginRegistry.discover(), channels,
                        workspace_folders=[tmp_path], provider=provider)
    assert agent.provider is provider and agent.channels is channels
    assert agent.limits.max_iterations == 7 and agent.output_cap == 900
    assert agent.context is not None and agent.context.window_override == 16000
    assert agent.workspace == str(tmp_path) and agent.workspace_folders == (str(tmp_path),)
    tools = {d.tool_name for d in agent.tools.descriptors}
    assert {"read_file", "write_file", "run_command"} <= tools
    assert agent.hooks.approval_policies  # the policy hook module registered
    assert [e.name for e in agent.enrichers] == ["mentions", "templates", "named-files"]
    assert agent.tool_context()["workspace_folders"] == [str(tmp_path)]
    with pytest.raises(AttributeError):
        agent.model = "other"  # type: ignore[misc]  # frozen


def test_build_agent_leaves_out_what_features_disabled_names(tmp_path: Path) -> None:
    settings = settings_of(features={"disabled": ["run_command", "mentions", "policy"]})
    agent = build_agent(settings, PluginRegistry.discover(), workspace_folders=[tmp_path],
                        provider=scripted())
    tools = {d.tool_name for d in agent.tools.descriptors}
    assert "run_command" not in tools and "read_file" in tools
    assert [e.name for e in agent.enrichers] == ["templates", "named-files"]
    assert not agent.hooks.approval_policies


def test_build_agent_takes_tools_and_hooks_from_features(tmp_path: Path) -> None:
    """A third-party feature contributes a tool plugin and a hook module
    (ToolSource, HookSource) without importing anything from agentls."""
    registry = PluginRegistry.discover()
    registry.register("feature", "contributor", Contributor())
    agent = build_agent(settings_of(), registry, workspace_folders=[tmp_path],
                        provider=scripted())
    assert "shout" in {d.tool_name for d in agent.tools.descriptors}
    assert agent.hooks.has_handlers("prompt:submit")


# ------------------------------------------------------------------ the server's one bundle


def server_state(tmp_path: Path) -> ServerState:
    state = ServerState(environ={"AGENTLS_CONFIG_FILE": str(tmp_path / "none.toml"),
                                 "AGENTLS_STATE_DIR": str(tmp_path / "state")})
    state.host.workspace_root = tmp_path
    state.host.workspace_folders = [tmp_path]
    state.host.set_init_options({"provider": "scripted"})
    return state


def test_the_server_keeps_its_bundle_until_the_settings_change(tmp_path: Path) -> None:
    state = server_state(tmp_path)
    try:
        first = state.host.agent()
        assert state.host.agent() is first  # same inputs, same bundle
        orchestrator = state.host.get_orchestrator()
        assert orchestrator.agent is first

        state.host.reload_settings(workspace_config={"session": {"maxIterations": 3}})
        second = state.host.agent()
        assert second is not first and second.limits.max_iterations == 3
        assert first.limits.max_iterations != 3  # the old bundle is left as it was
        assert state.host.get_orchestrator() is orchestrator  # swapped, not replaced
        assert orchestrator.agent is second

        state.host.connect()  # the editor connected
        third = state.host.agent()
        assert third is not second and third.channels is state.host.channels
    finally:
        state.host.stores.close()


# ------------------------------------------------------------------ swapping under a turn


class Waiting:
    """A tool that waits until the test lets it finish."""

    name = "waiting"
    version = "1"

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    def get_tool_schemas(self, state: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        return [{"name": "wait", "description": "waits", "parameters": {"type": "object"}}]

    def tool_need(self, tool_name: str, arguments: Any, state: dict[str, Any]) -> ToolNeed:
        return ToolNeed("none")  # nothing to approve

    async def execute_tool_async(self, tool_name: str | None, payload: Any,
                                 state: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.entered.set()
        await self.release.wait()
        return {"success": True, "result": "waited"}


async def test_a_turn_started_before_a_swap_finishes_on_its_bundle() -> None:
    tool = Waiting()
    old_provider = scripted({"tool_calls": [{"name": "wait", "arguments": {}}]},
                            {"text": "answered by the old bundle"})
    new_provider = scripted({"text": "answered by the new bundle"})
    old = AgentBundle(provider=old_provider, tools=ToolExecutor([tool]), model="old")
    new = AgentBundle(provider=new_provider, model="new")
    orchestrator = Orchestrator(old)
    running = asyncio.create_task(orchestrator.run_turn(Session("s1"), "go"))
    await asyncio.wait_for(tool.entered.wait(), 10)

    orchestrator.use(new)
    assert orchestrator.agent is new and orchestrator.is_running("s1")
    tool.release.set()
    result = await asyncio.wait_for(running, 10)
    assert result.status == "completed"
    assert result.messages[-1].content == "answered by the old bundle"
    assert [m.content for m in result.messages if m.role == "tool"] == ["Result: waited"]

    after = await orchestrator.run_turn(result.session, "again")
    assert after.messages[-1].content == "answered by the new bundle"
    assert {s.session_id for s in orchestrator.statuses()} == {"s1"}  # statuses kept


async def test_cancel_reaches_a_turn_whose_bundle_was_swapped() -> None:
    tool = Waiting()
    provider = scripted({"tool_calls": [{"name": "wait", "arguments": {}}]}, {"text": "never"})
    orchestrator = Orchestrator(AgentBundle(provider=provider, tools=ToolExecutor([tool])))
    running = asyncio.create_task(orchestrator.run_turn(Session("s1"), "go"))
    await asyncio.wait_for(tool.entered.wait(), 10)
    orchestrator.use(AgentBundle(provider=scripted({"text": "x"})))
    assert orchestrator.cancel("s1")
    result = await asyncio.wait_for(running, 10)
    assert result.status == "cancelled"


def test_new_context_settings_leave_the_old_manager_and_keep_what_it_learned() -> None:
    orchestrator = Orchestrator(AgentBundle(provider=scripted(),
                                            context=ContextSettings(window_override=1000)))
    before = orchestrator.context  # what a turn started now runs with
    orchestrator.use(AgentBundle(provider=scripted(),
                                 context=ContextSettings(window_override=2000)))
    assert before.window_override == 1000 and orchestrator.context.window_override == 2000
    assert orchestrator.context._learned is before._learned
    orchestrator.use(AgentBundle(provider=scripted()))  # no settings: the manager stays
    assert orchestrator.context.window_override == 2000


def test_a_bundle_is_not_mixed_with_loose_parts() -> None:
    # One constructor: the parts come from the bundle, none beside it.
    with pytest.raises(TypeError, match="unexpected keyword argument 'model'"):
        Orchestrator(AgentBundle(provider=scripted()), model="x")  # type: ignore[call-arg]


# ------------------------------------------------------------------ the capability adapter


class SeedFeature:
    """A third-party feature written against agent_core's FeaturePlugin only
    (its signatures), importing nothing from agentls."""

    name = "seed-feature"
    version = "1.0.0"
    priority = 100

    def get_config_schema(self) -> dict[str, Any]:
        return {"enabled": {"type": "boolean", "default": True}}

    def init(self, config: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        return state

    def get_completions(self, config: dict[str, Any], text: str) -> list[dict[str, Any]]:
        return [{"replacement": "@seed", "start": 0, "display": "seed"}]

    def finalize(self, final_messages: list[Any], native_messages: list[Any],
                 state: dict[str, Any]) -> tuple[list[Any], list[Any], dict[str, Any]]:
        return final_messages, native_messages, state


class Shout:
    name = "shout"
    version = "1"

    def get_tool_schemas(self, state: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        return [{"name": "shout", "description": "upper-cases", "parameters": {"type": "object"}}]

    def execute_tool(self, tool_name: str | None, payload: Any, state: dict[str, Any],
                     **_: Any) -> dict[str, Any]:
        return {"success": True, "result": str(payload.get("text", "")).upper()}


class PromptHooks:
    name = "prompt-hooks"

    def register(self, hooks: Any, context: Any) -> None:
        async def noted(event: str, data: dict[str, Any]) -> Any:
            from agentls.core.types.messages import HookResult

            return HookResult()

        hooks.register("prompt:submit", noted, name=self.name)


class Contributor:
    """A third-party feature with agent_core's FeaturePlugin identity plus capabilities,
    by structure only."""

    name = "contributor"
    version = "1.0.0"
    priority = 100

    def __init__(self) -> None:
        self.started: list[Any] = []

    def tool_plugins(self) -> list[Any]:
        return [Shout()]

    def hook_modules(self) -> list[Any]:
        return [PromptHooks()]

    async def start(self, host: Any) -> None:
        self.started.append(host)

    async def aclose(self) -> None:
        self.started.clear()

    def enrich_prompt(self, draft: PromptDraft, sources: PromptSources) -> PromptDraft:
        return PromptDraft(draft.text.upper(), draft.attachments, draft.metadata)


def test_the_adapter_accepts_a_feature_with_the_seed_signatures() -> None:
    seed = SeedFeature()
    # Loaded and enabled like any feature, and asked for what agent_core defines.
    registry = PluginRegistry()
    registry.register("feature", "seed-feature", seed)
    assert select_enabled(registry.plugins("feature"), {}) == [seed]
    # It offers none of the capabilities beyond agent_core's, and that is no error.
    for capability in (Startable, Closable, ToolSource, HookSource, InlineCompleter,
                       PromptEnricher):
        assert not offers(seed, capability)
    assert contributed_tool_plugins([seed]) == [] and contributed_hook_modules([seed]) == []
    agent = build_agent(settings_of(), registry, provider=scripted())
    assert agent.enrichers == () and not agent.tools.descriptors


def test_the_adapter_finds_capabilities_by_structure() -> None:
    contributor, seed = Contributor(), SeedFeature()
    for capability in (Startable, Closable, ToolSource, HookSource, PromptEnricher):
        assert offering([seed, contributor], capability) == [contributor]
    assert not offers(contributor, InlineCompleter)
    assert not offers(None, ToolSource)
    [enricher] = offering([contributor], PromptEnricher)
    enriched = enricher.enrich_prompt(PromptDraft("hi"), PromptSources(editor=EditorContext()))
    assert enriched.text == "HI"


class Failing(Contributor):
    def tool_plugins(self) -> list[Any]:
        raise RuntimeError("plugin bug")


def test_a_failing_contribution_is_skipped_not_fatal() -> None:
    assert [type(p) for p in contributed_tool_plugins([Failing(), Contributor()])] == [Shout]
