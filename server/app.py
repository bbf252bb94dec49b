"""Composition root: turns settings into a provider (and, later, the rest of
the agent) using the plugin registry. Both the CLI (`agentls check`) and the
language server build their objects here, so they agree on what the user's
configuration means.

Lives outside `core` because it wires core to providers and features.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentls.core.errors import AgentlsError, ModelError
from agentls.core.provider import Provider, ProviderConfig
from agentls.core.registry import PluginRegistry, UnknownPlugin

if TYPE_CHECKING:
    from agentls.core.models import ModelInfo, ProviderInfo
    from agentls.core.settings import AgentlsSettings

__all__ = ["ProbeReport", "build_provider", "probe_provider", "provider_config"]


def provider_config(settings: AgentlsSettings) -> ProviderConfig:
    return ProviderConfig(
        name=settings.provider,
        model=settings.model,
        base_url=settings.base_url,
        api_key_env=settings.api_key_env,
        request_timeout=settings.request_timeout_seconds,
        connect_timeout=settings.connect_timeout_seconds,
        options=dict(settings.provider_options),
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


@dataclass
class ProbeReport:
    ok: bool
    info: ProviderInfo | None = None
    models: list[ModelInfo] = field(default_factory=list)
    error: str | None = None
    error_code: str | None = None


async def probe_provider(provider: Provider, *, within: float = 15.0) -> ProbeReport:
    """Ask the provider for its models: proves the endpoint, key and
    network path work without spending tokens."""
    try:
        info = provider.get_info()
        models = await asyncio.wait_for(provider.list_models(), within)
        return ProbeReport(True, info, list(models))
    except ModelError as exc:
        return ProbeReport(False, None, [], str(exc), exc.code or "model_error")
    except TimeoutError:
        return ProbeReport(False, None, [], f"The provider did not answer within {within:g}s.",
                           "timeout")
    finally:
        closing = provider.aclose()
        if inspect.isawaitable(closing):
            await closing
