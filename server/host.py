"""One host for both fronts: what the language server (lsp/state.py) and
each ACP workspace (acp/workspace.py) hold to run the agent.

`AgentHost` owns the chain registry -> settings -> provider -> bundle ->
orchestrator, the one approval gate with its question documents, and the
long-running features started for its settings (MCP servers). A
front lends what only it has (`connect`: the approval and display
channels, the opener for long questions, the edit applier and document
lookups) and sets the settings' sources and the workspace folders; it
keeps its own wire state (LSP documents and counters, ACP's cwd and
client link). `HostStores` is the user's state one process keeps open
(the session database, the trust store): ACP's workspaces share one.

Cache rules: the settings are read on first use and on reload; the
provider is rebuilt only when a provider setting changed; a new bundle
only when the settings, the folders or the channels changed; one
Orchestrator per host, handed each new bundle. The keystroke path
(`provider()`, `feature()`) never builds a bundle, and this module
imports nothing heavy at load: it is imported when a front starts.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from agentls.core.agent.bundle import AgentBundle, EditorChannels, PublishDiagnostics
    from agentls.core.agent.orchestrator import Orchestrator
    from agentls.core.approval.documents import DocumentOpener
    from agentls.core.approval.gate import ApprovalChannel, ApprovalGate, DisplayChannel
    from agentls.core.editor.edits import DocumentLookup, EditApplier
    from agentls.core.plugins.feature_host import FeatureHost
    from agentls.core.plugins.hooks import HookRegistry
    from agentls.core.plugins.registry import PluginRegistry
    from agentls.core.provider.contract import Provider
    from agentls.core.provider.progress import ProgressSink
    from agentls.core.sessions.store import SessionStore
    from agentls.core.settings.load import LoadedSettings
    from agentls.core.settings.schema import AgentlsSettings
    from agentls.core.settings.sources import SettingsProblem
    from agentls.core.trust.question import TrustAsker
    from agentls.core.trust.workspace import TrustDecision, TrustStore, WorkspaceTrust
    from agentls.features.policy.restricted import RestrictedFolder

__all__ = ["AgentHost", "HostStores"]

T = TypeVar("T")

log = logging.getLogger("agentls.host")

# Settings whose change means the provider must be rebuilt.
_PROVIDER_KEYS = ("provider", "model", "baseUrl", "apiKeyEnv", "providerOptions",
                  "requestTimeoutSeconds", "connectTimeoutSeconds")
PROVIDER_CLOSE_SECONDS = 5.0
FEATURE_START_SECONDS = 5.0
FEATURE_STOP_SECONDS = 15.0


class HostStores:
    """The environment, the session store (SQLite) and the user's trust
    store, opened on first use (the initialize answer needs neither)."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self.environ: Mapping[str, str] = environ if environ is not None else os.environ
        self._store: SessionStore | None = None
        self._trust: TrustStore | None = None

    def store(self) -> SessionStore:
        if self._store is None:
            from agentls.core.sessions.store import SessionStore

            self._store = SessionStore.open_default(self.environ)
        return self._store

    @property
    def trust_store(self) -> TrustStore:
        if self._trust is None:
            from agentls.core.trust.workspace import TrustStore

            self._trust = TrustStore.default(self.environ)
        return self._trust

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


