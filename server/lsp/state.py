"""What one server process knows: settings (with their sources), the plugin
registry, the provider, the agent bundle, the session store, counters.
Built lazily, so the first `initialize` answer does not wait for any of it.

The agent is assembled by agentls.app.build_agent, not here: this module
holds the one bundle for the current settings (`agent()`), swaps it when
they change, and hands it to the one Orchestrator (`get_orchestrator()`).
The keystroke path (inline completion, next edit) uses `provider()` and
`feature()` alone and never pays for a bundle."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from agentls.core.agent.bundle import AgentBundle, EditorChannels
    from agentls.core.agent.orchestrator import Orchestrator
    from agentls.core.editor.history import EditHistory
    from agentls.core.plugins.feature_host import FeatureHost
    from agentls.core.plugins.hooks import HookRegistry
    from agentls.core.plugins.registry import PluginRegistry
    from agentls.core.provider.contract import Provider
    from agentls.core.provider.progress import ProgressSink
    from agentls.core.sessions.store import SessionStore
    from agentls.core.settings.load import AgentlsSettings, LoadedSettings, SettingsProblem
    from agentls.core.trust.workspace import TrustStore

T = TypeVar("T")

log = logging.getLogger("agentls.lsp.state")

# Settings whose change means the provider must be rebuilt.
_PROVIDER_KEYS = ("provider", "model", "baseUrl", "apiKeyEnv", "providerOptions",
                  "requestTimeoutSeconds", "connectTimeoutSeconds")


@dataclass
class CompletionCounters:
    served: int = 0  # non-empty inline completion answers
    shown: int = 0  # textDocument/didShowCompletion received
    accepted: int = 0  # agentls.inlineCompletionAccepted run

    def to_wire(self) -> dict[str, int]:
        return {"served": self.served, "shown": self.shown, "accepted": self.accepted}


@dataclass
class PromptCounters:
    """What inline completion sent to the model (agentls/status
    `inlinePrompts`; read by `agentls eval`)."""

    requests: int = 0  # model calls
    chars: int = 0  # prompt characters
    input_tokens: int = 0  # as the provider reported (0 when it does not)

    def to_wire(self) -> dict[str, int]:
        return {"requests": self.requests, "chars": self.chars,
                "inputTokens": self.input_tokens}


@dataclass
class NextEditCounters:
    served: int = 0  # non-empty copilotInlineEdit answers
    accepted: int = 0  # agentls.nextEditAccepted run

    def to_wire(self) -> dict[str, int]:
        return {"served": self.served, "accepted": self.accepted}


class ServerState:
    def __init__(self, *, environ: Mapping[str, str] | None = None) -> None:
        self.environ = environ
        # The plugin registry, the trust store and the settings are built on
        # first use, after the initialize answer: pydantic, the entry-point
        # scan and the settings files are not needed to answer it.
        self._registry: PluginRegistry | None = None
        self.init_options: dict[str, Any] = {}
        self.workspace_config: dict[str, Any] = {}
        self.workspace_root: Path | None = None  # the first workspace folder
        self.workspace_folders: list[Path] = []
        # The user's workspace-trust decisions (user state dir, never the workspace).
        self._trust_store: TrustStore | None = None
        self._loaded: LoadedSettings | None = None
        # feature(): the plugins found by (name, Protocol), for the settings
        # load they were found under.
        self._features_for: tuple[object, dict[tuple[str, Any], Any]] = (None, {})
        self.counters = CompletionCounters()
        self.next_edit_counters = NextEditCounters()
        self.prompt_counters = PromptCounters()
        self._edit_history: EditHistory | None = None
        self._provider: Provider | None = None
        self._retired: list[Provider] = []  # replaced providers, closed by lifecycle
        self._provider_error: str | None = None
        # Where providers show downloads and slow loads (lsp/progress.py).
        self.progress: ProgressSink | None = None
        self._store: SessionStore | None = None
        self._told: set[str] = set()
        # Settings problems shown at the last report (lifecycle.report_problems).
        self.reported_problems: set[str] = set()
        # Agent turns: the editor's channels (set by agentls.lsp.agent.chat), the
        # bundle built from them and the settings (agent()), and one
        # orchestrator per process (get_orchestrator).
        self.channels: EditorChannels | None = None
        self._agent: AgentBundle | None = None
        self._agent_inputs: tuple[object, ...] = ()
        self._agent_place: tuple[object, ...] = ()
        self.orchestrator: Orchestrator | None = None
        # Set once the first inline completion was answered (lsp.inline).
        self.inline_warm: Any = None

    # -- settings --------------------------------------------------------------
    @property
    def registry(self) -> PluginRegistry:
        if self._registry is None:
            from agentls.core.plugins.registry import PluginRegistry

            self._registry = PluginRegistry.discover()
        return self._registry

    @property
    def trust_store(self) -> TrustStore:
        if self._trust_store is None:
            from agentls.core.trust.workspace import TrustStore

            self._trust_store = TrustStore.default(self.environ)
        return self._trust_store

    @property
    def loaded(self) -> LoadedSettings:
        if self._loaded is None:
            self.reload_settings()
        assert self._loaded is not None
        return self._loaded

    @property
    def settings(self) -> AgentlsSettings:
        return self.loaded.settings

    def set_init_options(self, options: Mapping[str, Any]) -> None:
        """initializationOptions, read with the other sources on first use."""
        self.init_options = dict(options)
        self._loaded = None

    def reload_settings(
        self,
        *,
        init_options: Mapping[str, Any] | None = None,
        workspace_config: Mapping[str, Any] | None = None,
    ) -> list[SettingsProblem]:
        """Re-read every source. Invalid values fall back per key, so the
        result is always usable; the problems are for the user to fix."""
        if init_options is not None:
            self.init_options = dict(init_options)
        if workspace_config is not None:
            self.workspace_config = dict(workspace_config)
        # The registry's entry-point scan first: it also answers pydantic's
        # plugin scan, which importing the settings schema would start.
        provider_names = self.registry.names("provider")
        from agentls.core.settings.load import load_settings

        previous = self._loaded
        before = ({k: previous.settings.to_wire().get(k) for k in _PROVIDER_KEYS}
                  if previous is not None else None)
        self._loaded = load_settings(
            init_options=self.init_options,
            workspace_config=self.workspace_config,
            environ=self.environ,
            workspace_root=self.workspace_root,
            trust_store=self.trust_store,
            provider_names=provider_names,
        )
        after = {k: self._loaded.settings.to_wire().get(k) for k in _PROVIDER_KEYS}
        if before is not None and before != after:
            self.drop_provider()
        return list(self._loaded.problems)

    # -- the user's edits (next edit suggestions) --------------------------------
    @property
    def edit_history(self) -> EditHistory:
        if self._edit_history is None:
            from agentls.core.editor.history import EditHistory

            self._edit_history = EditHistory()
        return self._edit_history

    # -- provider ----------------------------------------------------------------
    def provider(self) -> Provider:
        """The configured provider, built on first use. AgentlsError with
        what to change when it cannot be built."""
        if self._provider is None:
            try:
                from agentls.app import build_provider

                provider = build_provider(self.settings, self.registry)
                self._provider, self._provider_error = provider, None
                if self.progress is not None:
                    from agentls.core.plugins.capabilities import ProgressAware
                    from agentls.core.plugins.registry import offers

                    if offers(provider, ProgressAware):
                        provider.attach_progress(self.progress)
            except Exception as exc:  # AgentlsError saying what to change
                self._provider_error = str(exc)
                raise
        return self._provider

    def drop_provider(self) -> None:
        """Forget the provider (settings changed); it is closed in the background
        by whoever holds the event loop (see lifecycle)."""
        old, self._provider = self._provider, None
        if old is not None:
            self._retired.append(old)

    def take_retired_providers(self) -> list[Provider]:
        retired = list(self._retired)
        self._retired.clear()
        return retired

    # -- sessions ------------------------------------------------------------------
    def store(self) -> SessionStore:
        if self._store is None:
            from agentls.core.sessions.store import SessionStore

            self._store = SessionStore.open_default(self.environ or _os_environ())
        return self._store

    def close_store(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    # -- plugins -------------------------------------------------------------------
    def feature_config(self) -> dict[str, Any]:
        """The `config` dict every FeaturePlugin/ToolPlugin hook receives."""
        from agentls.app import plugin_config

        return plugin_config(self.settings, self.workspace_folders, self.workspace_root)

    def features(self) -> list[Any]:
        """Enabled feature plugins, by priority (features.disabled applies)."""
        from agentls.app import enabled_plugins

        return enabled_plugins("feature", self.settings, self.registry, self.feature_config())

    def feature(self, name: str, contract: Callable[..., T]) -> T | None:
        """One enabled feature plugin by name that offers `contract`, a
        runtime-checkable Protocol such as InlineCompleter or
        NextEditSuggester (checked by core.registry.offers); None when off,
        missing or without it, without loading the others unless its
        enablement needs their tags. Looked up once per settings load: the
        per-keystroke handlers ask on every request."""
        loaded = self.loaded
        if self._features_for[0] is not loaded:
            self._features_for = (loaded, {})
        known = self._features_for[1]
        key = (name, contract)
        if key not in known:
            from agentls.core.plugins.registry import offers

            found = self.registry.enabled_one(
                "feature", name, self.feature_config(), disabled=self.settings.features.disabled,
            )
            known[key] = found if offers(found, contract) else None
        return cast("T | None", known[key])

    def tools(self) -> list[Any]:
        """Enabled tool plugins (features.disabled applies to them too), and
        those the enabled features contribute (MCP servers' tools)."""
        from agentls.app import enabled_plugins
        from agentls.core.plugins.capabilities import contributed_tool_plugins

        return [*enabled_plugins("tool", self.settings, self.registry, self.feature_config()),
                *contributed_tool_plugins(self.features())]

    async def warm_up(self, limit: float = 2.0) -> None:
        """Until the first inline completion was answered, at most `limit` s."""
        import asyncio

        if self.inline_warm is None:
            self.inline_warm = asyncio.Event()
        try:
            await asyncio.wait_for(self.inline_warm.wait(), limit)
        except TimeoutError:
            pass

    def feature_host(self, trust: Any = None) -> FeatureHost:
        """What long-running features get at start (core/plugins/feature_host.py);
        `trust`: the TrustAsker workspace-trust questions go through."""
        from agentls.core.plugins.feature_host import FeatureHost

        channels = self.channels
        return FeatureHost(
            settings=self.settings,
            workspace_folders=list(self.workspace_folders),
            approval=channels.approval if channels else None,
            display=channels.display if channels else None,
            trust_store=self.trust_store,
            trust=trust,
            environ=self.environ,
        )

    # -- agent turns -----------------------------------------------------------------
    def build_hooks(self) -> HookRegistry:
        """The hook handlers of the current settings without a bundle (no
        provider needed): agentls.app.build_hooks, as build_agent makes them."""
        from agentls.app import build_hooks

        return build_hooks(self.settings, self.registry, self.channels,
                           workspace_folders=self.workspace_folders,
                           workspace_root=self.workspace_root)

    def agent(self) -> AgentBundle:
        """The agent for the current settings, folders and channels, built
        by agentls.app.build_agent on first use and again when one of them
        changed (the same bundle otherwise). AgentlsError when the provider
        cannot be built."""
        provider = self.provider()
        # Objects compared by identity (a settings load is a new object),
        # the folders by value.
        inputs = (provider, self.loaded, self.channels)
        place = (tuple(self.workspace_folders), self.workspace_root)
        if (self._agent is not None and place == self._agent_place
                and all(a is b for a, b in zip(inputs, self._agent_inputs, strict=True))):
            return self._agent
        from agentls.app import build_agent

        self._agent = build_agent(
            self.settings, self.registry, self.channels,
            workspace_folders=self.workspace_folders, workspace_root=self.workspace_root,
            provider=provider,
        )
        self._agent_inputs, self._agent_place = inputs, place
        return self._agent

    def get_orchestrator(self) -> Orchestrator:
        """The turn loop, built on first use, running the current agent().
        After a settings change the same object is handed the new bundle
        (Orchestrator.use) rather than replaced, so running turns stay
        cancellable (and finish on the bundle they started with) and the
        per-session statuses of this process are kept. AgentlsError when
        the provider cannot be built."""
        agent = self.agent()
        if self.orchestrator is None:
            from agentls.core.agent.orchestrator import Orchestrator
            from agentls.core.checkpoints.store import CheckpointStore

            store = self.store()
            self.orchestrator = Orchestrator(agent, sink=store,
                                             checkpoints=CheckpointStore(store))
        elif self.orchestrator.agent is not agent:
            self.orchestrator.use(agent)
        return self.orchestrator

    def session_statuses(self) -> list[Any]:
        """SessionStatus of the sessions this process ran (filled by chat)."""
        orchestrator = getattr(self, "orchestrator", None)
        return list(orchestrator.statuses()) if orchestrator is not None else []

    # -- user notices ----------------------------------------------------------------
    def first_time(self, key: str) -> bool:
        """True once per key: errors the user can act on are shown once, not
        per keystroke."""
        if key in self._told:
            return False
        self._told.add(key)
        return True

    def forget_notice(self, key: str) -> None:
        self._told.discard(key)


def _os_environ() -> Mapping[str, str]:
    import os

    return os.environ
