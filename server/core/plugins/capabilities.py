"""What a feature plugin may offer beyond agent_core's FeaturePlugin methods,
one typed Protocol per capability. The server finds them with `offers` /
`offering` (core/plugins/registry.py), never by probing for method names:

- `Startable`: `async start(host: FeatureHost)` after the settings were
  read at `initialized` and the first inline completion was answered (or
  2 s passed), and again after every settings change. Must return quickly:
  slow work (starting processes) goes into the plugin's own background
  tasks, so initialize and inline completion never wait for it.
- `Closable`: `async aclose()` at shutdown, or when the feature is turned
  off; stops every process the plugin started.
- `ToolSource`: `tool_plugins() -> list` of ToolPlugins it contributes
  (alongside the `agentls.tools` entry points); those with `tools_version`
  may change their tools at run time (core/tools/executor.py). The MCP client is one.
- `HookSource`: `hook_modules() -> list` of hook modules it contributes
  (`register(hooks, context)`, as the `agentls.hooks` entry points).
- `StatusSource`: `status() -> dict` of keys added to `agentls/status`
  (e.g. `mcp`).
- `TemplateSource`: `list_templates(config) -> list[dict]` of prompt
  templates (`name`, `description`, `template`, `source`) for
  `agentls/templates`, `/` completion and the code actions (the templates
  feature, MCP prompts); the text of one comes from agent_core's
  `get_template(config)` with `config["template"]` naming it.
- `StatusReporter`: `status_report() -> dict`: a provider's keys added to
  `agentls/status` (the local provider's processes and downloads, the
  FIM probe results of openai/ollama).
- `ProgressAware`: `attach_progress(sink)`: a provider that shows model
  downloads and slow loads (core/provider/progress.py).
- `ModelPreparer`: `prepare_models(named)`: a provider that fetches the
  models the settings name (`hf:` downloads) as soon as they are chosen;
  `named` maps each setting key, as the user spells it, to its model, so an
  error can say which setting to change.
- `TakesOver`: `take_over(previous)`: a provider that keeps the previous
  provider's serving models until its own are ready (local).
- `Warmable`: `async warm(model, role)`: a provider that readies a model
  before its first request (local: reads the GGUF, starts or leases the
  child), asked when a document opens so the first keystroke waits for
  nothing but the model.

The request/answer contracts of the editor features live beside their
types: `InlineCompleter` (core/editor/inline_completion.py), `NextEditSuggester`
(core/editor/next_edit.py), `PromptEnricher` (core/editor/prompt_enrichment.py).

A feature written against agent_core's FeaturePlugin alone (name, version,
priority, get_completions, get_template, ...) offers none of these and is
still loaded, enabled and asked for completions as before.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentls.core.plugins.protocols import plugin_name
from agentls.core.plugins.registry import offering

if TYPE_CHECKING:
    from agentls.core.plugins.feature_host import FeatureHost
    from agentls.core.provider.progress import ProgressSink

__all__ = [
    "Closable",
    "HookSource",
    "ModelPreparer",
    "ProgressAware",
    "Startable",
    "StatusReporter",
    "StatusSource",
    "TakesOver",
    "TemplateSource",
    "ToolSource",
    "contributed_hook_modules",
    "contributed_tool_plugins",
]

log = logging.getLogger("agentls.plugins")


@runtime_checkable
class Startable(Protocol):
    async def start(self, host: FeatureHost) -> None: ...


@runtime_checkable
class Closable(Protocol):
    async def aclose(self) -> None: ...


@runtime_checkable
class ToolSource(Protocol):
    def tool_plugins(self) -> Sequence[Any]: ...


@runtime_checkable
class HookSource(Protocol):
    def hook_modules(self) -> Sequence[Any]: ...


@runtime_checkable
class StatusSource(Protocol):
    def status(self) -> Mapping[str, Any]: ...


@runtime_checkable
class TemplateSource(Protocol):
    def list_templates(self, config: dict[str, Any]) -> Sequence[Mapping[str, Any]]: ...


@runtime_checkable
class StatusReporter(Protocol):
    def status_report(self) -> Mapping[str, Any]: ...


@runtime_checkable
class ProgressAware(Protocol):
    def attach_progress(self, sink: ProgressSink) -> None: ...


@runtime_checkable
class ModelPreparer(Protocol):
    def prepare_models(self, named: Mapping[str, str]) -> None: ...


@runtime_checkable
class TakesOver(Protocol):
    def take_over(self, previous: Any) -> None: ...


@runtime_checkable
class Warmable(Protocol):
    async def warm(self, model: str | None, role: str) -> None: ...


def contributed_tool_plugins(features: Iterable[object]) -> list[Any]:
    """The ToolPlugins the features contribute; one that fails is logged
    and skipped."""
    found: list[Any] = []
    for feature in offering(features, ToolSource):
        try:
            found.extend(feature.tool_plugins() or [])
        except Exception:
            log.exception("tool_plugins of feature %s failed; skipped", plugin_name(feature))
    return found


def contributed_hook_modules(features: Iterable[object]) -> list[Any]:
    """The hook modules the features contribute; one that fails is logged
    and skipped."""
    found: list[Any] = []
    for feature in offering(features, HookSource):
        try:
            found.extend(feature.hook_modules() or [])
        except Exception:
            log.exception("hook_modules of feature %s failed; skipped", plugin_name(feature))
    return found
