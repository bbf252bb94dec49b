"""What a provider entry point loaded -> a factory(ProviderConfig) -> Provider.

An `agentls.providers` entry point names a factory (an agentls provider
class or function) or an agent_core ProviderPlugin, which
plugin_adapter.py wraps. Kept apart from the adapter so that building an
ordinary provider imports neither the adapter nor the pydantic models it
needs (the first inline completion builds the provider).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from agentls.core.provider.contract import Provider, ProviderConfig

__all__ = ["as_provider_factory", "is_provider_plugin", "wrap_provider_plugin"]


def is_provider_plugin(target: Any) -> bool:
    """ProviderPlugin-shaped: has stream_api or call_api, and no agentls `stream`."""
    has_api = hasattr(target, "stream_api") or hasattr(target, "call_api")
    return has_api and not hasattr(target, "stream")


def wrap_provider_plugin(obj: Any, config: ProviderConfig) -> Provider:
    """A ProviderPlugin class (instantiated without arguments) or instance -> Provider."""
    from agentls.providers.plugin_adapter import ProviderPluginAdapter

    plugin = obj() if inspect.isclass(obj) else obj
    return ProviderPluginAdapter(plugin, config)


def as_provider_factory(target: Any) -> Callable[[ProviderConfig], Provider]:
    """What a provider entry point loaded -> factory(ProviderConfig) -> Provider.

    ProviderPlugin classes and instances are wrapped; agentls provider classes
    are returned as they are; a factory function is called and its result
    wrapped when that result is a ProviderPlugin.
    """
    if is_provider_plugin(target):
        return functools.partial(wrap_provider_plugin, target)
    if inspect.isclass(target):
        return cast("Callable[[ProviderConfig], Provider]", target)
    if not callable(target):
        raise TypeError(
            f"A provider entry point must name a factory(ProviderConfig) -> Provider or a "
            f"ProviderPlugin; got {type(target).__name__}"
        )

    def factory(config: ProviderConfig) -> Provider:
        made = target(config)
        return wrap_provider_plugin(made, config) if is_provider_plugin(made) else made

    return factory
