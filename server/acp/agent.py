"""The ACP Agent: one method per ACP request, translating to the core.

`initialize` (protocol version 1; loadSession, embedded context, MCP over
stdio and HTTP, session/list), `authenticate` (no methods: agentls's
providers read their keys from the user's settings), `session/new`,
`session/load` (replays the stored conversation), `session/list`,
`session/prompt` (one Orchestrator turn; updates through
channels.AcpTurnObserver), `session/cancel`, `session/set_config_option`
(the model), and the protocol's unstable `session/resume` (load without
the replay) and `session/close`. Sessions live in the language server's SQLite store, with
`cwd` in their metadata. Errors are JSON-RPC errors that say what to change.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import PROTOCOL_VERSION, RequestError
from acp.helpers import update_agent_message_text, update_available_commands
from acp.schema import (
    AgentCapabilities,
    AuthenticateResponse,
    CloseSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    Usage,
)

from agentls import __version__
from agentls.acp import commands, updates
from agentls.acp.channels import AcpTurnObserver, ClientLink
from agentls.acp.prompt import client_servers, prompt_text, user_message
from agentls.acp.workspace import AcpWorkspace
from agentls.core.agent.endings import ended_with_explanation
from agentls.core.editor.prompt_enrichment import not_attached_text
from agentls.host import HostStores

if TYPE_CHECKING:
    from agentls.acp.stdio import GuardedTransport
    from agentls.core.types.conversation import Session

__all__ = ["AgentlsAcpAgent"]

log = logging.getLogger("agentls.acp.agent")

LIST_PAGE = 100
SHUTDOWN_WAIT_SECONDS = 8.0
MODELS_IN_ANSWER_SECONDS = 2.0  # how long session/new waits for the provider's model list


def _invalid(message: str) -> RequestError:
    return RequestError(-32602, message)


class AgentlsAcpAgent:
    def __init__(self, transport: GuardedTransport | None = None,
                 environ: Any = None) -> None:
        self.link = ClientLink()
        self.stores = HostStores(environ)  # every workspace shares the session database
        self.transport = transport
        self.workspaces: dict[str, AcpWorkspace] = {}
        self.sessions: dict[str, AcpWorkspace] = {}
        self.turns: dict[str, asyncio.Task[Any]] = {}
        self.cancel_early: set[str] = set()
        self.commands_sent: dict[str, list[str]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def on_connect(self, conn: Any) -> None:
        self.link.conn = conn

    # -- initialize / authenticate ---------------------------------------------------
    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **kwargs: Any) -> InitializeResponse:
        caps = client_capabilities
        fs = getattr(caps, "fs", None)
        self.link.fs_read = bool(getattr(fs, "read_text_file", False))
        self.link.fs_write = bool(getattr(fs, "write_text_file", False))
        self.link.terminal = bool(getattr(caps, "terminal", False))
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(image=False, audio=False,
                                                       embedded_context=True),
                mcp_capabilities=McpCapabilities(http=True, sse=False),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(), resume=SessionResumeCapabilities(),
                    close=SessionCloseCapabilities()),
            ),
            auth_methods=[],
            agent_info=Implementation(name="agentls", title="agentls", version=__version__),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> AuthenticateResponse:
        raise _invalid(f"agentls offers no authentication method ({method_id!r} is unknown): "
                       "the provider's key is read from the environment variable your "
                       "settings name (apiKeyEnv), never sent over ACP.")

    # -- sessions ---------------------------------------------------------------------
    def workspace(self, cwd: str) -> AcpWorkspace:
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise _invalid(f"`cwd` must be an absolute path (got {cwd!r}).")
        root = Path(cwd)
        if not root.is_dir():
            raise _invalid(f"`cwd` {cwd} is not a folder.")
        key = os.path.realpath(root)
        if key not in self.workspaces:
            self.workspaces[key] = AcpWorkspace(root, self.link, self.stores)
        return self.workspaces[key]

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None,
                          **kwargs: Any) -> NewSessionResponse:
        workspace = self.workspace(cwd)
        workspace.set_client_servers(client_servers(mcp_servers))
        sid = uuid.uuid4().hex
        await self._store(self.stores.store().create_session, sid, metadata={"cwd": cwd})
        self._attach(sid, workspace)
        await self._models_briefly(workspace)
        self._after_answer(sid, workspace)
        return NewSessionResponse(session_id=sid, config_options=self._config(workspace))

    async def load_session(self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None,
                           **kwargs: Any) -> LoadSessionResponse:
        workspace = self.workspace(cwd)
        workspace.set_client_servers(client_servers(mcp_servers))
        session = await self._load(session_id)
        self._attach(session_id, workspace)
        for update in updates.replay(session.messages, str(workspace.root)):
            await self.link.update(session_id, update)
        self._after_answer(session_id, workspace)
        return LoadSessionResponse(config_options=self._config(workspace))

    async def resume_session(self, session_id: str, cwd: str,
                             mcp_servers: list[Any] | None = None,
                             **kwargs: Any) -> ResumeSessionResponse:
        """Like session/load, without replaying the conversation."""
        workspace = self.workspace(cwd)
        workspace.set_client_servers(client_servers(mcp_servers))
        await self._load(session_id)
        self._attach(session_id, workspace)
        self._after_answer(session_id, workspace)
        return ResumeSessionResponse(config_options=self._config(workspace))

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        """The client is done with the session: its turn is cancelled and
        its "Allow for session" answers end. The stored session stays."""
        workspace = self._session(session_id)
        await self.cancel(session_id)
        task = self.turns.get(session_id)
        if task is not None:
            await asyncio.wait([task], timeout=SHUTDOWN_WAIT_SECONDS)
        workspace.channels.gate.forget(session_id)
        if workspace.host.orchestrator is not None:
            await workspace.host.orchestrator.end_sessions("closed", [session_id])
        self.sessions.pop(session_id, None)
        self.commands_sent.pop(session_id, None)
        return CloseSessionResponse()

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None,
                            **kwargs: Any) -> ListSessionsResponse:
        start = int(cursor) if cursor and cursor.isdigit() else 0
        summaries = await self._store(self.stores.store().list_sessions)
        found = await asyncio.to_thread(_session_infos, summaries, cwd)
        page = found[start:start + LIST_PAGE]
        more = start + LIST_PAGE < len(found)
        return ListSessionsResponse(sessions=page,
                                    next_cursor=str(start + LIST_PAGE) if more else None)

    async def set_config_option(self, config_id: str, session_id: str, value: str | bool,
                                **kwargs: Any) -> SetSessionConfigOptionResponse:
        workspace = self._session(session_id)
        if config_id != "model" or not isinstance(value, str) or not value.strip():
            raise _invalid("The one setting agentls offers here is `model` (a model name).")
        workspace.set_model(value.strip())
        return SetSessionConfigOptionResponse(config_options=self._config(workspace))

    def _config(self, workspace: AcpWorkspace) -> list[Any]:
        """The session's settings the client may change: the model (the
        current one, and those the provider listed once asked)."""
        model = workspace.host.settings.model or ""
        listed = dict(workspace.models or [])
        choices = [(model, listed.get(model) or model or "(the provider's default)")]
        choices += [(i, n) for i, n in listed.items() if i != model]
        return [SessionConfigOptionSelect(
            id="model", name="Model", category="model", type="select", current_value=model,
            description=f"The model of provider {workspace.host.settings.provider}",
            options=[SessionConfigSelectOption(value=i, name=n) for i, n in choices])]

    async def _models_briefly(self, workspace: AcpWorkspace) -> None:
        """The provider's models in the session/new answer when they come
        quickly (the embedded catalog, a local server): clients such as
        acpx check `--model X` against that answer's options. A slow or
        failing provider is not waited for; its list follows as a
        config_option_update."""
        if workspace.models is not None:
            return
        try:
            await workspace.list_models(within=MODELS_IN_ANSWER_SECONDS)
        except Exception as exc:  # the update after the answer tries again
            log.info("The provider's models are not in the session/new answer: %s", exc)

    async def _send_models(self, sid: str, workspace: AcpWorkspace) -> None:
        """The provider's models as a config_option_update, once known."""
        from acp.schema import ConfigOptionUpdate

        if workspace.models is None:
            try:
                await workspace.list_models()
            except Exception as exc:  # no list: the current model stays the one choice
                log.info("The provider did not list its models: %s", exc)
                return
        await self.link.update(sid, ConfigOptionUpdate(session_update="config_option_update",
                                                       config_options=self._config(workspace)))

    def _attach(self, sid: str, workspace: AcpWorkspace) -> None:
        self.sessions[sid] = workspace
        self.link.last_session = sid
        workspace.active_session = sid

    def _after_answer(self, sid: str, workspace: AcpWorkspace) -> None:
        """After the session/new (load) answer is out: the commands, then
        the workspace's trust questions and features."""

        answered = (self.transport.expect(lambda m: _answers_session(m, sid))
                    if self.transport is not None else None)

        async def later() -> None:
            if answered is not None:
                await answered
            restricted = workspace.host.restricted_notice()
            if restricted is not None:
                await self.link.update(sid, updates.notice(restricted, "warning"))
            await self._send_commands(sid, workspace)
            workspace.start()
            await self._send_models(sid, workspace)

        task = asyncio.ensure_future(later())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_commands(self, sid: str, workspace: AcpWorkspace) -> None:
        found = await asyncio.to_thread(commands.available_commands, workspace)
        names = [c.name for c in found]
        if self.commands_sent.get(sid) == names:
            return
        self.commands_sent[sid] = names
        await self.link.update(sid, update_available_commands(found))

    def _session(self, sid: str) -> AcpWorkspace:
        workspace = self.sessions.get(sid)
        if workspace is None:
            raise _invalid(f"Unknown sessionId {sid!r}: create it with session/new or load it "
                           "with session/load first.")
        return workspace

    async def _load(self, sid: str) -> Session:
        from agentls.core.sessions.errors import SessionNotFound

        try:
            session: Session = await self._store(self.stores.store().load, sid)
        except RequestError:
            raise
        except SessionNotFound:
            raise _invalid(f"Unknown sessionId {sid!r}: no such session is stored. List them "
                           "with session/list.") from None
        return session

    async def _store(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        from agentls.core.sessions.errors import SessionNotFound, SessionStoreError

        try:
            return await asyncio.to_thread(function, *args, **kwargs)
        except SessionNotFound:
            raise
        except SessionStoreError as exc:
            raise RequestError(-32603, str(exc)) from exc

    # -- prompt turns ------------------------------------------------------------------
    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        from agentls.core.support.size_caps import prompt_too_large
        from agentls.core.types.errors import AgentlsError

        workspace = self._session(session_id)
        if session_id in self.turns:
            raise _invalid(f"Session {session_id} already has a prompt running; wait for its "
                           "answer or cancel it (session/cancel).")
        text, attachments = prompt_text(prompt)
        too_large = prompt_too_large(text + "".join(attachments),
                                     workspace.host.settings.session.max_prompt_chars)
        if too_large is not None:
            raise _invalid(too_large)
        if not text.strip() and not attachments:
            raise _invalid("The prompt is empty: send at least one text block.")
        self.turns[session_id] = asyncio.current_task()  # type: ignore[assignment]
        self.link.last_session = session_id
        workspace.active_session = session_id
        self.cancel_early.discard(session_id)
        try:
            session = await self._load(session_id)
            own = commands.own_command(text)
            if own is not None:
                return await self._own_command(workspace, session, *own)
            try:
                orchestrator = workspace.host.get_orchestrator()
            except AgentlsError as exc:
                raise RequestError(-32603, f"agentls: {exc}") from None
            message = await user_message(workspace, orchestrator.agent.enrichers, text,
                                          attachments)
            if refused := (message.metadata or {}).get("not_attached"):
                await self.link.update(session_id,
                                       updates.notice(not_attached_text(refused), "warning"))
            if session_id in self.cancel_early:
                return PromptResponse(stop_reason="cancelled")
            observer = AcpTurnObserver(self.link, str(workspace.root))
            result = await orchestrator.run_turn(session, message, observer=observer)
            await self._send_usage(session_id, orchestrator, result)
            if not session.messages:  # the first prompt names the session
                await self._send_title(session_id, message)
            await observer.drain()
        finally:
            self.turns.pop(session_id, None)
            self.link.current_calls.pop(session_id, None)
        await self._send_commands(session_id, workspace)
        return _response(result)

    async def _send_title(self, sid: str, message: Any) -> None:
        from datetime import UTC, datetime

        from acp.schema import SessionInfoUpdate

        from agentls.core.sessions.rows import title_from

        title = title_from(message)
        if title:
            now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            await self.link.update(sid, SessionInfoUpdate(
                session_update="session_info_update", title=title, updated_at=now))

    async def _send_usage(self, sid: str, orchestrator: Any, result: Any) -> None:
        """`usage_update`: how full the model's context window is after the
        turn (the last model call's tokens), when the window is known."""
        from acp.schema import UsageUpdate

        last = next((m.metadata["usage"] for m in reversed(result.messages)
                     if m.role == "assistant" and isinstance((m.metadata or {}).get("usage"),
                                                             dict)), None)
        if last is None:
            return
        try:
            agent = orchestrator.agent
            window = await orchestrator.context.window(agent.provider, agent.model_name())
        except Exception:  # the window is a nicety; the turn's answer is not
            log.debug("No context window for usage_update", exc_info=True)
            return
        used = int(last.get("input_tokens") or 0) + int(last.get("output_tokens") or 0)
        await self.link.update(sid, UsageUpdate(session_update="usage_update", used=used,
                                                size=int(window)))

    async def _own_command(self, workspace: AcpWorkspace, session: Session, name: str,
                           rest: str) -> PromptResponse:
        from agentls.core.types.errors import AgentlsError

        try:
            text = await commands.run_command(workspace, session, name, rest)
        except (ValueError, AgentlsError) as exc:
            text = f"/{name}: {exc}"
        except asyncio.CancelledError:
            # session/cancel during /compact (the orchestrator cancels this
            # task): still an answer, as for a turn.
            task = asyncio.current_task()
            if task is None or session.session_id not in self.cancel_early:
                raise
            task.uncancel()
            return PromptResponse(stop_reason="cancelled")
        await self.link.update(session.session_id, update_agent_message_text(text))
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        workspace = self.sessions.get(session_id)
        if workspace is None or session_id not in self.turns:
            return
        self.cancel_early.add(session_id)
        if workspace.host.orchestrator is not None:
            workspace.host.orchestrator.cancel(session_id)

    # -- shutdown -----------------------------------------------------------------------
    async def shutdown(self) -> None:
        """The client is gone: running turns are cancelled and awaited (their
        messages are stored), features stopped, the store closed."""
        for sid in list(self.turns):
            await self.cancel(sid)
        pending = [t for t in self.turns.values() if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=SHUTDOWN_WAIT_SECONDS)
        for task in list(self._tasks):
            task.cancel()
        for workspace in self.workspaces.values():
            await workspace.aclose()
        self.stores.close()


# --------------------------------------------------------------------------- helpers


def _response(result: Any) -> PromptResponse:
    usage = result.usage
    tokens = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                   total_tokens=usage.total_tokens or usage.input_tokens + usage.output_tokens)
    if result.status == "cancelled":
        return PromptResponse(stop_reason="cancelled", usage=tokens)
    error = result.error or {}
    if result.status == "failed":
        code = str(error.get("code") or "")
        if code == "max_iterations":
            return PromptResponse(stop_reason="max_turn_requests", usage=tokens)
        if ended_with_explanation(result.messages):
            # The client showed agentls's explanation (repeated or malformed
            # calls, an empty reply) as the answer: the turn ended, no error.
            return PromptResponse(stop_reason="end_turn", usage=tokens)
        raise RequestError(-32603, f"agentls: {error.get('message') or 'the turn failed'}",
                           {"code": code or "failed"})
    return PromptResponse(stop_reason="end_turn", usage=tokens)


def _session_infos(summaries: list[Any], cwd: str | None) -> list[SessionInfo]:
    """The stored sessions of `cwd` (all with one when None), newest first.
    Sessions of the language server have no cwd and are left out."""
    wanted = os.path.realpath(cwd) if cwd else None
    found = []
    for summary in summaries:
        where = summary.metadata.get("cwd")
        if not isinstance(where, str) or (wanted and os.path.realpath(where) != wanted):
            continue
        updated = summary.updated_at.isoformat(timespec="milliseconds")
        found.append(SessionInfo(session_id=summary.session_id, cwd=where,
                                 title=summary.title or None,
                                 updated_at=updated.replace("+00:00", "Z")))
    return found


def _answers_session(message: dict[str, Any], sid: str) -> bool:
    """The answer to the session/new or session/load of `sid`."""
    result = message.get("result")
    if "id" not in message or not isinstance(result, dict):
        return False
    return result.get("sessionId") == sid or "sessionId" not in result
