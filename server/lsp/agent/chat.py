"""Agent turns over LSP (docs/protocol.md, "Agent turns").

`agentls/chat` runs one turn of the core's Orchestrator: the prompt (with
`@file:` mentions and the editor selection attached: chat_prompt.py) goes
in, deltas and final messages stream out as notifications, the TurnResult
comes back as the result. `$/cancelRequest` turns into Orchestrator.cancel(), so a cancelled
chat still answers normally, with status "cancelled" and a valid session.
Also `agentls/sessions`, `agentls/session`, `agentls/deleteSession`,
`agentls/uiSchema` and the commands `agentls.chat`, `agentls.cancel`,
`agentls.newSession`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams, JsonRpcInvalidRequest

from agentls.lsp.agent.channels import (
    LspApprovalChannel,
    LspDisplayChannel,
    LspDocumentOpener,
    LspTurnObserver,
    open_document_lookup,
)
from agentls.lsp.agent.documents import LspDocumentLookup, diagnostics_publisher
from agentls.lsp.agent.edits import LspEditApplier, end_session_approvals

# At run time, not under TYPE_CHECKING: pygls reads the command handlers'
# annotations (typing.get_type_hints) to find the server parameter.
from agentls.lsp.server import AgentlsLanguageServer
from agentls.lsp.status import notify_status
from agentls.lsp.wire.convert import params_object, session_id_param

if TYPE_CHECKING:
    from agentls.core.agent.orchestrator import Orchestrator
    from agentls.core.agent.turn import TurnResult
    from agentls.core.sessions.store import SessionStore
    from agentls.core.types.conversation import Message, Session

__all__ = ["ChatService", "register"]

log = logging.getLogger("agentls.lsp.agent.chat")

# ModelError codes the user can fix (provider unreachable, bad key, model
# missing, context too long): shown once with window/showMessage.
ACTIONABLE_CODES = ("connection", "auth", "not_found", "context_length")
SHUTDOWN_WAIT_SECONDS = 8.0


def register(server: AgentlsLanguageServer) -> None:
    service = ChatService(server)
    server.state.host.connect(
        approval=LspApprovalChannel(server),
        display=LspDisplayChannel(server),
        opener=LspDocumentOpener(server),
        documents=open_document_lookup(server),
        editor=LspEditApplier(server),
        snapshots=LspDocumentLookup(server),
        publish_diagnostics=diagnostics_publisher(server),
    )
    server.shutdown_steps.append(service.shutdown)

    @server.feature("agentls/chat")
    async def chat(ls: AgentlsLanguageServer, params: Any = None) -> dict[str, Any]:
        return await service.chat(params_object(params))

    @server.feature("agentls/sessions")
    async def sessions(ls: AgentlsLanguageServer, params: Any = None) -> dict[str, Any]:
        return await service.sessions(params_object(params))

    @server.feature("agentls/session")
    async def session(ls: AgentlsLanguageServer, params: Any = None) -> dict[str, Any]:
        return await service.session(params_object(params))

    @server.feature("agentls/deleteSession")
    async def delete_session(ls: AgentlsLanguageServer, params: Any = None) -> dict[str, Any]:
        return await service.delete_session(params_object(params))

    @server.feature("agentls/uiSchema")
    def ui_schema(ls: AgentlsLanguageServer, params: Any = None) -> list[dict[str, Any]]:
        state = ls.state
        config = state.host.feature_config()
        return state.host.registry.get_ui_schema(
            config, None, plugins=[*state.host.features(), *state.host.tools()]
        )

    @server.command("agentls.chat")
    async def chat_command(ls: AgentlsLanguageServer, *args: Any) -> dict[str, Any]:
        first = args[0] if args else None
        if not isinstance(first, Mapping):
            raise JsonRpcInvalidParams(
                "agentls.chat takes one argument: {prompt, sessionId?, context?}."
            )
        return await service.chat(dict(first))

    @server.command("agentls.cancel")
    async def cancel_command(ls: AgentlsLanguageServer, *args: Any) -> dict[str, Any]:
        if args and not all(isinstance(a, str) for a in args):
            raise JsonRpcInvalidParams(
                "agentls.cancel takes [sessionId], or [] to cancel every running turn."
            )
        return {"cancelled": service.cancel([str(a) for a in args] or None)}

    @server.command("agentls.newSession")
    async def new_session_command(ls: AgentlsLanguageServer, *args: Any) -> dict[str, Any]:
        created = await asyncio.to_thread(service.store().create_session)
        end_session_approvals(ls)  # starting over: "Allow for session" answers end
        return {"sessionId": created.session_id}


class ChatService:
    """Turns in flight (one per session) and the session requests."""

    def __init__(self, ls: AgentlsLanguageServer) -> None:
        self.ls = ls
        self.tasks: dict[str, asyncio.Task[TurnResult]] = {}
        self.reserved: set[str] = set()  # sessions with a chat request in progress
        self.requests: set[asyncio.Task[Any]] = set()  # the chat handlers themselves
        self.closing = False

    # -- helpers -----------------------------------------------------------------
    def store(self) -> SessionStore:
        from agentls.core.sessions.errors import SessionStoreError

        try:
            return self.ls.state.host.stores.store()
        except SessionStoreError as exc:
            self._tell_once(f"store:{exc}", str(exc))
            raise JsonRpcInternalError(str(exc)) from exc

    def _tell_once(self, key: str, message: str) -> None:
        if self.ls.state.first_time(key):
            self.ls.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Error, message=message)
            )

    def _orchestrator(self) -> Orchestrator | None:
        return self.ls.state.host.orchestrator

    # -- agentls/chat ----------------------------------------------------------------
    async def chat(self, params: dict[str, Any]) -> dict[str, Any]:
        # The turn's machinery is imported with the first turn, not at start-up.
        from agentls.core.sessions.errors import SessionStoreError
        from agentls.core.support.size_caps import prompt_too_large
        from agentls.core.types.errors import AgentlsError
        from agentls.lsp.agent.chat_prompt import lsp_range, user_message

        prompt = params.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise JsonRpcInvalidParams("agentls/chat needs a non-empty string `prompt`.")
        session_id = params.get("sessionId")
        if session_id is not None and (not isinstance(session_id, str) or not session_id):
            raise JsonRpcInvalidParams("`sessionId` must be a non-empty string (or omitted).")
        context = params.get("context")
        if context is not None and not isinstance(context, dict):
            raise JsonRpcInvalidParams("`context` must be an object {uri?, range?}.")
        if context and context.get("range") is not None and lsp_range(context["range"]) is None:
            raise JsonRpcInvalidParams(
                "`context.range` must be an LSP Range {start: {line, character}, end: {...}}."
            )
        token = params.get("workDoneToken")
        if token is not None and not isinstance(token, str | int):
            raise JsonRpcInvalidParams("`workDoneToken` must be a string or an integer.")
        if self.closing:
            raise JsonRpcInvalidRequest("The server is shutting down; no new turns start.")
        await self.ls.wait_settings()
        too_large = prompt_too_large(prompt, self.ls.state.host.settings.session.max_prompt_chars)
        if too_large is not None:
            raise JsonRpcInvalidParams(too_large)  # nothing stored, no session created
        store = self.store()
        if session_id is not None:
            self._reserve(session_id)
        reserved = session_id
        handler = asyncio.current_task()
        if handler is not None:
            self.requests.add(handler)
        try:
            try:
                if session_id is None:
                    # The id is chosen here so a cancel that arrives while the
                    # session is being created can still name it.
                    session_id = reserved = uuid.uuid4().hex
                    self.reserved.add(session_id)
                    session = await asyncio.to_thread(store.create_session, session_id)
                else:
                    session = await self._load(store, session_id)
                try:
                    orchestrator = self.ls.state.host.get_orchestrator()
                except AgentlsError as exc:
                    self._tell_once(f"provider:{exc}", f"agentls chat: {exc}")
                    return _failed_wire(session_id, "internal", str(exc))
                state = self.ls.state
                message = await user_message(
                    self.ls, prompt, context or {}, orchestrator.agent.enrichers,
                    state.host.workspace_folders,
                    state.host.channels.documents if state.host.channels else None)
            except SessionStoreError as exc:
                self._tell_once(f"store:{exc}", str(exc))
                raise JsonRpcInternalError(str(exc)) from exc
            except asyncio.CancelledError:
                # $/cancelRequest before the turn began: still a normal answer.
                if handler is None or not handler.cancelling() or session_id is None:
                    raise
                handler.uncancel()
                return _failed_wire(session_id, "cancelled",
                                    "The turn was cancelled before it began.", "cancelled")
            return await self._run(orchestrator, session, message, token)
        finally:
            if reserved is not None:
                self.reserved.discard(reserved)
            if handler is not None:
                self.requests.discard(handler)

    def _reserve(self, session_id: str) -> None:
        orchestrator = self._orchestrator()
        if session_id in self.reserved or (
            orchestrator is not None and orchestrator.is_running(session_id)
        ):
            raise JsonRpcInvalidParams(
                f"Session {session_id} already has a turn running; wait for its result or "
                "cancel it (agentls.cancel) before sending the next prompt."
            )
        self.reserved.add(session_id)

    async def _load(self, store: SessionStore, session_id: str) -> Session:
        from agentls.core.sessions.errors import SessionNotFound, SessionStoreError

        try:
            return await asyncio.to_thread(store.load, session_id)
        except SessionNotFound:
            raise JsonRpcInvalidParams(
                f"Unknown sessionId {session_id!r}: no such session is stored. List them with "
                "agentls/sessions, or omit sessionId to start a new session."
            ) from None
        except SessionStoreError as exc:
            raise JsonRpcInternalError(str(exc)) from exc

    async def _run(
        self,
        orchestrator: Orchestrator,
        session: Session,
        message: Message,
        token: str | int | None,
    ) -> dict[str, Any]:
        from agentls.core.agent.orchestrator import TurnInProgress
        from agentls.core.sessions.errors import SessionStoreError

        sid = session.session_id
        observer = LspTurnObserver(self.ls, token)
        observer.begin()
        inner = asyncio.create_task(orchestrator.run_turn(session, message, observer=observer))
        self.tasks[sid] = inner
        notify_status(self.ls, running=len(self.tasks))
        status = "failed"
        error: str | None = None
        try:
            result = await self._await_turn(sid, inner)
            if result is None:  # cancelled before the turn began
                status = "cancelled"
                return _failed_wire(sid, "cancelled", "The turn was cancelled.", "cancelled")
            status = result.status
            self._report(result)
            if result.status == "failed" and result.error:
                error = f"agentls: {result.error.get('message', 'the turn failed')}"
            return result.to_wire()
        except TurnInProgress as exc:
            raise JsonRpcInvalidParams(str(exc)) from exc
        except SessionStoreError as exc:
            self._tell_once(f"store:{exc}", str(exc))
            return _failed_wire(sid, "internal", str(exc))
        except Exception as exc:
            log.exception("The turn of session %s failed", sid)
            return _failed_wire(sid, "internal", f"{type(exc).__name__}: {exc}")
        finally:
            if self.tasks.get(sid) is inner:
                del self.tasks[sid]
            observer.end(status)
            notify_status(self.ls, running=len(self.tasks), error=error)

    async def _await_turn(
        self, sid: str, inner: asyncio.Task[TurnResult]
    ) -> TurnResult | None:
        """The turn's result; None when it was cancelled before it began.

        When pygls cancels this request ($/cancelRequest), the turn is
        cancelled through the orchestrator instead, and the request still
        answers with the (cancelled) result, as docs/protocol.md requires."""
        current = asyncio.current_task()
        while True:
            try:
                return await asyncio.shield(inner)
            except asyncio.CancelledError:
                outer_cancelled = current is not None and current.cancelling() > 0
                if outer_cancelled and current is not None:
                    current.uncancel()
                if inner.cancelled():
                    return None
                if not outer_cancelled:
                    raise
                self._cancel_one(sid)

    def _report(self, result: TurnResult) -> None:
        """Errors users can act on are shown once; a completed turn re-arms
        them, so a problem that comes back after a fix is shown again."""
        state = self.ls.state
        if result.status == "completed":
            for code in ACTIONABLE_CODES:
                state.forget_notice(f"chat:{code}")
            return
        error = result.error or {}
        code = str(error.get("code", ""))
        if result.status == "failed" and code in ACTIONABLE_CODES:
            self._tell_once(f"chat:{code}", f"agentls chat: {error.get('message', code)}")

    # -- cancellation and shutdown ---------------------------------------------------
    def cancel(self, session_ids: list[str] | None = None) -> list[str]:
        """Cancel the running turns of these sessions (all when None)."""
        targets = list(self.tasks) if session_ids is None else session_ids
        return [sid for sid in targets if self._cancel_one(sid)]

    def _cancel_one(self, sid: str) -> bool:
        orchestrator = self._orchestrator()
        if orchestrator is not None and orchestrator.is_running(sid):
            return orchestrator.cancel(sid) or True
        task = self.tasks.get(sid)
        if task is not None and not task.done():
            return task.cancel()  # not started yet: it never will
        return False

    async def shutdown(self) -> None:
        """Shutdown step: no new turns; running ones are cancelled and
        awaited, so their last messages are written before the store closes."""
        self.closing = True
        self.cancel()
        # The handlers too: their answers go out before the shutdown answer,
        # so the client has every result before it sends `exit`.
        pending = [t for t in [*self.tasks.values(), *self.requests] if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=SHUTDOWN_WAIT_SECONDS)
        orchestrator = self._orchestrator()
        if orchestrator is not None:
            await orchestrator.end_sessions("shutdown")

    # -- other requests ---------------------------------------------------------------
    async def sessions(self, params: dict[str, Any]) -> dict[str, Any]:
        from agentls.core.sessions.errors import SessionStoreError

        limit = params.get("limit")
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise JsonRpcInvalidParams("`limit` must be a non-negative integer.")
        store = self.store()
        try:
            summaries = await asyncio.to_thread(store.list_sessions, limit=limit)
        except SessionStoreError as exc:
            raise JsonRpcInternalError(str(exc)) from exc
        return {"sessions": [s.to_wire() for s in summaries]}

    async def session(self, params: dict[str, Any]) -> dict[str, Any]:
        sid = session_id_param(params, "agentls/session")
        return (await self._load(self.store(), sid)).to_dict()

    async def delete_session(self, params: dict[str, Any]) -> dict[str, Any]:
        from agentls.core.sessions.errors import SessionStoreError

        sid = session_id_param(params, "agentls/deleteSession")
        task = self.tasks.get(sid)
        if task is not None and self._cancel_one(sid):
            await asyncio.wait([task], timeout=SHUTDOWN_WAIT_SECONDS)
        store = self.store()
        try:
            deleted = await asyncio.to_thread(store.delete, sid)
        except SessionStoreError as exc:
            raise JsonRpcInternalError(str(exc)) from exc
        end_session_approvals(self.ls, sid)
        orchestrator = self._orchestrator()
        if orchestrator is not None:
            await orchestrator.end_sessions("deleted", [sid])
        if not deleted:
            raise JsonRpcInvalidParams(f"Unknown sessionId {sid!r}: no such session is stored.")
        return {"sessionId": sid, "deleted": True}


def _failed_wire(
    session_id: str, code: str, message: str, status: str = "failed"
) -> dict[str, Any]:
    """A chat result for a turn that never reached the orchestrator."""
    return {
        "sessionId": session_id,
        "status": status,
        "messages": [],
        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
        "error": {"code": code, "message": message},
    }
