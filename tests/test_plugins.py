"""Plugin discovery through entry points, enablement, ordering, UI schema."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agentls.core.plugins.protocols import FeaturePlugin, ToolPlugin, plugin_call
from agentls.core.plugins.registry import PluginRegistry, UnknownPlugin, _Slot, select_enabled
from agentls.core.provider.contract import Provider, ProviderConfig


class Feature:
    def __init__(self, name: str, *, priority: int = 100, required: list[str] | None = None,
                 forbidden: list[str] | None = None, decision: bool | None = None,
                 tags: list[str] | None = None) -> None:
        self.name = name
        self.version = "1"
        self.priority = priority
        self._required = required or []
        self._forbidden = forbidden or []
        self._decision = decision
        self._tags = tags or []
        self.contexts: list[dict[str, Any]] = []

    def required_tags(self) -> list[str]:
        return self._required

    def forbidden_tags(self) -> list[str]:
        return self._forbidden

    def is_enabled(self, config: dict[str, Any], tags: list[str], models: list[dict[str, Any]],
                   context: dict[str, Any]) -> bool | None:
        self.contexts.append(context)
        return self._decision

    def get_tags(self, config: dict[str, Any], models: list[dict[str, Any]]) -> list[str]:
        return self._tags


class Bare:
    """Implements nothing optional: defaults come from the protocols."""

    name = "bare"
    version = "0"


def test_defaults_for_missing_methods() -> None:
    bare = Bare()
    assert plugin_call(bare, FeaturePlugin, "get_completions", {}, "@fi") == []
    assert plugin_call(bare, FeaturePlugin, "apply_completion", {}, "t", {}) == ""
    assert plugin_call(bare, FeaturePlugin, "get_template", {}) == ""
    assert plugin_call(bare, FeaturePlugin, "required_tags") == []
    assert plugin_call(bare, FeaturePlugin, "is_enabled", {}, [], [], {}) is None
    assert plugin_call(bare, ToolPlugin, "init", {"a": 1}) == {"config": {"a": 1}}
    assert plugin_call(bare, ToolPlugin, "execute_tool", "x", {}, {}) == {
        "success": False, "error": "Unknown tool: x"}
    assert plugin_call(bare, ToolPlugin, "format_tool_result", {"success": True, "result": 2},
                       {}) == "Result: 2"
    assert plugin_call(bare, ToolPlugin, "format_tool_call_preview", "x", {}, {}) == ""


def test_explicit_protocol_subclass_inherits_defaults() -> None:
    class Sub(FeaturePlugin):
        name = "sub"
        version = "1"
        priority = 100

    sub = Sub()
    assert sub.get_completions({}, "x") == []
    assert sub.finalize([{"a": 1}], [], {}) == ([{"a": 1}], [], {})


def test_enablement_by_tags_decision_and_settings() -> None:
    plugins = [
        Feature("needs-fim", required=["fim"]),
        Feature("no-remote", forbidden=["remote"]),
        Feature("forced-off", decision=False, required=[]),
        Feature("forced-on", decision=True, required=["never-present"]),
        Feature("plain"),
        Feature("disabled-by-user"),
    ]
    chosen = select_enabled(plugins, {}, tags=["remote"], disabled=["disabled-by-user"])
    assert [p.name for p in chosen] == ["forced-on", "plain"]
    chosen = select_enabled(plugins, {}, tags=["fim"], disabled=[])
    assert {p.name for p in chosen} == {"needs-fim", "no-remote", "forced-on", "plain",
                                        "disabled-by-user"}
    # features.disabled wins even over is_enabled() == True
    assert select_enabled(plugins, {}, disabled=["forced-on"]) == [
        p for p in plugins if p.name in ("no-remote", "plain", "disabled-by-user")]
    assert plugins[4].contexts[-1]["disabled_plugins"] == ["forced-on"]


def test_registry_orders_by_priority_then_name() -> None:
    reg = PluginRegistry()
    reg.register("feature", "b", Feature("b", priority=50))
    reg.register("feature", "a", Feature("a", priority=50))
    reg.register("feature", "z", Feature("z", priority=10))
    assert [p.name for p in reg.plugins("feature")] == ["z", "a", "b"]


def test_collect_tags() -> None:
    reg = PluginRegistry()
    reg.register("feature", "f", Feature("f", tags=["fim", "chat"]))
    reg.register("tool", "t", Feature("t", tags=["files"]))
    assert reg.collect_tags({}) == ["chat", "files", "fim"]


def test_enabled_one_loads_the_others_only_when_their_tags_matter() -> None:
    """The inline completion hot path asks for its feature alone: the other
    plugins are loaded (for their tags) only when the asked one looks at tags."""
    loaded: list[str] = []

    class Entry:  # the part of importlib.metadata.EntryPoint the registry uses
        def __init__(self, plugin: Any) -> None:
            self.plugin = plugin

        def load(self) -> Any:
            loaded.append(self.plugin.name)
            return self.plugin

    class Plain:
        name = "plain"
        version = "1"

    reg = PluginRegistry()
    for kind, plugin in (("feature", Plain()), ("feature", Feature("needs-fim", required=["fim"])),
                         ("feature", Feature("needs-chat", required=["chat"])),
                         ("tool", Feature("tagger", tags=["fim"]))):
        reg._slots[kind][plugin.name] = _Slot(plugin.name, entry_point=Entry(plugin))

    assert reg.enabled_one("feature", "plain", {}).name == "plain"
    assert loaded == ["plain"]  # no other plugin imported for its tags
    assert reg.enabled_one("feature", "plain", {}, disabled=["plain"]) is None
    assert reg.enabled_one("feature", "missing", {}) is None
    # A plugin with tag requirements sees every plugin's tags, as enabled() does.
    assert reg.enabled_one("feature", "needs-fim", {}).name == "needs-fim"
    assert set(loaded) == {"plain", "needs-fim", "needs-chat", "tagger"}
    assert reg.enabled_one("feature", "needs-chat", {}) is None
    assert [p.name for p in reg.enabled("feature", {}, tags=reg.collect_tags({}))] == [
        "needs-fim", "plain"]


def test_ui_schema_flattening_with_legacy_signatures() -> None:
    class Canonical:
        name = "canonical"

        def get_ui_elements(self, config: dict[str, Any],
                            context: dict[str, Any] | None = None) -> list[dict[str, Any]]:
            return [{"type": "checkbox", "key": "enabled", "label": "On"},
                    {"ui_type": "status_bar", "data": "metadata.total_cost"}]

    class NoArgs:
        name = "noargs"

        def get_ui_elements(self) -> list[dict[str, Any]]:
            return [{"type": "text", "key": "enabled", "label": "dup"},
                    {"ui_type": "", "key": "other"}]

    class Legacy4:
        name = "legacy4"

        def get_ui_elements(self, config: dict[str, Any], tags: list[str],
                            models: list[dict[str, Any]],
                            context: dict[str, Any]) -> list[dict[str, Any]]:
            return [{"key": f"tags={','.join(tags)}", "plugin": "custom"}]

    class Broken:
        name = "broken"

        def get_ui_elements(self, config: dict[str, Any]) -> list[dict[str, Any]]:
            raise RuntimeError("nope")

    reg = PluginRegistry()
    elements = reg.get_ui_schema({}, {"tags": ["fim"]},
                                 plugins=[Canonical(), NoArgs(), Legacy4(), Broken()])
    assert elements == [
        {"type": "checkbox", "key": "enabled", "label": "On", "ui_type": "config",
         "plugin": "canonical"},
        {"ui_type": "status_bar", "data": "metadata.total_cost", "plugin": "canonical"},
        {"ui_type": "config", "key": "other", "plugin": "noargs"},
        {"key": "tags=fim", "plugin": "custom", "ui_type": "config"},
    ]


def test_builtin_scripted_provider_found_through_entry_points() -> None:
    reg = PluginRegistry.discover()
    assert "scripted" in reg.names("provider")
    factory = reg.provider_factory("scripted")
    provider = factory(ProviderConfig(name="scripted", options={"script": [{"text": "x"}]}))
    assert isinstance(provider, Provider)
    assert provider.get_info().id == "scripted"


def test_unknown_provider_names_the_known_ones() -> None:
    reg = PluginRegistry.discover()
    with pytest.raises(UnknownPlugin, match=r"No provider named 'nope'.*scripted"):
        reg.provider_factory("nope")


@pytest.fixture
def third_party(tmp_path: Path) -> Any:
    """A real installed distribution (dist-info on sys.path) that declares
    plugins in all three groups, one of them broken."""
    pkg = tmp_path / "thirdparty_plugins.py"
    pkg.write_text(textwrap.dedent("""
        class GreetFeature:
            name = "greet"
            version = "1.0"
            priority = 5
            def get_template(self, config):
                return "Hello {name}"

        class CalcTool:
            name = "calc"
            version = "1.0"
            def get_tool_schemas(self, state, **kw):
                return [{"name": "add", "description": "add", "parameters": {}}]

        def make_provider(config):
            from agentls.providers.scripted import ScriptedProvider
            return ScriptedProvider(config)

        class EchoPlugin:
            # An agent_core ProviderPlugin, as in agent_core's example.
            name = "echo"
            version = "1.0.0"
            def init(self, config):
                return {"config": config}
            def call_api(self, native_messages, state, *, request_id=None):
                last = next((m["content"] for m in reversed(native_messages)
                             if m.get("role") == "user"), "")
                msg = {"role": "assistant", "content": f"Echo: {last}"}
                return [], [msg], [*native_messages, msg], state
    """))
    dist = tmp_path / "thirdparty_plugins-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdparty-plugins\n"
                                   "Version: 1.0\n")
    (dist / "entry_points.txt").write_text(textwrap.dedent("""
        [agentls.features]
        greet = thirdparty_plugins:GreetFeature
        broken = thirdparty_plugins:DoesNotExist

        [agentls.tools]
        calc = thirdparty_plugins:CalcTool

        [agentls.providers]
        echo3 = thirdparty_plugins:make_provider
        echoplugin = thirdparty_plugins:EchoPlugin
    """))
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("thirdparty_plugins", None)


def test_third_party_plugins_discovered(third_party: Path) -> None:
    reg = PluginRegistry.discover()
    assert {"greet", "broken"} <= set(reg.names("feature"))
    features = reg.plugins("feature")
    greet = next(p for p in features if p.name == "greet")
    assert greet.get_template({}) == "Hello {name}"
    assert "broken" in reg.load_errors and "AttributeError" in reg.load_errors["broken"]
    assert [p.name for p in reg.plugins("tool") if p.name == "calc"] == ["calc"]
    provider = reg.provider_factory("echo3")(ProviderConfig(name="echo3"))
    assert provider.get_info().id == "scripted"
    with pytest.raises(UnknownPlugin, match="could not be loaded"):
        reg.get("feature", "broken")


async def test_agent_core_provider_plugin_entry_point_runs_a_turn(third_party: Path) -> None:
    from agentls.app import build_provider
    from agentls.core.agent.bundle import AgentBundle
    from agentls.core.agent.orchestrator import Orchestrator
    from agentls.core.settings.load import load_settings
    from agentls.core.types.conversation import Session

    settings = load_settings(init_options={"provider": "echoplugin"}, environ={}).settings
    provider = build_provider(settings)
    result = await Orchestrator(AgentBundle(provider=provider)).run_turn(Session("s"), "ping")
    assert result.status == "completed"
    assert result.messages[-1].content == "Echo: ping"
    await provider.aclose()
