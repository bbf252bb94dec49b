"""The agent turn loop's owner (ARCHITECTURE.md, "Agent turn"): runs turns
for any number of sessions, one at a time per session, keeps their statuses,
cancels them, and compacts a session on request. One turn's loop lives in
turn.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .approval import ApprovalChannel, ApprovalGate, DisplayChannel
from .checkpoint_store import CheckpointStore
from .context import ContextManager
from .hooks import HookRegistry
from .models import AgentlsError, SessionStatus
from .observer import TurnObserver
from .provider import Provider
from .session_statuses import SessionStatuses
from .session_types import Message, Session
from .system_prompt import default_system_prompt
from .tools import ToolExecutor
from .turn import Turn, TurnResult, TurnStatus
from .turn_host import MessageSink, TurnLimits

__all__ = [
    "MessageSink",
    "Orchestrator",
    "TurnInProgress",
    "TurnLimits",
    "TurnObserver",
    "TurnResult",
    "TurnStatus",
]


class TurnInProgress(AgentlsError):
    """A second turn was started in a session whose turn is still running."""


@dataclass
class _Running:
    task: asyncio.Task[Any] | None
    cancel_requested: bool = False


class Orchestrator:
    """Runs agent turns for any number of sessions (one turn per session at
    a time) over one provider."""

    def __init__(
        self,
        provider: Provider,
        *,
        hooks: HookRegistry | None = None,
        tools: ToolExecutor | None = None,
        sink: MessageSink | None = None,
        approval: ApprovalChannel | None = None,
        gate: ApprovalGate | None = None,
        display: DisplayChannel | None = None,
        limits: TurnLimits | None = None,
        system_prompt: str | None = None,
        workspace: str | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
        tool_context: Mapping[str, Any] | None = None,
    ) -> None:
        self.provider = provider
        self.hooks = hooks or HookRegistry()
        self.tools = tools or ToolExecutor([])
        self.sink = sink
        # The one approval gate (shared with the LSP edit applier, so "Allow
        # for session" answers are one memory); `approval` is its channel.
        self.gate = gate or ApprovalGate(approval)
        if approval is not None:
            self.gate.channel = approval
        self.display = display
        self.limits = limits or TurnLimits()
        self.workspace = workspace
        self.model = model
        self.max_tokens = max_tokens  # sent with each request (None: the provider's default)
        # Enforced on the stream whatever the request said (stream_guard);
        # None: max_tokens, if any.
        self.output_cap: int | None = None
        self.tool_context = dict(tool_context or {})
        # Where turns store files before changing them (None: no checkpoints).
        self.checkpoints: CheckpointStore | None = None
        self._system_prompt = system_prompt
        # Builds each request to fit the model's window (compaction, project
        # instructions): core/context.py.
        self.context = ContextManager()
        self._running: dict[str, _Running] = {}
        # Per-session statuses, updated by the turns (agentls/status).
        self.session_statuses = SessionStatuses(self._load_status)
        self._notices_told: set[tuple[str, str]] = set()  # (session, provider notice)

    @property
    def approval(self) -> ApprovalChannel | None:
        return self.gate.channel

    @approval.setter
    def approval(self, channel: ApprovalChannel | None) -> None:
        self.gate.channel = channel

    def first_notice(self, session_id: str, notice: str) -> bool:
        """True the first time a provider notice comes up in a session."""
        key = (session_id, notice)
        if key in self._notices_told:
            return False
        self._notices_told.add(key)
        return True

    # -- public ---------------------------------------------------------------
    def system_prompt(self) -> str:
        if self._system_prompt is not None:
            return self._system_prompt
        return default_system_prompt(
            workspace=self.workspace, tools=[d.tool_name for d in self.tools.descriptors]
        )

    def is_running(self, session_id: str) -> bool:
        return session_id in self._running

    def status(self, session_id: str) -> SessionStatus | None:
        return self.session_statuses.get(session_id)

    def statuses(self) -> list[SessionStatus]:
        return self.session_statuses.values()

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
        turn = Turn(self, self.session_statuses, session, observer or TurnObserver(),
                    dict(context or {}))
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
            turn = Turn(self, self.session_statuses, session, observer or TurnObserver(), {})
            model = self.model or getattr(self.provider, "default_model", "") or ""
            return await self.context.compact(
                turn.context_host(), provider=self.provider, model=model,
                output_cap=self.output_cap or self.max_tokens,
            )
        finally:
            self._running.pop(sid, None)

    def _load_status(self, sid: str) -> SessionStatus | None:
        loader = getattr(self.sink, "get_status", None)
        status = loader(sid) if loader is not None else None
        return status if isinstance(status, SessionStatus) else None
