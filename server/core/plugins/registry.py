"""Plugin discovery and enablement.

Plugins are found through entry points, the built-in ones included, so a
third-party package adds a provider, feature or tool without touching agentls:

    agentls.providers  name -> factory(ProviderConfig) -> Provider
    agentls.features   name -> FeaturePlugin class / factory / instance
    agentls.tools      name -> ToolPlugin class / factory / instance
    agentls.hooks      name -> hook module class / instance (register(hooks, context))

What a plugin offers beyond agent_core's protocols (core/plugins/capabilities.py and
the feature contracts) is found with `offers` / `offering`: the one adapter
between the server and plugin capabilities.

Entry points are loaded lazily (only the configured provider is imported),
because start-up time is on the editor's critical path. A plugin that fails
to import is logged and skipped; `load_errors` keeps the reason for
`agentls check`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Literal, TypeGuard, TypeVar

from agentls.core.plugins.protocols import (
    FeaturePlugin,
    ToolPlugin,
    plugin_call,
    plugin_name,
    plugin_priority,
)
from agentls.core.types.errors import AgentlsError

__all__ = ["GROUPS", "PluginKind", "PluginRegistry", "UnknownPlugin", "offering", "offers"]

log = logging.getLogger("agentls.plugins")

PluginKind = Literal["provider", "feature", "tool", "hook"]
GROUPS: dict[PluginKind, str] = {
    "provider": "agentls.providers",
    "feature": "agentls.features",
    "tool": "agentls.tools",
    "hook": "agentls.hooks",  # hook modules: register(hooks, context)
}


C = TypeVar("C")


class UnknownPlugin(AgentlsError):
    """No plugin of that kind and name is installed."""


@dataclass
class _Slot:
    name: str
    entry_point: EntryPoint | None = None
    loaded: Any = None
    is_loaded: bool = False


@dataclass
class PluginRegistry:
    """Known plugins per kind; loads and instantiates them on first use."""

    _slots: dict[PluginKind, dict[str, _Slot]] = field(
        default_factory=lambda: {kind: {} for kind in GROUPS}
    )
    load_errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def discover(cls) -> PluginRegistry:
        registry = cls()
        # One scan of the installed distributions for all groups: each
        # entry_points(group=...) call reads every distribution's metadata
        # again (4 scans: ~9 ms at start-up, 1 scan: ~3.5 ms).
        installed = entry_points()
        for kind, group in GROUPS.items():
            for ep in installed.select(group=group):
                registry._slots[kind].setdefault(ep.name, _Slot(ep.name, entry_point=ep))
        return registry

    def register(self, kind: PluginKind, name: str, plugin: Any) -> None:
        """Register a plugin in code (tests, embedding applications)."""
        self._slots[kind][name] = _Slot(name, loaded=_instantiate(kind, plugin), is_loaded=True)

    def unregister(self, kind: PluginKind, name: str) -> None:
        self._slots[kind].pop(name, None)

    def names(self, kind: PluginKind) -> list[str]:
        return sorted(self._slots[kind])

    def get(self, kind: PluginKind, name: str) -> Any:
        slot = self._slots[kind].get(name)
        if slot is None:
            known = ", ".join(self.names(kind)) or "none"
            raise UnknownPlugin(
                f"No {kind} named {name!r} is installed (known: {known}). "
                f"Check the spelling, or install the package that provides it."
            )
        loaded = self._load(kind, slot)
        if loaded is None:
            raise UnknownPlugin(
                f"The {kind} {name!r} could not be loaded: {self.load_errors.get(name, '?')}"
            )
        return loaded

    def provider_factory(self, name: str) -> Any:
        return self.get("provider", name)

    def plugins(self, kind: PluginKind) -> list[Any]:
        """All loadable plugins of a kind, by priority then name."""
        found = []
        for slot in self._slots[kind].values():
            plugin = self._load(kind, slot)
            if plugin is not None:
                found.append(plugin)
        return sorted(found, key=lambda p: (plugin_priority(p), plugin_name(p)))

    def _load(self, kind: PluginKind, slot: _Slot) -> Any:
        if not slot.is_loaded:
            slot.is_loaded = True
            try:
                assert slot.entry_point is not None
                slot.loaded = _instantiate(kind, slot.entry_point.load())
            except Exception as exc:  # a broken plugin must not take the server down
                self.load_errors[slot.name] = f"{type(exc).__name__}: {exc}"
                log.error("Could not load %s plugin %r: %s", kind, slot.name, exc)
                slot.loaded = None
        return slot.loaded

    # -- enablement -----------------------------------------------------------
    def enabled(
        self,
        kind: PluginKind,
        config: dict[str, Any],
        *,
        tags: Sequence[str] = (),
        models: Sequence[dict[str, Any]] = (),
        disabled: Iterable[str] = (),
        force_enabled: Iterable[str] = (),
    ) -> list[Any]:
        return select_enabled(
            self.plugins(kind),
            config,
            tags=tags,
            models=models,
            disabled=disabled,
            force_enabled=force_enabled,
        )

    def enabled_one(
        self,
        kind: PluginKind,
        name: str,
        config: dict[str, Any],
        *,
        disabled: Iterable[str] = (),
    ) -> Any | None:
        """One plugin by name if it is on, as `enabled` would decide, without
        loading every other plugin when this one does not look at tags (the
        inline completion hot path asks for its feature alone: loading the
        mention and tool plugins for their tags cost ~55 ms and ~4 MiB at
        start-up)."""
        slot = self._slots[kind].get(name)
        if slot is None or name in set(disabled):
            return None
        plugin = self._load(kind, slot)
        if plugin is None:
            return None
        tags: Sequence[str] = ()
        if _reads_tags(plugin):
            tags = self.collect_tags(config)
        chosen = select_enabled([plugin], config, tags=tags, disabled=disabled)
        return chosen[0] if chosen else None

    def collect_tags(
        self, config: dict[str, Any], models: Sequence[dict[str, Any]] = ()
    ) -> list[str]:
        tags: set[str] = set()
        for kind, protocol in (("feature", FeaturePlugin), ("tool", ToolPlugin)):
            for plugin in self.plugins(kind):  # type: ignore[arg-type]
                tags.update(plugin_call(plugin, protocol, "get_tags", config, list(models)) or [])
        return sorted(tags)

    def get_ui_schema(
        self,
        config: dict[str, Any],
        context: dict[str, Any] | None = None,
        *,
        plugins: Sequence[Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Every plugin's get_ui_elements, flattened: `ui_type` defaults to
        "config", config elements are de-duplicated on "key", and "plugin"
        names the contributor."""
        if plugins is None:
            plugins = [*self.plugins("feature"), *self.plugins("tool")]
        elements: list[dict[str, Any]] = []
        seen_keys: set[str] = set()
        for plugin in plugins:
            for element in _ui_elements(plugin, config, context):
                if not isinstance(element, dict):
                    continue
                item = dict(element)
                item["ui_type"] = item.get("ui_type") or "config"
                item.setdefault("plugin", plugin_name(plugin))
                if item["ui_type"] == "config" and "key" in item:
                    if item["key"] in seen_keys:
                        continue
                    seen_keys.add(item["key"])
                elements.append(item)
        return elements