class AgentHost:
    """registry -> settings -> provider -> bundle -> orchestrator, and the
    gate, for one set of workspace folders (see the module docstring)."""

    def __init__(self, stores: HostStores, *, workspace_folders: Sequence[Path] = (),
                 workspace_root: Path | None = None,
                 on_problems: Callable[[Sequence[SettingsProblem]], None] | None = None,
                 ) -> None:
        self.stores = stores
        # Built on first use: the entry-point scan is not needed to answer initialize.
        self._registry: PluginRegistry | None = None
        # The settings' sources a front sets: initializationOptions (or ACP's
        # chosen model), the workspace/configuration section, the client's MCP servers.
        self.init_options: dict[str, Any] = {}
        self.workspace_config: dict[str, Any] = {}
        self.client_servers: dict[str, dict[str, Any]] = {}
        self.workspace_folders: list[Path] = list(workspace_folders)
        self.workspace_root = workspace_root  # None: the first folder
        # Told every load's problems (ACP logs them; the LSP reports what reload_settings returns).
        self._on_problems = on_problems
        self._loaded: LoadedSettings | None = None
        # feature(): the plugins found by (name, Protocol), per settings load.
        self._features_for: tuple[object, dict[tuple[str, Any], Any]] = (None, {})
        self._provider: Provider | None = None
        self._retired: list[Provider] = []  # replaced providers, for the front to close
        self._provider_error: str | None = None
        # Where providers show downloads and slow loads (lsp/progress.py); None: nowhere.
        self.progress: ProgressSink | None = None
        self._gate: ApprovalGate | None = None
        # What the front lent (connect); None until it did (the CLI never does).
        self.channels: EditorChannels | None = None
        self._agent: AgentBundle | None = None
        self._agent_inputs: tuple[object, ...] = ()
        self._agent_place: tuple[object, ...] = ()
        self.orchestrator: Orchestrator | None = None
        # Features whose start(host) ran (start_features), by id.
        self.started_features: dict[int, Any] = {}

    # -- registry and settings ------------------------------------------------------
    @property
    def registry(self) -> PluginRegistry:
        if self._registry is None:
            from agentls.core.plugins.registry import PluginRegistry

            self._registry = PluginRegistry.discover()
        return self._registry

    @property
    def trust_store(self) -> TrustStore:
        return self.stores.trust_store

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
        client_servers: Mapping[str, dict[str, Any]] | None = None,
    ) -> list[SettingsProblem]:
        """Re-read every source (a given one replaces the last). Invalid
        values fall back per key, so the result is always usable; the
        problems are for the user to fix. The provider is dropped when a
        provider setting changed."""
        if init_options is not None:
            self.init_options = dict(init_options)
        if workspace_config is not None:
            self.workspace_config = dict(workspace_config)
        if client_servers is not None:
            self.client_servers = dict(client_servers)
        # The registry's entry-point scan first: it also answers pydantic's
        # plugin scan, which importing the settings schema would start.
        provider_names = self.registry.names("provider")
        from agentls.core.settings.load import load_settings

        def load(init: Mapping[str, Any]) -> LoadedSettings:
            return load_settings(
                init_options=init, workspace_config=self.workspace_config,
                environ=self.stores.environ, workspace_root=self._root(),
                trust_store=self.trust_store, provider_names=provider_names)

        previous = self._loaded
        before = ({k: previous.settings.to_wire().get(k) for k in _PROVIDER_KEYS}
                  if previous is not None else None)
        loaded = load(self.init_options)
        if self.client_servers:
            # The client's servers over the user's own (a name in both takes the client's block).
            loaded = load({**self.init_options, "mcpServers": {
                **loaded.settings.mcp_servers, **self.client_servers}})
        self._loaded = loaded
        after = {k: loaded.settings.to_wire().get(k) for k in _PROVIDER_KEYS}
        if before is not None and before != after:
            self.drop_provider()
        if self._on_problems is not None:
            self._on_problems(loaded.problems)
        return list(loaded.problems)

    def _root(self) -> Path | None:
        return self.workspace_root or (self.workspace_folders[0]
                                       if self.workspace_folders else None)

    # -- provider ---------------------------------------------------------------------
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

    @property
    def current_provider(self) -> Provider | None:
        """The provider if it was built (None before first use and after a
        settings change dropped it)."""
        return self._provider

    def drop_provider(self) -> None:
        """Forget the provider (settings changed); the front closes it in the
        background (take_retired_providers), where it holds the event loop."""
        old, self._provider = self._provider, None
        if old is not None:
            self._retired.append(old)

    def take_retired_providers(self) -> list[Provider]:
        retired = list(self._retired)
        self._retired.clear()
        return retired

    async def close_provider(self) -> None:
        """Close the current provider (at shutdown), bounded."""
        provider, self._provider = self._provider, None
        if provider is not None:
            await close_provider(provider)

    # -- plugins -------------------------------------------------------------------------
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

    def feature_host(self) -> FeatureHost:
        """What long-running features get at start (core/plugins/feature_host.py):
        their trust questions go through the host's gate."""
        from agentls.core.plugins.feature_host import FeatureHost

        channels = self.channels
        return FeatureHost(
            settings=self.settings,
            workspace_folders=list(self.workspace_folders),
            approval=channels.approval if channels else None,
            display=channels.display if channels else None,
            trust_store=self.trust_store,
            trust=self.trust_asker(),
            environ=self.stores.environ,
        )

    async def start_features(self) -> None:
        """(Re)start long-running features (the Startable capability,
        core/plugins/capabilities.py) with the current settings; stop those
        no longer enabled. Each start only schedules its work, so this
        returns at once."""
        from agentls.core.plugins.capabilities import Startable
        from agentls.core.plugins.protocols import plugin_name
        from agentls.core.plugins.registry import offering

        try:
            enabled = {id(f): f for f in offering(self.features(), Startable)}
            host = self.feature_host()
        except Exception:
            log.exception("Cannot list the features to start")
            return
        for key in [k for k in self.started_features if k not in enabled]:
            await close_feature(self.started_features.pop(key))
        for key, feature in enabled.items():
            try:
                await asyncio.wait_for(feature.start(host), FEATURE_START_SECONDS)
                self.started_features[key] = feature
            except Exception:
                log.exception("Starting feature %s failed", plugin_name(feature))

    async def stop_features(self) -> None:
        """Stop what features started (MCP server processes), in parallel, bounded."""
        features = list(self.started_features.values())
        self.started_features.clear()
        await asyncio.gather(*(close_feature(f) for f in features))

    def restricted_notice(self) -> str | None:
        """What the user is told when a workspace folder is a home, root or
        system folder (restricted mode, features/policy/restricted.py), or None."""
        from agentls.features.policy.restricted import restricted_notice

        return restricted_notice(self.restricted_folders())

    def restricted_folders(self) -> list[RestrictedFolder]:
        """The workspace folders in restricted mode."""
        from agentls.features.policy.restricted import restricted_folders

        return restricted_folders(self.workspace_folders,
                                  self.settings.approval.unrestricted_folders)

    # -- the gate and what the front lends ---------------------------------------------------
    @property
    def gate(self) -> ApprovalGate:
        """The one approval gate: turns, edits, restores and workspace-trust
        questions ask through it, so "Allow for session" answers are one
        memory. Questions too long for a message are written whole to
        `<state dir>/approval-questions/` (created 0700 on first use)."""
        if self._gate is None:
            from agentls.core.approval.documents import (
                APPROVAL_QUESTIONS_FOLDER,
                QuestionDocuments,
            )
            from agentls.core.approval.gate import ApprovalGate

            environ = self.stores.environ

            def folder() -> Path:
                from agentls.core.support.state_dir import default_state_dir

                return default_state_dir(environ) / APPROVAL_QUESTIONS_FOLDER

            self._gate = ApprovalGate(documents=QuestionDocuments(folder))
        return self._gate

    def connect(
        self,
        *,
        approval: ApprovalChannel | None = None,
        display: DisplayChannel | None = None,
        opener: DocumentOpener | None = None,
        documents: Callable[[Path], str | None] | None = None,
        editor: EditApplier | None = None,
        snapshots: DocumentLookup | None = None,
        publish_diagnostics: PublishDiagnostics | None = None,
    ) -> EditorChannels:
        """The front's pieces as the EditorChannels of every bundle from now
        on, around the host's gate (which asks through `approval` and opens
        long questions with `opener`)."""
        from agentls.core.agent.bundle import EditorChannels

        self.channels = EditorChannels(
            approval=approval, gate=self.gate, display=display, opener=opener,
            documents=documents, editor=editor, snapshots=snapshots,
            publish_diagnostics=publish_diagnostics,
        )
        return self.channels

    def trust_asker(self) -> TrustAsker:
        """Workspace-trust questions (`.agentls.toml`, `.mcp.json`) through the
        gate, answers kept in the user's trust store."""
        from agentls.core.trust.question import TrustAsker

        channels = self.channels
        return TrustAsker(self.gate, self.trust_store,
                          channels.opener if channels else None,
                          channels.display if channels else None)

    async def ask_settings_trust(self, trust: WorkspaceTrust) -> TrustDecision | None:
        """Ask to trust the workspace settings file (`.agentls.toml`); None
        when dismissed or when asking failed (logged)."""
        from agentls.core.trust.question import settings_question

        try:
            return await self.trust_asker().ask(settings_question(trust))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("Asking to trust %s failed: %s", trust.file, exc)
            return None

    # -- agent turns ------------------------------------------------------------------------
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
        # Objects compared by identity (a settings load is a new object), the folders by value.
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
        per-session statuses are kept. AgentlsError when the provider
        cannot be built."""
        agent = self.agent()
        if self.orchestrator is None:
            from agentls.core.agent.orchestrator import Orchestrator
            from agentls.core.checkpoints.store import CheckpointStore

            store = self.stores.store()
            self.orchestrator = Orchestrator(agent, sink=store,
                                             checkpoints=CheckpointStore(store))
        elif self.orchestrator.agent is not agent:
            self.orchestrator.use(agent)
        return self.orchestrator

    def session_statuses(self) -> list[Any]:
        """SessionStatus of the sessions this host ran."""
        orchestrator = self.orchestrator
        return list(orchestrator.statuses()) if orchestrator is not None else []


async def close_provider(provider: Provider) -> None:
    """provider.aclose(), bounded; a failure is logged, never raised."""
    try:
        closing = provider.aclose()
        if inspect.isawaitable(closing):
            await asyncio.wait_for(closing, PROVIDER_CLOSE_SECONDS)
    except Exception:
        log.exception("Closing the provider failed")


async def close_feature(feature: object) -> None:
    """feature.aclose() when it has one (Closable), bounded; a failure is logged."""
    from agentls.core.plugins.capabilities import Closable
    from agentls.core.plugins.protocols import plugin_name
    from agentls.core.plugins.registry import offers

    if not offers(feature, Closable):
        return
    try:
        await asyncio.wait_for(feature.aclose(), FEATURE_STOP_SECONDS)
    except Exception:
        log.exception("Stopping feature %s failed", plugin_name(feature))
