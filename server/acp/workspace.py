"""One workspace of the ACP front (a session's `cwd`): its AgentHost
(agentls.host: settings, the agent with ACP's EditorChannels, the one
Orchestrator that runs its turns, the approval gate) and its long-running
features (MCP servers), started once a session exists to ask trust
questions in.

The client's `mcpServers` (session/new, session/load) are merged into the
user's own `mcpServers` as the highest-precedence source (the client is
the user's editor: its servers are trusted like the user's settings; a
name in both takes the client's block). A workspace `.agentls.toml` or
`.mcp.json` still asks first, through the same gate as every tool call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentls.acp.channels import AcpApprovalChannel, AcpDisplayChannel, ClientLink
from agentls.acp.files import AcpFiles
from agentls.host import AgentHost, HostStores, close_provider

if TYPE_CHECKING:
    from agentls.core.agent.bundle import EditorChannels
    from agentls.core.settings.sources import SettingsProblem

__all__ = ["AcpWorkspace"]

log = logging.getLogger("agentls.acp.workspace")


class AcpWorkspace:
    """One cwd: its AgentHost (settings, provider, agent, gate, features;
    agentls.host) and what only the ACP front keeps: the client link, the
    provider's model list, the session whose turn runs. The process's
    HostStores (one session database, one trust store) are shared by every
    workspace; the plugin registry is not: its plugins are instances with
    state (the MCP feature owns one workspace's servers)."""

    def __init__(self, root: Path, link: ClientLink, stores: HostStores) -> None:
        self.root = root
        self.link = link
        self.host = AgentHost(stores, workspace_folders=[root], workspace_root=root,
                              on_problems=_log_problems)
        self.models: list[tuple[str, str]] | None = None  # (id, name) the provider lists
        self.active_session: str | None = None  # the session whose turn runs or ran last
        self._started = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.channels = self._connect()

    # -- settings -----------------------------------------------------------------
    def set_client_servers(self, servers: Mapping[str, dict[str, Any]]) -> None:
        """The client's MCP servers for this workspace (its latest session's)."""
        if dict(servers) == self.host.client_servers:
            return
        self.reload(client_servers=servers)

    def reload(self, *, init_options: Mapping[str, Any] | None = None,
               client_servers: Mapping[str, dict[str, Any]] | None = None) -> None:
        """Re-read the settings (a given source replaces the last), close a
        provider they replaced, restart the features once started."""
        self.models = None
        self.host.reload_settings(init_options=init_options, client_servers=client_servers)
        for old in self.host.take_retired_providers():
            self._spawn(close_provider(old))
        if self._started:
            self._spawn(self.host.start_features())

    def set_model(self, model: str) -> None:
        """The model chosen in the client (session/set_config_option), as
        the highest-precedence setting."""
        models = self.models  # the same provider: its list stays
        self.reload(init_options={**self.host.init_options, "model": model})
        self.models = models

    # -- the agent ------------------------------------------------------------------
    def _connect(self) -> EditorChannels:
        link = self.link

        def session() -> str | None:
            return self.active_session or link.last_session

        files = AcpFiles(link, [self.root], session, asyncio.get_running_loop())
        return self.host.connect(
            approval=AcpApprovalChannel(link, session),
            display=AcpDisplayChannel(link),
            documents=files.documents,
            editor=files,
            snapshots=files.snapshots,
        )

    async def list_models(self, within: float = 10.0) -> list[tuple[str, str]]:
        """(id, name) of the models the provider offers, asked once."""
        if self.models is None:
            found = await asyncio.wait_for(self.host.agent().provider.list_models(), within)
            self.models = [(m.id, m.display_name or m.id) for m in found][:200]
        return self.models

    # -- long-running features and trust ------------------------------------------------
    def start(self) -> None:
        """After the first session exists: ask about `.agentls.toml` when it
        waits for trust, start the features (MCP, which asks about
        `.mcp.json`). In the background: nothing waits for them."""
        if self._started:
            return
        self._started = True
        self._spawn(self._ask_settings_trust())
        self._spawn(self.host.start_features())

    async def _ask_settings_trust(self) -> None:
        trust = self.host.loaded.workspace_trust
        if trust is None or trust.state in ("none", "trusted", "refused"):
            return
        if await self.host.ask_settings_trust(trust) is not None:
            self.reload()

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self.host.orchestrator is not None:
            await self.host.orchestrator.end_sessions("shutdown")
        await self.host.stop_features()
        await self.host.close_provider()

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _log_problems(problems: Sequence[SettingsProblem]) -> None:
    for problem in problems:
        log.warning("Settings: %s", problem)
