"""agentls/status and agentls/models (docs/protocol.md)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentls.lsp.server import AgentlsLanguageServer

log = logging.getLogger("agentls.lsp.status")


def register(server: AgentlsLanguageServer) -> None:
    @server.feature("agentls/status")
    async def status(ls: AgentlsLanguageServer, params: Any = None) -> dict[str, Any]:
        from agentls.core.editor.reply_edits import resolved_edit_format
        from agentls.core.plugins.capabilities import StatusReporter, StatusSource
        from agentls.core.plugins.protocols import plugin_name
        from agentls.core.plugins.registry import offering, offers
        from agentls.core.types.errors import AgentlsError

        # Asked right after initialize: answer once the client's settings
        # are read (bounded), so `mcp` lists the servers the user configured.
        await ls.wait_settings()

        state = ls.state
        settings = state.host.settings
        extra: dict[str, Any] = {}
        try:
            provider = state.host.provider()
            info: dict[str, Any] = provider.get_info().model_dump(mode="json")
            # Providers that run models here (local) add their processes and downloads.
            if offers(provider, StatusReporter):
                extra = dict(provider.status_report())
        except AgentlsError as exc:
            info = {"id": settings.provider, "display_name": settings.provider,
                    "error": str(exc)}
        for feature in offering(ls.state.host.started_features.values(), StatusSource):
            try:
                extra.update(feature.status() or {})
            except Exception:
                log.exception("status of feature %s failed", plugin_name(feature))
        if not ls.features_started.is_set():
            # Features start after the first inline completion (lifecycle):
            # until then the configured MCP servers are about to start.
            extra["mcp"] = [{"name": name, "state": "starting", "tools": [],
                             "origin": "settings"} for name in settings.mcp_servers]
        extra.setdefault("mcp", [])
        return {
            **extra,
            "provider": info,
            "model": settings.model or info.get("defaults", {}).get("model"),
            # How the agent writes file changes (session.editFormat, resolved).
            "editFormat": resolved_edit_format(settings.session.edit_format, settings.provider),
            "sessions": [s.to_dict() for s in state.host.session_statuses()],
            "completions": state.counters.to_wire(),
            "nextEdits": state.next_edit_counters.to_wire(),
            "inlinePrompts": state.prompt_counters.to_wire(),
            # The workspace file's trust state and the keys it waits on.
            "workspaceTrust": (state.host.loaded.workspace_trust.to_wire()
                               if state.host.loaded.workspace_trust else None),
            # Workspace folders that are a home, root or system folder.
            "restrictedMode": [f.to_wire() for f in state.host.restricted_folders()],
        }

    @server.feature("agentls/models")
    async def models(ls: AgentlsLanguageServer, params: Any = None) -> dict[str, Any]:
        from agentls.core.types.errors import AgentlsError, ModelError

        try:
            provider = ls.state.host.provider()
            listed = await provider.list_models()
        except (AgentlsError, ModelError) as exc:
            from pygls.exceptions import JsonRpcInternalError

            raise JsonRpcInternalError(f"Cannot list models: {exc}") from exc
        return {
            "provider": provider.get_info().model_dump(mode="json"),
            "models": [m.model_dump(mode="json") for m in listed],
        }


def notify_status(ls: AgentlsLanguageServer, *, running: int, error: str | None = None) -> None:
    """Send `didChangeStatus` (named as GitHub's Copilot language server does,
    so existing Copilot editor plugins show it): busy while any agent turn
    runs, kind Error with the message after a failure, Normal otherwise.
    Only changes are sent."""
    busy = running > 0
    if error:
        kind, message = "Error", error
    else:
        kind = "Normal"
        message = f"agentls: {running} turn(s) running" if busy else "agentls: ready"
    params = {"kind": kind, "message": message, "busy": busy}
    if ls.last_status == params:
        return
    ls.last_status = params
    ls.protocol.notify("didChangeStatus", params)
