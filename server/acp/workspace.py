"""One workspace of the ACP front (a session's `cwd`): its settings, the
agent (assembled by agentls.app.build_agent with ACP's EditorChannels),
the one Orchestrator that runs its turns, and its long-running features
(MCP servers), started once a session exists to ask trust questions in.

The client's `mcpServers` (session/new, session/load) are merged into the
user's own `mcpServers` as the highest-precedence source (the client is
the user's editor: its servers are trusted like the user's settings; a
name in both takes the client's block). A workspace `.agentls.toml` or
`.mcp.json` still asks first, through the same gate as every tool call.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentls.acp.channels import AcpApprovalChannel, AcpDisplayChannel, ClientLink
from agentls.acp.files import AcpFiles

if TYPE_CHECKING:
    from agentls.core.agent.bundle import AgentBundle, EditorChannels
    from agentls.core.agent.orchestrator import Orchestrator
    from agentls.core.plugins.registry import PluginRegistry
    from agentls.core.provider.contract import Provider
    from agentls.core.sessions.store import SessionStore
    from agentls.core.settings.load import AgentlsSettings, LoadedSettings
    from agentls.core.trust.workspace import TrustStore

__all__ = ["AcpHost", "AcpWorkspace"]

log = logging.getLogger("agentls.acp.workspace")

FEATURE_START_SECONDS = 5.0
FEATURE_STOP_SECONDS = 15.0


class AcpHost:
    """What every workspace of the process shares: the environment, the
    session store (the language server's SQLite database), the user's trust
    store and the client link. Not the plugin registry: its plugins are
    instances with state (the MCP feature owns one workspace's servers), so
    each workspace has its own."""

    def __init__(self, link: ClientLink, environ: Mapping[str, str] | None = None) -> None:
        self.link = link
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


class AcpWorkspace:
    def __init__(self, root: Path, host: AcpHost) -> None:
        self.root = root
        self.host = host
        self.client_servers: dict[str, dict[str, Any]] = {}
        self.model: str | None = None  # chosen in the client
        self.models: list[tuple[str, str]] | None = None  # (id, name) the provider lists
        self.active_session: str | None = None  # the session whose turn runs or ran last
        self._loaded: LoadedSettings | None = None
        self._provider: Provider | None = None
        self._agent: AgentBundle | None = None
        self.orchestrator: Orchestrator | None = None
        self._features: dict[int, Any] = {}
        self._started = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._registry: PluginRegistry | None = None
        self.channels = self._channels()

    @property
    def registry(self) -> PluginRegistry:
        if self._registry is None:
            from agentls.core.plugins.registry import PluginRegistry

            self._registry = PluginRegistry.discover()
        return self._registry

    # -- settings -----------------------------------------------------------------
    @property
    def loaded(self) -> LoadedSettings:
        if self._loaded is None:
            self._loaded = self._load()
        return self._loaded

    @property
    def settings(self) -> AgentlsSettings:
        return self.loaded.settings

    def _load(self) -> LoadedSettings:
        from agentls.core.settings.load import load_settings

        names = self.registry.names("provider")

        def load(init: Mapping[str, Any] | None) -> LoadedSettings:
            return load_settings(init_options=init, environ=self.host.environ,
                                 workspace_root=self.root, trust_store=self.host.trust_store,
                                 provider_names=names)

        loaded = load({"model": self.model} if self.model else None)
        if self.client_servers:
            init: dict[str, Any] = {
                "mcpServers": {**loaded.settings.mcp_servers, **self.client_servers}}
            if self.model:
                init["model"] = self.model
            loaded = load(init)
        for problem in loaded.problems:
            log.warning("Settings: %s", problem)
        return loaded

    def set_client_servers(self, servers: Mapping[str, dict[str, Any]]) -> None:
        """The client's MCP servers for this workspace (its latest session's)."""
        if dict(servers) == self.client_servers:
            return
        self.client_servers = dict(servers)
        self.reload()

    def reload(self) -> None:
        self._loaded = None
        self.models = None
        self._agent = None
        old, self._provider = self._provider, None
        if old is not None:
            self._spawn(_close_provider(old))
        if self._started:
            self._spawn(self.start_features())

    def set_model(self, model: str) -> None:
        """The model chosen in the client (session/set_config_option), as
        the highest-precedence setting."""
        self.model = model
        models = self.models  # the same provider: its list stays
        self.reload()
        self.models = models

    # -- the agent ------------------------------------------------------------------
    def _channels(self) -> EditorChannels:
        from agentls.core.agent.bundle import EditorChannels
        from agentls.core.approval.documents import APPROVAL_QUESTIONS_FOLDER, QuestionDocuments
        from agentls.core.approval.gate import ApprovalGate

        link = self.host.link

        def session() -> str | None:
            return self.active_session or link.last_session

        def questions() -> Path:
            from agentls.core.support.state_dir import default_state_dir

            return default_state_dir(self.host.environ) / APPROVAL_QUESTIONS_FOLDER

        channel = AcpApprovalChannel(link, session)
        files = AcpFiles(link, [self.root], session, asyncio.get_running_loop())
        return EditorChannels(
            approval=channel,
            gate=ApprovalGate(channel, documents=QuestionDocuments(questions)),
            display=AcpDisplayChannel(link),
            documents=files.documents,
            editor=files,
            snapshots=files.snapshots,
        )

    def agent(self) -> AgentBundle:
        """The agent for the current settings (AgentlsError saying what to
        change when the provider cannot be built)."""
        if self._agent is None:
            from agentls.app import build_agent, build_provider

            if self._provider is None:
                self._provider = build_provider(self.settings, self.registry)
            self._agent = build_agent(self.settings, self.registry, self.channels,
                                      workspace_folders=[self.root], provider=self._provider)
        return self._agent

    async def list_models(self, within: float = 10.0) -> list[tuple[str, str]]:
        """(id, name) of the models the provider offers, asked once."""
        if self.models is None:
            found = await asyncio.wait_for(self.agent().provider.list_models(), within)
            self.models = [(m.id, m.display_name or m.id) for m in found][:200]
        return self.models

    def get_orchestrator(self) -> Orchestrator:
        agent = self.agent()
        if self.orchestrator is None:
            from agentls.core.agent.orchestrator import Orchestrator
            from agentls.core.checkpoints.store import CheckpointStore

            store = self.host.store()
            self.orchestrator = Orchestrator(agent, sink=store, checkpoints=CheckpointStore(store))
        elif self.orchestrator.agent is not agent:
            self.orchestrator.use(agent)
        return self.orchestrator

    def features(self) -> list[Any]:
        from agentls.app import enabled_plugins, plugin_config

        config = plugin_config(self.settings, [self.root])
        return enabled_plugins("feature", self.settings, self.registry, config)

    def feature_config(self) -> dict[str, Any]:
        from agentls.app import plugin_config

        return plugin_config(self.settings, [self.root])

    # -- long-running features and trust ------------------------------------------------
    def start(self) -> None:
        """After the first session exists: ask about `.agentls.toml` when it
        waits for trust, start the features (MCP, which asks about
        `.mcp.json`). In the background: nothing waits for them."""
        if self._started:
            return
        self._started = True
        self._spawn(self._ask_settings_trust())
        self._spawn(self.start_features())

    def trust_asker(self) -> Any:
        from agentls.core.trust.question import TrustAsker

        return TrustAsker(self.channels.gate, self.host.trust_store,
                          display=self.channels.display)

    async def _ask_settings_trust(self) -> None:
        from agentls.core.trust.question import settings_question

        trust = self.loaded.workspace_trust
        if trust is None or trust.state in ("none", "trusted", "refused"):
            return
        try:
            decision = await self.trust_asker().ask(settings_question(trust))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("Asking to trust %s failed: %s", trust.file, exc)
            return
        if decision is not None:
            self.reload()

    async def start_features(self) -> None:
        from agentls.core.plugins.capabilities import Startable
        from agentls.core.plugins.feature_host import FeatureHost
        from agentls.core.plugins.registry import offering

        try:
            enabled = {id(f): f for f in offering(self.features(), Startable)}
        except Exception:
            log.exception("Cannot list the features to start")
            return
        host = FeatureHost(settings=self.settings, workspace_folders=[self.root],
                           approval=self.channels.approval, display=self.channels.display,
                           trust_store=self.host.trust_store, trust=self.trust_asker(),
                           environ=self.host.environ)
        for key in [k for k in self._features if k not in enabled]:
            await _close_feature(self._features.pop(key))
        for key, feature in enabled.items():
            try:
                await asyncio.wait_for(feature.start(host), FEATURE_START_SECONDS)
                self._features[key] = feature
            except Exception:
                log.exception("Starting feature %s failed", type(feature).__name__)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self.orchestrator is not None:
            await self.orchestrator.end_sessions("shutdown")
        await asyncio.gather(*(_close_feature(f) for f in self._features.values()))
        self._features.clear()
        if self._provider is not None:
            await _close_provider(self._provider)
            self._provider = None

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def _close_feature(feature: object) -> None:
    from agentls.core.plugins.capabilities import Closable
    from agentls.core.plugins.registry import offers

    if not offers(feature, Closable):
        return
    try:
        await asyncio.wait_for(feature.aclose(), FEATURE_STOP_SECONDS)
    except Exception:
        log.exception("Stopping feature %s failed", type(feature).__name__)


async def _close_provider(provider: Provider) -> None:
    import inspect

    try:
        closing = provider.aclose()
        if inspect.isawaitable(closing):
            await closing
    except Exception:
        log.debug("Closing the provider failed", exc_info=True)
