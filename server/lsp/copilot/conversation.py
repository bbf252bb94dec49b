"""The Copilot language server's chat (`conversation/*`) as agentls's agent
(docs/copilot-plugins.md, "Chat (conversation/*)").

- `conversation/create`: a new agentls session (its id is the
  conversationId); the `turns` before the last are stored as the session's
  history, the last one's `request` starts the first turn.
- `conversation/turn`: the next turn of that session.
- Both answer `{conversationId, turnId}` as soon as the turn started (a
  plugin gives up on a request after a few seconds); the reply streams as
  `$/progress` on the request's `workDoneToken`: `begin`, `report`s with
  `reply` text, `end` with `result` (`error` when the turn failed).
- `$/cancelRequest` of the create / turn request (copilot-chat-stop), after
  its answer: cancels the turn it started (wire/protocol.py).
- `conversation/destroy`: cancels a running turn, forgets the session's
  "Allow for session" answers and ends it (session:end).
- `conversation/compress`: agentls's compaction of the session (agentls/compact).
- `conversation/registerTools`: the client's tools, offered to the model
  behind the approval gate (conversation_tools.py).
- `conversation/templates`, `conversation/modes`: agentls's `/` templates
  and its one mode (Agent: every turn may use tools, each asked as agentls
  asks); `conversation/preconditions` (met) and `conversation/agents`
  (none), which LSP-copilot asks first.

The turn is the one agentls/chat runs (Orchestrator.run_turn: the same
provider, tools, hooks, gate and session store); the questions of a
conversation's turn that agentls lets the user answer for the session go
as the client's tool confirmation (conversation_tools.py).
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from typing import TYPE_CHECKING, Any

from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams, JsonRpcInvalidRequest

from agentls.core.agent.observer import TurnObserver
from agentls.lsp.agent.edits import end_session_approvals
from agentls.lsp.copilot import dialect
from agentls.lsp.copilot.conversation_tools import (
    CLIENT_TOOLS,
    ClientTools,
    Conversation,
    ConversationApproval,
    LiveConversations,
    parse_tools,
)

# At run time: pygls reads the handlers' annotations for the server parameter.
from agentls.lsp.server import AgentlsLanguageServer
from agentls.lsp.status import notify_status
from agentls.lsp.wire.convert import params_object
from agentls.lsp.wire.protocol import REQUEST_ID, AgentlsProtocol

if TYPE_CHECKING:
    from agentls.core.agent.orchestrator import Orchestrator
    from agentls.core.tools.contract import ToolNeed
    from agentls.core.types.conversation import Message, Session

__all__ = ["ConversationService", "register"]

log = logging.getLogger("agentls.lsp.copilot.conversation")

SHUTDOWN_WAIT_SECONDS = 8.0
TITLE_CHARS = 80
_SLASH = re.compile(r"^\s*/(?P<name>[\w.-]+)(?:\s+(?P<rest>.*))?\Z", re.DOTALL)
MODES = [{"id": "agent", "name": "Agent", "kind": "Agent", "isBuiltIn": True,
          "description": "agentls's agent: tools and file changes, each asked as agentls asks"}]
TEMPLATE_SCOPES = ["chat-panel", "agent-panel", "editor", "inline"]


def register(server: AgentlsLanguageServer) -> None:
    """After lsp/agent/chat.py's register: the gate's channel it connected
    becomes the conversations' one, which falls back to it."""
    service = ConversationService(server)
    host = server.state.host
    host.registry.register("tool", CLIENT_TOOLS, service.tools)
    channels = host.channels
    if channels is not None:
        host.connect(
            approval=ConversationApproval(server, channels.approval, service.live),
            display=channels.display, opener=channels.opener, documents=channels.documents,
            editor=channels.editor, snapshots=channels.snapshots,
            publish_diagnostics=channels.publish_diagnostics,
        )
    # Before chat's step, which ends every session this process ran.
    server.shutdown_steps.insert(0, service.shutdown)

    @server.feature("conversation/create")
    async def create(ls: AgentlsLanguageServer, params: Any = None) -> dict[str, Any]:
        dialect.require(ls, "conversation/create")
        return await service.create(params_object(params))

    @server.feature("conversation/turn")
    async def turn(ls: AgentlsLanguageServer, params: Any = None) -> dict[str, Any]:
        dialect.require(ls, "conversation/turn")
        return await service.turn(params_object(params))

    @server.feature("conversation/destroy")
    async def destroy(ls: AgentlsLanguageServer, params: Any = None) -> str:
        dialect.require(ls, "conversation/destroy")
        return await service.destroy(params_object(params))

    @server.feature("conversation/compress")
    async def compress(ls: AgentlsLanguageServer, params: Any = None) -> dict[str, Any]:
        dialect.require(ls, "conversation/compress")
        return await service.compress(params_object(params))

    @server.feature("conversation/registerTools")
    def register_tools(ls: AgentlsLanguageServer, params: Any = None) -> None:
        dialect.require(ls, "conversation/registerTools")
        try:
            service.tools.register(parse_tools(params_object(params)))
        except ValueError as exc:
            raise JsonRpcInvalidParams(str(exc)) from None

    @server.feature("conversation/templates")
    def templates(ls: AgentlsLanguageServer, params: Any = None) -> list[dict[str, Any]]:
        dialect.require(ls, "conversation/templates")
        params_object(params)
        return service.templates()

    @server.feature("conversation/modes")
    def modes(ls: AgentlsLanguageServer, params: Any = None) -> list[dict[str, Any]]:
        dialect.require(ls, "conversation/modes")
        params_object(params)
        return [dict(mode) for mode in MODES]

    # LSP-copilot asks both before its first conversation/create.
    @server.feature("conversation/preconditions")
    def preconditions(ls: AgentlsLanguageServer, params: Any = None) -> dict[str, Any]:
        dialect.require(ls, "conversation/preconditions")
        params_object(params)
        return {"status": "ok", "results": []}

    @server.feature("conversation/agents")
    def agents(ls: AgentlsLanguageServer, params: Any = None) -> list[dict[str, Any]]:
        dialect.require(ls, "conversation/agents")
        params_object(params)
        return []  # no `@agent`s: agentls's one agent answers every message


