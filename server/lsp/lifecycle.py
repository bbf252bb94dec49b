"""initialize / initialized / didChangeConfiguration / shutdown.

Settings come from initializationOptions (under `agentls`) and the
`workspace/configuration` section `agentls` (re-read on
didChangeConfiguration); problems go to the user once with
window/showMessage (Error), and the server keeps running on the last valid
value of each key.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from agentls.lsp.copilot import dialect
from agentls.lsp.reload import (
    close_retired_providers,
    prepare_models,
    report_problems,
    report_restricted,
)
from agentls.lsp.suggestions import inline_registration
from agentls.lsp.trust import schedule_trust_question
from agentls.lsp.wire.convert import to_plain

if TYPE_CHECKING:
    from agentls.lsp.server import AgentlsLanguageServer

log = logging.getLogger("agentls.lsp.lifecycle")

SECTION = "agentls"


def register(server: AgentlsLanguageServer) -> None:
    @server.feature(types.INITIALIZE)
    def on_initialize(ls: AgentlsLanguageServer, params: types.InitializeParams) -> None:
        inline_registration.prepare(ls, params)
        dialect.prepare(ls, params)
        ls.state.host.workspace_root = _workspace_root(params)
        ls.state.host.workspace_folders = _workspace_folders(params, ls.state.host.workspace_root)
        options = to_plain(params.initialization_options) or {}
        if isinstance(options, Mapping) and isinstance(options.get(SECTION), Mapping):
            options = options[SECTION]
        elif isinstance(options, Mapping):  # what a client says of itself is no setting
            options = dialect.own_keys_removed(options)
        # Read with the other sources after this answer (on `initialized`):
        # requests wait for them (settings_ready), the answer need not.
        ls.state.host.set_init_options(options if isinstance(options, Mapping) else {})

    @server.feature(types.INITIALIZED)
    async def on_initialized(ls: AgentlsLanguageServer, params: types.InitializedParams) -> None:
        try:
            await refresh_configuration(ls)
        finally:
            ls.settings_ready.set()
        report_restricted(ls)
        schedule_trust_question(ls)
        await inline_registration.sync(ls)
        dialect.announce(ls)
        # Loading every feature plugin (and what they start) waits until the
        # first inline completion was answered (at most 2 s): start-up work
        # must not compete with the editor's first suggestion.
        ls.in_background(_start_features_when_warm(ls))

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_did_change_configuration(
        ls: AgentlsLanguageServer, params: types.DidChangeConfigurationParams
    ) -> None:
        # Clients that push settings put them in params.settings; pull-model
        # clients send null and expect us to ask.
        pushed = to_plain(params.settings)
        if isinstance(pushed, Mapping) and isinstance(pushed.get(SECTION), Mapping):
            problems = ls.state.host.reload_settings(workspace_config=pushed[SECTION])
            report_problems(ls, problems)
        await refresh_configuration(ls)
        await close_retired_providers(ls)
        report_restricted(ls)
        schedule_trust_question(ls)
        await inline_registration.sync(ls)
        await start_features(ls)

    @server.feature(types.SHUTDOWN)
    async def on_shutdown(ls: AgentlsLanguageServer, params: Any) -> None:
        await ls.graceful_shutdown()
        await ls.state.host.stop_features()


async def _start_features_when_warm(ls: AgentlsLanguageServer) -> None:
    await ls.state.warm_up()
    await start_features(ls)


async def start_features(ls: AgentlsLanguageServer) -> None:
    """(Re)start the host's long-running features (AgentHost.start_features)."""
    try:
        await ls.state.host.start_features()
    finally:
        ls.features_started.set()


async def refresh_configuration(ls: AgentlsLanguageServer) -> None:
    workspace_config: Mapping[str, Any] | None = None  # None: keep what was read before
    if _client_supports_configuration(ls):
        try:
            result = await asyncio.wait_for(
                ls.workspace_configuration_async(
                    types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
                ),
                10,
            )
            section = to_plain(result[0]) if result else None
            workspace_config = section if isinstance(section, Mapping) else {}
        except Exception as exc:  # an odd client must not stop the server
            log.warning("workspace/configuration failed: %s", exc)
    report_problems(ls, ls.state.host.reload_settings(workspace_config=workspace_config))
    prepare_models(ls)


def _client_supports_configuration(ls: AgentlsLanguageServer) -> bool:
    try:
        workspace = ls.client_capabilities.workspace
    except Exception:
        return False
    return bool(workspace and workspace.configuration)


def _workspace_folders(params: types.InitializeParams, root: Path | None) -> list[Path]:
    from pygls.uris import to_fs_path

    folders = []
    for folder in params.workspace_folders or []:
        path = to_fs_path(folder.uri)
        if path:
            folders.append(Path(path))
    if not folders and root is not None:
        folders.append(root)
    return folders


def _workspace_root(params: types.InitializeParams) -> Path | None:
    from pygls.uris import to_fs_path

    uri = None
    if params.workspace_folders:
        uri = params.workspace_folders[0].uri
    elif params.root_uri:
        uri = params.root_uri
    if uri:
        path = to_fs_path(uri)
        return Path(path) if path else None
    if params.root_path:
        return Path(params.root_path)
    return None
