"""`agentls/compact { sessionId }`: compact a session on request.

The core does the work (Orchestrator.compact -> core/context/fitting.py); this
module checks the params, loads the stored session and announces the
summary message with agentls/message, as a turn announces its messages.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams

from agentls.lsp.agent.channels import LspTurnObserver
from agentls.lsp.server import AgentlsLanguageServer
from agentls.lsp.wire.convert import session_id_param, to_plain

__all__ = ["register"]


def register(server: AgentlsLanguageServer) -> None:
    @server.feature("agentls/compact")
    async def compact(ls: AgentlsLanguageServer, params: Any = None) -> dict[str, Any]:
        return await compact_session(ls, to_plain(params))


async def compact_session(ls: AgentlsLanguageServer, params: Any) -> dict[str, Any]:
    from agentls.core.agent.orchestrator import TurnInProgress
    from agentls.core.sessions.errors import SessionNotFound, SessionStoreError
    from agentls.core.types.errors import AgentlsError, ModelError

    sid = session_id_param(params, "agentls/compact")
    await ls.wait_settings()
    state = ls.state
    try:
        store = state.host.stores.store()
        session = await asyncio.to_thread(store.load, sid)
    except SessionNotFound:
        raise JsonRpcInvalidParams(
            f"Unknown sessionId {sid!r}: no such session is stored (agentls/sessions lists them)."
        ) from None
    except SessionStoreError as exc:
        raise JsonRpcInternalError(str(exc)) from exc
    try:
        orchestrator = state.host.get_orchestrator()
    except AgentlsError as exc:
        return _answer(sid, error={"code": "internal", "message": str(exc)})
    try:
        message = await orchestrator.compact(session, observer=LspTurnObserver(ls))
    except TurnInProgress as exc:
        raise JsonRpcInvalidParams(str(exc)) from exc
    except ModelError as exc:  # the model failed or a hook vetoed: nothing was stored
        return _answer(sid, error={"code": exc.code or "model_error", "message": str(exc)})
    if message is None:
        return _answer(sid, reason="Nothing to compact: no messages since the last summary.")
    return {
        "sessionId": sid,
        "compacted": True,
        "message": message.to_dict(),
        "compactedThrough": (message.metadata or {}).get("compacted_through"),
    }


def _answer(sid: str, *, reason: str | None = None,
            error: dict[str, str] | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {"sessionId": sid, "compacted": False}
    if reason is not None:
        answer["reason"] = reason
    if error is not None:
        answer["error"] = error
    return answer
