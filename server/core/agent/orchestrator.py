"""The agent turn loop's owner (docs/architecture.md, "The path of a chat turn"): runs turns
for any number of sessions, one at a time per session, keeps their statuses,
cancels them, and compacts a session on request. One turn's loop lives in
turn.py.

What a turn runs with (provider, tools, hooks, limits, channels) is one
frozen AgentBundle (core/agent/bundle.py, made by agentls.app.build_agent). The
orchestrator is given one and may be handed the next (`use`) when the
settings change: statuses, running turns and cancellation stay with the
orchestrator, and a running turn finishes with the bundle it started with.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agentls.core.agent.bundle import AgentBundle, ContextSettings
from agentls.core.agent.observer import TurnObserver
from agentls.core.agent.turn import MessageSink, Turn, TurnResult, TurnServices
from agentls.core.checkpoints.store import CheckpointStore
from agentls.core.context.fitting import ContextManager
from agentls.core.sessions.statuses import SessionStatuses
from agentls.core.types import events
from agentls.core.types.conversation import Message, Session
from agentls.core.types.errors import AgentlsError
from agentls.core.types.messages import SessionStatus

__all__ = ["Orchestrator", "TurnInProgress"]


class TurnInProgress(AgentlsError):
    """A second turn was started in a session whose turn is still running."""


@dataclass
class _Running:
    task: asyncio.Task[Any] | None
    cancel_requested: bool = False


class Orchestrator:
    """Runs agent turns for any number of sessions (one turn per session at
    a time), each on the bundle current when it started."""

    def __init__(
        self,
        agent: AgentBundle,
        *,
        sink: MessageSink | None = None,
        checkpoints: CheckpointStore | None = None,
    ) -> None:
        """`agent`: the bundle turns run with (agentls.app.build_agent makes
        one; `use` hands over the next)."""
        self._agent = agent
        self.sink = sink
        # Where turns store files before changing them (None: no checkpoints).
        self.checkpoints = checkpoints
        # Builds each request to fit the model's window (compaction, project
        # instructions): core/context/fitting.py. What it learns about models is
        # shared by every turn and bundle.
        settings = agent.context
        self.context = ContextManager() if settings is None else ContextManager(
            window=settings.window_override, instructions=settings.instructions)
        self._running: dict[str, _Running] = {}
        # Per-session statuses, updated by the turns (agentls/status).
        self.session_statuses = SessionStatuses(self._load_status)
        self._notices_told: set[tuple[str, str]] = set()  # (session, provider notice)
        self._ended: set[str] = set()  # sessions session:end was emitted for

    # -- the agent ------------------------------------------------------------
    @property
    def agent(self) -> AgentBundle:
        return self._agent

    def use(self, agent: AgentBundle) -> None:
        """Run the next turns with `agent` (the settings changed). Turns
        already running finish with the bundle they started with; statuses,
        cancellation and what the context manager learned are kept."""
        self._agent = agent
        self.context = self._fitted(agent.context)

    def _fitted(self, settings: ContextSettings | None) -> ContextManager:
        """The context manager for a bundle's settings: the same one when it
        has none, else one sharing what the current one learned. A running
        turn keeps the manager it started with, as it keeps its bundle."""
        if settings is None:
            return self.context
        return self.context.with_settings(window=settings.window_override,
                                          instructions=settings.instructions)

    def _first_notice(self, session_id: str, notice: str) -> bool:
        """True the first time a provider notice comes up in a session."""
        key = (session_id, notice)
        if key in self._notices_told:
            return False
        self._notices_told.add(key)
        return True

    def _turn(self, session: Session, observer: TurnObserver | None,
              context: Mapping[str, Any] | None) -> Turn:
        """A turn on the current bundle, with what it uses of this orchestrator."""
        services = TurnServices(self.session_statuses, self.context, sink=self.sink,
                                checkpoints=self.checkpoints, first_notice=self._first_notice)
        return Turn(self._agent, services, session, observer or TurnObserver(),
                    dict(context or {}))

    # -- public ---------------------------------------------------------------
    def is_running(self, session_id: str) -> bool:
        return session_id in self._running

    def status(self, session_id: str) -> SessionStatus | None:
        return self.session_statuses.get(session_id)

    def statuses(self) -> list[SessionStatus]:
        return self.session_statuses.values()

    async def end_sessions(self, reason: str, session_ids: Iterable[str] | None = None) -> None:
        """Emit session:end (`reason`: "shutdown", "deleted") for the sessions
        this process ran (or `session_ids` of them), once each. A failing
        hook is logged by the registry; it never stops the caller."""
        ran = [s.session_id for s in self.session_statuses.values()]
        for sid in ran if session_ids is None else [s for s in session_ids if s in ran]:
            if sid in self._ended:
                continue
            self._ended.add(sid)
            hooks = self._agent.hooks
            if hooks.has_handlers(events.SESSION_END):
                await hooks.emit(events.SESSION_END, {
                    "session_id": sid, "reason": reason,
                    "timestamp": datetime.now(UTC).isoformat()})

    def cancel(self, session_id: str) -> bool:
        """Cancel the running turn of a session: its provider call and any
        pending approval stop, and run_turn returns status "cancelled"."""
        running = self._running.get(session_id)
        if running is None or running.cancel_requested:
            return False
        running.cancel_requested = True
        if running.task is not None:
            running.task.cancel()
        return True

    async def run_turn(
        self,
        session: Session,
        prompt: str | Message,
        *,
        observer: TurnObserver | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> TurnResult:
        sid = session.session_id
        if sid in self._running:
            raise TurnInProgress(
                f"Session {sid} already has a turn running; wait for it or cancel it first."
            )
        task = asyncio.current_task()
        running = _Running(task)
        self._running[sid] = running
        turn = self._turn(session, observer, context)
        try:
            return await turn.run(prompt)
        except asyncio.CancelledError:
            if running.cancel_requested and task is not None:
                task.uncancel()
                return await turn.finish_cancelled()
            # Cancelled from outside (e.g. server shutdown): still leave the
            # session valid, then let the cancellation propagate.
            await asyncio.shield(turn.finish_cancelled())
            raise
        except Exception:
            # A store write failed (disk full) or a hook/tool bug escaped: the
            # turn is over either way, so its status must not stay "running"
            # (agentls/status would show it forever). The caller reports it.
            if sid in self.session_statuses and not turn.finished:
                self.session_statuses.update(sid, status="failed", ended_at=datetime.now(UTC))
            raise
        finally:
            self._running.pop(sid, None)

    async def compact(
        self, session: Session, *, observer: TurnObserver | None = None
    ) -> Message | None:
        """Compact a session on request (agentls/compact): the stored summary
        message, or None when there is nothing to compact. ModelError when
        the model failed or a hook vetoed; the session is unchanged then."""
        sid = session.session_id
        if sid in self._running:
            raise TurnInProgress(
                f"Session {sid} has a turn running; compact it after the turn ends."
            )
        self._running[sid] = _Running(asyncio.current_task())
        try:
            await self.session_statuses.load(sid)
            turn = self._turn(session, observer, None)
            agent = turn.agent
            return await turn.services.context.compact(
                turn.context_host(), provider=agent.provider, model=agent.model_name(),
                output_cap=agent.output_cap or agent.max_tokens,
            )
        finally:
            self._running.pop(sid, None)

    def _load_status(self, sid: str) -> SessionStatus | None:
        loader = getattr(self.sink, "get_status", None)
        status = loader(sid) if loader is not None else None
        return status if isinstance(status, SessionStatus) else None
