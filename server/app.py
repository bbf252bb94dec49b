"""Composition root: where the agent is assembled.

`build_agent(settings, registry, channels)` turns the user's settings, the
plugin registry and the editor's channels into one frozen AgentBundle
(core/agent/bundle.py): provider, model, tools, hooks, the chat's prompt
enrichers, limits, context settings and workspace. The fronts' one host
(host.py, for the language server and ACP), the CLI (`agentls check`) and
the autogen adapter (providers/autogen/client.py) all call it, so they
agree on what the user's configuration means. `build_provider` is its first step, also used
alone by the keystroke path (inline completion needs no tools or hooks).

Lives outside `core` because it wires core to providers and features.
Imported on the keystroke path (build_provider): heavy imports stay inside
the functions.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentls.core.plugins.registry import PluginRegistry, UnknownPlugin
from agentls.core.provider.contract import Provider, ProviderConfig
from agentls.core.types.errors import AgentlsError, ModelError

if TYPE_CHECKING:
    from agentls.core.agent.bundle import AgentBundle, EditorChannels
    from agentls.core.plugins.hooks import HookRegistry
    from agentls.core.plugins.registry import PluginKind
    from agentls.core.settings.schema import AgentlsSettings
    from agentls.core.types.messages import ModelInfo, ProviderInfo

__all__ = [
    "ProbeReport",
    "build_agent",
    "build_hooks",
    "build_provider",
    "enabled_plugins",
    "plugin_config",
    "probe_provider",
    "provider_config",
]


def provider_config(settings: AgentlsSettings) -> ProviderConfig:
    return ProviderConfig(
        name=settings.provider,
        model=settings.model,
        base_url=settings.base_url,
        api_key_env=settings.api_key_env,
        request_timeout=settings.request_timeout_seconds,
        connect_timeout=settings.connect_timeout_seconds,
        options=dict(settings.provider_options) | (
            # the local provider's own settings section, as options it reads (provider.py)
            {"shared": settings.local.shared,
             "host_idle_seconds": settings.local.host_idle_seconds}
            if settings.provider == "local" else {}),
    )


def build_provider(settings: AgentlsSettings, registry: PluginRegistry | None = None) -> Provider:
    """The configured provider, or AgentlsError saying what to change."""
    registry = registry or PluginRegistry.discover()
    try:
        target = registry.provider_factory(settings.provider)
    except UnknownPlugin as exc:
        hint = ""
        if settings.provider == "local":
            hint = (
                " The embedded local model is an optional extra: run ./install.sh from a "
                "checkout, or see docs/local-model.md for the pip command; or set `provider` "
                "to openai, anthropic or ollama."
            )
        raise AgentlsError(f"{exc}{hint}") from exc
    factory = _as_factory(target)
    provider = factory(provider_config(settings))
    if not isinstance(provider, Provider):
        raise AgentlsError(
            f"The provider plugin {settings.provider!r} did not produce an agentls provider "
            f"(got {type(provider).__name__})."
        )
    return provider


def _as_factory(target: Any) -> Callable[[ProviderConfig], Any]:
    """Provider entry points name a factory taking a ProviderConfig, or an
    agent_core-style ProviderPlugin, which the adapter wraps."""
    from agentls.providers.provider_factory import as_provider_factory

    try:
        return as_provider_factory(target)
    except TypeError as exc:
        raise AgentlsError(str(exc)) from exc


def plugin_config(
    settings: AgentlsSettings,
    workspace_folders: Sequence[str | Path] = (),
    workspace_root: str | Path | None = None,
) -> dict[str, Any]:
    """The `config` dict every FeaturePlugin/ToolPlugin hook receives.
    `workspace_root` defaults to the first folder."""
    folders = [str(p) for p in workspace_folders]
    root = str(workspace_root) if workspace_root else (folders[0] if folders else None)
    return {"settings": settings.to_wire(), "workspace_root": root, "workspace_folders": folders}


def enabled_plugins(
    kind: PluginKind,
    settings: AgentlsSettings,
    registry: PluginRegistry,
    config: Mapping[str, Any],
    tags: Sequence[str] | None = None,
) -> list[Any]:
    """The plugins of a kind that are on, by priority (features.disabled
    applies to every kind)."""
    config = dict(config)
    return registry.enabled(
        kind, config, tags=registry.collect_tags(config) if tags is None else tags,
        disabled=settings.features.disabled,
    )


def build_agent(
    settings: AgentlsSettings,
    registry: PluginRegistry | None = None,
    channels: EditorChannels | None = None,
    *,
    workspace_folders: Sequence[str | Path] = (),
    workspace_root: str | Path | None = None,
    provider: Provider | None = None,
) -> AgentBundle:
    """The agent for these settings: the one place it is assembled.

    `channels` is the editor's side (approval, display, edit applier,
    document lookups); None for callers without an editor (the CLI, the
    autogen adapter), whose turns then ask nothing and apply no edits.
    `provider`: one the caller already holds for these settings (the
    language server keeps its provider across bundles, since the keystroke
    path uses it alone); built here otherwise. AgentlsError saying what to
    change when the provider cannot be built; a tool plugin or hook module
    that fails is logged and left out. `workspace_root` (project
    instructions, the system prompt) defaults to the first folder."""
    from agentls.core.agent.bundle import AgentBundle, ContextSettings, EditorChannels, TurnLimits
    from agentls.core.context.instructions import ProjectInstructions
    from agentls.core.editor.prompt_enrichment import PromptEnricher
    from agentls.core.editor.reply_edits import ReplyEditor
    from agentls.core.plugins.capabilities import contributed_tool_plugins
    from agentls.core.plugins.injections import InjectionLimits
    from agentls.core.plugins.registry import offering
    from agentls.core.tools.executor import ToolExecutor
    from agentls.features.policy.sensitive import ModelFileAccess

    registry = registry or PluginRegistry.discover()
    channels = channels or EditorChannels()
    if provider is None:
        provider = build_provider(settings, registry)
    folders = [Path(p) for p in workspace_folders]
    root = Path(workspace_root) if workspace_root else (folders[0] if folders else None)
    config = plugin_config(settings, folders, root)
    tags = registry.collect_tags(config)
    features = enabled_plugins("feature", settings, registry, config, tags)
    tools = [*enabled_plugins("tool", settings, registry, config, tags),
             *contributed_tool_plugins(features)]
    hooks = _hooks(settings, registry, channels, folders, config, tags, features)
    session = settings.session
    return AgentBundle(
        provider=provider,
        model=settings.model,
        tools=ToolExecutor(tools, config),
        hooks=hooks,
        enrichers=tuple(offering(features, PromptEnricher)),
        reply_editor=next(iter(offering(features, ReplyEditor)), None),
        limits=TurnLimits(
            max_iterations=session.max_iterations,
            max_tool_result_chars=session.max_tool_result_chars,
            test_after_edits=session.test_after_edits,
            injection=InjectionLimits(
                size_limit=session.injection_size_limit,
                budget_per_turn=session.injection_budget_per_turn,
            ),
        ),
        # Enforced on the stream (closing the HTTP call stops the server's
        # generation too), not sent as max_tokens: providers keep their own
        # per-model defaults (the local provider's small one, Anthropic's
        # per-model maximum, providerOptions.maxTokens) and models that
        # reject max_tokens (OpenAI o-series) keep working.
        output_cap=session.max_output_tokens,
        context=ContextSettings(
            window_override=settings.context_window,
            instructions=ProjectInstructions(
                root, settings.instructions.files,
                # the secret-file rule every file text sent to the model goes through
                reader=ModelFileAccess(folders or ([root] if root else []))),
        ),
        workspace=str(root) if root else None,
        workspace_folders=tuple(str(p) for p in folders),
        channels=channels,
    )


def build_hooks(
    settings: AgentlsSettings,
    registry: PluginRegistry,
    channels: EditorChannels | None = None,
    *,
    workspace_folders: Sequence[str | Path] = (),
    workspace_root: str | Path | None = None,
) -> HookRegistry:
    """The hook handlers build_agent would register, alone (for callers that
    need the policies without a provider, e.g. a checkpoint restore)."""
    from agentls.core.agent.bundle import EditorChannels

    folders = [Path(p) for p in workspace_folders]
    root = Path(workspace_root) if workspace_root else (folders[0] if folders else None)
    config = plugin_config(settings, folders, root)
    tags = registry.collect_tags(config)
    features = enabled_plugins("feature", settings, registry, config, tags)
    return _hooks(settings, registry, channels or EditorChannels(), folders, config, tags,
                  features)


def _hooks(
    settings: AgentlsSettings,
    registry: PluginRegistry,
    channels: EditorChannels,
    folders: list[Path],
    config: dict[str, Any],
    tags: Sequence[str],
    features: list[Any],
) -> HookRegistry:
    """Enabled hook modules and those the features contribute, registered
    against what a hook module may use (core/plugins/hook_modules.py)."""
    from agentls.core.plugins.capabilities import contributed_hook_modules
    from agentls.core.plugins.hook_modules import HookContext, register_hook_modules

    modules = [*enabled_plugins("hook", settings, registry, config, tags),
               *contributed_hook_modules(features)]
    return register_hook_modules(modules, HookContext(
        settings=settings,
        workspace_folders=list(folders),
        documents=channels.snapshots,
        display=channels.display,
        approval=channels.approval,
        publish_diagnostics=channels.publish_diagnostics,
    ))


@dataclass
class ProbeReport:
    ok: bool
    info: ProviderInfo | None = None
    models: list[ModelInfo] = field(default_factory=list)
    error: str | None = None
    error_code: str | None = None
    # The provider's status_report() (its model processes) before it was closed.
    status: dict[str, Any] = field(default_factory=dict)


async def probe_provider(provider: Provider, *, within: float = 15.0) -> ProbeReport:
    """Ask the provider for its models: proves the endpoint, key and
    network path work without spending tokens."""
    try:
        info = provider.get_info()
        models = await asyncio.wait_for(provider.list_models(), within)
        report = getattr(provider, "status_report", None)
        return ProbeReport(True, info, list(models),
                           status=dict(report()) if callable(report) else {})
    except ModelError as exc:
        return ProbeReport(False, None, [], str(exc), exc.code or "model_error")
    except TimeoutError:
        return ProbeReport(False, None, [], f"The provider did not answer within {within:g}s.",
                           "timeout")
    finally:
        closing = provider.aclose()
        if inspect.isawaitable(closing):
            await closing