class ConversationService:
    """The conversations of this process and their running turns."""

    def __init__(self, ls: AgentlsLanguageServer) -> None:
        self.ls = ls
        self.live = LiveConversations()
        self.tools = ClientTools(ls, self.live)
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.closing = False

    # -- requests ------------------------------------------------------------------------
    async def create(self, params: dict[str, Any]) -> dict[str, Any]:
        from agentls.core.sessions.errors import SessionStoreError
        from agentls.core.types.conversation import Message

        turns = params.get("turns")
        if not isinstance(turns, list) or not turns:
            raise JsonRpcInvalidParams("conversation/create needs `turns`, a non-empty array "
                                       "of {request, response?}; the last one is answered.")
        history: list[Message] = []
        for index, entry in enumerate(turns):
            request = entry.get("request") if isinstance(entry, dict) else None
            response = entry.get("response", "") if isinstance(entry, dict) else None
            if not isinstance(request, str) or not isinstance(response, str | None):
                raise JsonRpcInvalidParams(f"turns[{index}] must be an object with a string "
                                           "`request` (and a string `response`, if any).")
            if index < len(turns) - 1:
                history.append(Message(role="user", content=request))
                if response:
                    history.append(Message(role="assistant", content=response))
        prompt = turns[-1]["request"]
        token = self._checked(params, prompt)
        await self.ls.wait_settings()
        orchestrator = self._orchestrator()
        self._fits(prompt)
        store = self._store()
        sid = uuid.uuid4().hex
        title = prompt.strip().splitlines()[0][:TITLE_CHARS] if prompt.strip() else ""
        try:
            await asyncio.to_thread(store.create_session, sid, title=title)
            if history:
                await asyncio.to_thread(store.append_messages, sid, history)
            session = await asyncio.to_thread(store.load, sid)
        except SessionStoreError as exc:
            raise JsonRpcInternalError(str(exc)) from exc
        conversation = self.live.by_id[sid] = Conversation(sid, turn_id=uuid.uuid4().hex)
        return await self._started(conversation, orchestrator, session, prompt, params, token)

    async def turn(self, params: dict[str, Any]) -> dict[str, Any]:
        from agentls.core.sessions.errors import SessionNotFound, SessionStoreError

        conversation = self._known(params, "conversation/turn")
        prompt = params.get("message")
        token = self._checked(params, prompt)
        sid = conversation.conversation_id
        if conversation.turn_id:
            raise JsonRpcInvalidParams(
                f"Conversation {sid} already has a turn running; wait for its progress `end` "
                "(or destroy the conversation) before the next message.")
        conversation.turn_id = uuid.uuid4().hex  # reserved: a second turn now is refused
        try:
            await self.ls.wait_settings()
            orchestrator = self._orchestrator()
            self._fits(str(prompt))
            store = self._store()
            try:
                session = await asyncio.to_thread(store.load, sid)
            except SessionNotFound:
                self.live.by_id.pop(sid, None)
                raise JsonRpcInvalidParams(f"Conversation {sid}'s session is no longer stored; "
                                           "create a new conversation.") from None
            except SessionStoreError as exc:
                raise JsonRpcInternalError(str(exc)) from exc
        except BaseException:
            conversation.turn_id = ""
            raise
        return await self._started(conversation, orchestrator, session, str(prompt), params,
                                   token)

    async def destroy(self, params: dict[str, Any]) -> str:
        conversation = self._known(params, "conversation/destroy")
        sid = conversation.conversation_id
        task = self.tasks.get(sid)
        if task is not None:
            self._cancel(sid)
            await asyncio.wait([task], timeout=SHUTDOWN_WAIT_SECONDS)
        self.live.by_id.pop(sid, None)
        end_session_approvals(self.ls, sid)
        orchestrator = self.ls.state.host.orchestrator
        if orchestrator is not None:
            await orchestrator.end_sessions("deleted", [sid])
        return "OK"

    async def compress(self, params: dict[str, Any]) -> dict[str, Any]:
        """copilot-chat-compact: agentls's compaction (agentls/compact) of the
        conversation's session, answered as `{success, turnCount}` or
        `{success: false, error: {message}}`."""
        from agentls.lsp.agent.compact import compact_session

        conversation = self._known(params, "conversation/compress")
        if conversation.turn_id:
            raise JsonRpcInvalidParams(f"Conversation {conversation.conversation_id} has a "
                                       "turn running; compact it after the turn's end.")
        answer = await compact_session(self.ls, {"sessionId": conversation.conversation_id})
        if not answer.get("compacted"):
            why = answer.get("reason") or (answer.get("error") or {}).get("message")
            return {"success": False, "error": {"message": str(why or "not compacted")}}
        through = answer.get("compactedThrough")
        session = await asyncio.to_thread(self._store().load, conversation.conversation_id)
        replaced = session.messages[:through] if isinstance(through, int) else []
        return {"success": True, "turnCount": sum(m.role == "user" for m in replaced)}

    def templates(self) -> list[dict[str, Any]]:
        from agentls.lsp.suggestions.completion import list_templates

        found = []
        for template in list_templates(self.ls):
            description = str(template.get("description") or "")
            found.append({"id": template["name"], "description": description,
                          "shortDescription": description, "scopes": list(TEMPLATE_SCOPES)})
        return found

    # -- checks ------------------------------------------------------------------------
    def _checked(self, params: dict[str, Any], prompt: Any) -> str | int | None:
        """The work-done token, after the checks both requests share."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise JsonRpcInvalidParams("The message to answer must be a non-empty string "
                                       "(conversation/create: the last turn's `request`; "
                                       "conversation/turn: `message`).")
        token = params.get("workDoneToken")
        if token is not None and (not isinstance(token, str | int) or isinstance(token, bool)):
            raise JsonRpcInvalidParams("`workDoneToken` must be a string or an integer; the "
                                       "reply streams as $/progress on it.")
        doc = params.get("doc")
        if doc is not None and not isinstance(doc, dict):
            raise JsonRpcInvalidParams("`doc` must be an object {uri, ...}.")
        references = params.get("references")
        if references is not None and (not isinstance(references, list) or not all(
                isinstance(r, dict) and isinstance(r.get("uri", ""), str) for r in references)):
            raise JsonRpcInvalidParams("`references` must be an array of {type, uri}.")
        if self.closing:
            raise JsonRpcInvalidRequest("The server is shutting down; no new turns start.")
        return token

    def _known(self, params: dict[str, Any], method: str) -> Conversation:
        cid = params.get("conversationId")
        if not isinstance(cid, str) or not cid:
            raise JsonRpcInvalidParams(f"{method} needs `conversationId`, a non-empty string "
                                       "(from the conversation/create result).")
        conversation = self.live.by_id.get(cid)
        if conversation is None:
            raise JsonRpcInvalidParams(f"Unknown conversationId {cid!r}: no such conversation "
                                       "in this server (destroyed, or from an earlier run); "
                                       "start one with conversation/create.")
        return conversation

    def _fits(self, prompt: str) -> None:
        from agentls.core.support.size_caps import prompt_too_large

        too_large = prompt_too_large(prompt, self.ls.state.host.settings.session.max_prompt_chars)
        if too_large is not None:
            raise JsonRpcInvalidParams(too_large)

    def _orchestrator(self) -> Orchestrator:
        from agentls.core.types.errors import AgentlsError

        try:
            return self.ls.state.host.get_orchestrator()
        except AgentlsError as exc:
            raise JsonRpcInternalError(f"agentls chat: {exc}") from exc

    def _store(self) -> Any:
        from agentls.core.sessions.errors import SessionStoreError

        try:
            return self.ls.state.host.stores.store()
        except SessionStoreError as exc:
            raise JsonRpcInternalError(str(exc)) from exc

    # -- the turn ------------------------------------------------------------------------
    async def _started(self, conversation: Conversation, orchestrator: Orchestrator,
                       session: Session, prompt: str, params: dict[str, Any],
                       token: str | int | None) -> dict[str, Any]:
        """The reserved turn (conversation.turn_id) started; the reservation
        is dropped when it cannot start."""
        try:
            return await self._start(conversation, orchestrator, session, prompt, params, token)
        finally:
            if conversation.conversation_id not in self.tasks:
                conversation.turn_id = ""

    async def _start(self, conversation: Conversation, orchestrator: Orchestrator,
                     session: Session, prompt: str, params: dict[str, Any],
                     token: str | int | None) -> dict[str, Any]:
        from agentls.lsp.agent.chat_prompt import user_message

        host = self.ls.state.host
        doc = params.get("doc") or {}
        context = {"uri": doc["uri"]} if isinstance(doc.get("uri"), str) else {}
        prompt = with_references(expanded(self.ls, prompt), params.get("references") or [])
        message = await user_message(self.ls, prompt, context,
                                     orchestrator.agent.enrichers, host.workspace_folders,
                                     host.channels.documents if host.channels else None)
        sid = conversation.conversation_id
        if self.live.by_id.get(sid) is not conversation:
            raise JsonRpcInvalidParams(f"Conversation {sid} was destroyed while its turn was "
                                       "starting; create a new conversation.")
        conversation.call_id = ""
        progress = ReplyProgress(self.ls, token, conversation)
        progress.begin()
        # copilot-chat-stop cancels the request this answers right away.
        request_id = REQUEST_ID.get()
        protocol = self.ls.protocol
        if request_id is not None and isinstance(protocol, AgentlsProtocol):
            protocol.cancel_after_answer(request_id, lambda: self._cancel(sid))
        self.tasks[sid] = asyncio.create_task(
            self._run(conversation, orchestrator, session, message, progress, request_id))
        notify_status(self.ls, running=len(self.tasks))
        return {"conversationId": sid, "turnId": conversation.turn_id}

    async def _run(self, conversation: Conversation, orchestrator: Orchestrator,
                   session: Session, message: Message, progress: ReplyProgress,
                   request_id: Any) -> None:
        sid = conversation.conversation_id
        error: str | None = None
        try:
            result = await orchestrator.run_turn(session, message, observer=progress)
            if result.status == "cancelled":
                error = "Cancelled"
            elif result.status == "failed":
                error = f"agentls: {(result.error or {}).get('message', 'the turn failed')}"
        except asyncio.CancelledError:
            error = "Cancelled"
        except Exception as exc:
            log.exception("The turn of conversation %s failed", sid)
            error = f"agentls: {type(exc).__name__}: {exc}"
        finally:
            protocol = self.ls.protocol
            if request_id is not None and isinstance(protocol, AgentlsProtocol):
                protocol.cancel_after_answer(request_id, None)
            conversation.turn_id = ""
            self.tasks.pop(sid, None)
            progress.end(error)
            notify_status(self.ls, running=len(self.tasks))

    def _cancel(self, sid: str) -> None:
        orchestrator = self.ls.state.host.orchestrator
        if orchestrator is not None and orchestrator.is_running(sid):
            orchestrator.cancel(sid)
        else:
            task = self.tasks.get(sid)
            if task is not None:
                task.cancel()  # not in the orchestrator yet: it never will be

    async def shutdown(self) -> None:
        """No new turns; running ones are cancelled and awaited (their last
        messages written, their `end` sent) before the store closes."""
        self.closing = True
        pending = list(self.tasks.values())
        for sid in list(self.tasks):
            self._cancel(sid)
        if pending:
            await asyncio.wait(pending, timeout=SHUTDOWN_WAIT_SECONDS)


def expanded(ls: Any, prompt: str) -> str:
    """`/name rest` (a Copilot plugin's slash command) -> the template's text
    and then `rest`; any other prompt as it is. The placeholders are filled
    from the editor context like agentls/chat's (chat_prompt.py)."""
    from agentls.lsp.agent.code_actions import template_prompt

    found = _SLASH.match(prompt)
    if found is None:
        return prompt
    text = template_prompt(ls, found["name"])
    if not text:
        return prompt
    rest = (found["rest"] or "").strip()
    return f"{text}\n\n{rest}" if rest else text


def with_references(prompt: str, references: list[dict[str, Any]]) -> str:
    """The file references a plugin attaches (copilot-chat-add-file-reference:
    `{type: "file", uri}`) as `@file:` mentions, which the prompt enrichers
    read as for agentls/chat (the secret-file rule, the size caps)."""
    from pygls.uris import to_fs_path

    mentions = []
    for reference in references:
        uri = reference.get("uri")
        if reference.get("type") != "file" or not isinstance(uri, str):
            continue
        path = to_fs_path(uri) if uri.startswith("file:") else None  # not `buffer:12`
        if path and '"' not in path and "\n" not in path:
            mentions.append(f'@file:"{path}"')
    return f"{prompt}\n\n{' '.join(mentions)}" if mentions else prompt


class ReplyProgress(TurnObserver):
    """A turn's reply as the `$/progress` reports Copilot plugins read
    (module docstring); nothing without a work-done token."""

    def __init__(self, ls: Any, token: str | int | None, conversation: Conversation) -> None:
        self.ls = ls
        self.token = token
        self.conversation = conversation
        self.ids = {"conversationId": conversation.conversation_id,
                    "turnId": conversation.turn_id}
        self.streamed: set[int] = set()  # messages whose text came as deltas
        self.sent_text = False

    def _send(self, value: dict[str, Any]) -> None:
        if self.token is not None:
            from lsprotocol import types

            self.ls.protocol.notify(types.PROGRESS, types.ProgressParams(
                token=self.token, value={**value, **self.ids}))

    def _reply(self, index: int, text: str) -> None:
        if not text:
            return
        if index not in self.streamed and self.sent_text:
            text = "\n\n" + text  # the next round's text starts a new paragraph
        self.streamed.add(index)
        self.sent_text = True
        self._send({"kind": "report", "reply": text})

    def begin(self) -> None:
        self._send({"kind": "begin", "title": "agentls"})

    def end(self, error: str | None) -> None:
        self._send({"kind": "end", "result": {"error": {"message": error}} if error else {}})

    async def on_tool_need(self, session_id: str, call_id: str, tool_name: str,
                           need: ToolNeed) -> None:
        self.conversation.call_id = call_id  # before the gate asks, and runs it

    async def on_delta(self, session_id: str, index: int, delta: str, kind: str) -> None:
        if kind == "text":
            self._reply(index, delta)

    async def on_message(self, session_id: str, index: int, message: Message) -> None:
        if (message.metadata or {}).get("suppress_output"):
            return
        if (message.role == "assistant" and index not in self.streamed
                and isinstance(message.content, str)):
            self._reply(index, message.content)  # a reply that did not stream