def select_enabled(
    plugins: Sequence[Any],
    config: dict[str, Any],
    *,
    tags: Sequence[str] = (),
    models: Sequence[dict[str, Any]] = (),
    disabled: Iterable[str] = (),
    force_enabled: Iterable[str] = (),
) -> list[Any]:
    """The plugins that are on: `features.disabled` wins, then is_enabled()
    (True/False decide, None defers), then required_tags / forbidden_tags."""
    disabled_set = set(disabled)
    forced = set(force_enabled)
    tag_set = set(tags)
    chosen: list[Any] = []
    for plugin in plugins:
        name = plugin_name(plugin)
        if name in disabled_set:
            continue
        if name in forced:
            chosen.append(plugin)
            continue
        context = {
            "enabled_plugin_ids": [plugin_name(p) for p in chosen],
            "disabled_plugins": sorted(disabled_set),
            "force_enabled_plugins": sorted(forced),
        }
        decision = plugin_call(
            plugin, FeaturePlugin, "is_enabled", config, sorted(tag_set), list(models), context
        )
        if decision is False:
            continue
        if decision is None:
            required = set(plugin_call(plugin, FeaturePlugin, "required_tags") or [])
            forbidden = set(plugin_call(plugin, FeaturePlugin, "forbidden_tags") or [])
            if not required <= tag_set or forbidden & tag_set:
                continue
        chosen.append(plugin)
    return chosen


def _reads_tags(plugin: Any) -> bool:
    """Whether enabling the plugin can depend on the tags of the others: it
    decides itself (an is_enabled of its own) or declares tag requirements."""
    if getattr(type(plugin), "is_enabled", None) not in (None, FeaturePlugin.is_enabled):
        return True
    required = plugin_call(plugin, FeaturePlugin, "required_tags") or []
    forbidden = plugin_call(plugin, FeaturePlugin, "forbidden_tags") or []
    return bool(required or forbidden)


def _instantiate(kind: PluginKind, target: Any) -> Any:
    """Entry points name a class, a factory or an instance. Providers stay
    factories (they need a ProviderConfig); features and tools are built now."""
    if kind == "provider":
        return target
    if inspect.isclass(target):
        return target()
    if callable(target) and not hasattr(target, "name"):
        return target()
    return target


def _ui_elements(plugin: Any, config: dict[str, Any], context: dict[str, Any] | None) -> list[Any]:
    """Call get_ui_elements with whichever signature the plugin uses:
    (config, context=None) canonical; (), (config), (config, tags, models),
    (config, tags, models, context) legacy."""
    method = getattr(plugin, "get_ui_elements", None)
    if not callable(method):
        return []
    ctx = context or {}
    try:
        params = [
            p
            for p in inspect.signature(method).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        tags, models = ctx.get("tags", []), ctx.get("models", [])
        if len(params) == 0:
            result = method()
        elif len(params) == 1:
            result = method(config)
        elif len(params) == 2:
            result = method(config, context)
        elif len(params) == 3:
            result = method(config, tags, models)
        else:
            result = method(config, tags, models, context)
    except Exception:
        log.exception("get_ui_elements of %s failed; skipped", plugin_name(plugin))
        return []
    return list(result or [])


def offers(plugin: object, capability: Callable[..., C]) -> TypeGuard[C]:
    """Whether `plugin` offers `capability`, a runtime-checkable Protocol
    (core/plugins/capabilities.py and the feature contracts): it has every member
    the Protocol names, and none of its methods is None. Structural: a
    third-party plugin need not import or subclass anything from agentls."""
    if plugin is None:
        return False
    # (Typed as a callable, not type[C]: mypy refuses Protocol classes there.)
    try:
        return isinstance(plugin, capability)  # type: ignore[arg-type]
    except TypeError:  # a Protocol that is not runtime-checkable
        return False


def offering(plugins: Iterable[object], capability: Callable[..., C]) -> list[C]:
    """The plugins that offer `capability`, in the order given."""
    return [plugin for plugin in plugins if offers(plugin, capability)]
