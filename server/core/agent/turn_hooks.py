"""Hook events of a turn, and acting on the hooks' answers: a handler's
user_message is shown, `deny` stops, `ask_user` asks through the approval
gate, inject_context is admitted against the injection budget and queued
(stored before the next model call, or kept for that call only), `modify`
rewrites the data. `HookDispatch` does it for one turn; the turn (turn.py)
and its tool-call runner (tool_calls.py) share one."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agentls.core.approval.gate import (
    ApprovalGate,
    ApprovalRequest,
    DisplayChannel,
    MessageLevel,
    options_from_labels,
)
from agentls.core.plugins.hooks import HookRegistry
from agentls.core.plugins.injections import InjectionBudget, InjectionLimits, InjectionRefused
from agentls.core.types import events
from agentls.core.types.conversation import Message
from agentls.core.types.messages import HookResult

__all__ = ["HookDispatch", "HookOutcome"]

log = logging.getLogger("agentls.orchestrator")


@dataclass
class HookOutcome:
    """What a turn does after an event's hooks answered."""

    allowed: bool
    reason: str = ""
    data: dict[str, Any] | None = None
    choice: str | None = None  # the user's yes to a hook's ask_user


class HookDispatch:
    """One turn's hook events: emits them with the session and a timestamp,
    acts on the answers, and keeps what the answers queued for the turn."""

    def __init__(self, registry: HookRegistry, gate: ApprovalGate,
                 display: DisplayChannel | None, session_id: str,
                 limits: InjectionLimits) -> None:
        self.registry = registry
        self.gate = gate  # asks the user for a hook's ask_user
        self.display = display
        self.sid = session_id
        self.budget = InjectionBudget(limits)
        self.refused_notices: list[str] = []  # injections over a limit, told to the user
        self.pending_injections: list[Message] = []  # stored before the next model call
        self.ephemeral: list[Message] = []  # the next model call only
        self.tool_post_appends: list[str] = []  # append_to_last_tool_result texts

    def has_handlers(self, event: str) -> bool:
        return self.registry.has_handlers(event)

    async def emit(self, event: str, data: dict[str, Any]) -> HookResult:
        if not self.registry.has_handlers(event):
            return HookResult()
        return await self.registry.emit(
            event, {**data, "session_id": self.sid, "timestamp": _now()}
        )

    async def hook(self, event: str, data: dict[str, Any]) -> HookOutcome:
        """Emit `event` and act on the merged result: show user_message, queue
        injections, ask the user for ask_user. Returns whether to go on."""
        hooks = self.registry
        if not hooks.has_handlers(event):
            return HookOutcome(True, data=data)
        payload = {**data, "session_id": self.sid, "timestamp": _now()}
        emission = await hooks.emit_with_sources(event, payload)
        result = emission.result
        if result.user_message:
            await self.notify(result.user_message, result.user_message_level)
        if result.action == "deny":
            source = ", ".join(emission.sources) or "a hook"
            return HookOutcome(False, reason=result.reason or f"Denied by {source} on {event}.")
        if result.action == "ask_user":
            return await self.ask(event, result, data)
        if result.action == "inject_context" and result.context_injection:
            self.queue_injection(result, ", ".join(emission.sources) or "hook", event,
                                 parts=emission.injections)
        if result.action in ("modify", "inject_context") and result.data is not None:
            return HookOutcome(True, data=result.data)
        return HookOutcome(True, data=data)

    async def ask(self, event: str, result: HookResult, data: dict[str, Any]) -> HookOutcome:
        tool_name = data.get("tool_name")
        request = ApprovalRequest(
            prompt=result.approval_prompt or result.reason or f"Allow {tool_name or event}?",
            options=options_from_labels(result.approval_options or ()),
            timeout=result.approval_timeout,
            default=result.approval_default,
            session_id=self.sid,
            tool_name=tool_name,
            tool_input=dict(data.get("tool_input") or {}),
            reason=result.reason,
        )
        await self.emit(
            events.APPROVAL_REQUIRED, {"tool_name": tool_name, "prompt": request.prompt}
        )
        decision = await self.gate.ask(request)
        if decision.allowed:
            await self.emit(
                events.APPROVAL_GRANTED, {"tool_name": tool_name, "choice": decision.choice}
            )
            return HookOutcome(True, data=data, choice=decision.choice)
        await self.emit(
            events.APPROVAL_DENIED,
            {"tool_name": tool_name, "choice": decision.choice, "reason": decision.reason},
        )
        return HookOutcome(False, reason=decision.reason)

    def queue_injection(
        self, result: HookResult, hook_name: str, event: str,
        parts: list[tuple[str, str]] | None = None,
    ) -> None:
        # Each handler's injection is admitted on its own (the size limit is per
        # injection): one hook flooding the context must not take the other
        # hooks' injections on the same event down with it, as it did when the
        # merged text was checked as a whole.
        admitted = []
        for name, part in parts or [(hook_name, result.context_injection or "")]:
            try:
                self.budget.admit(part, hook_name=name, event=event)
            except InjectionRefused as exc:
                log.warning("%s", exc)
                self.refused_notices.append(str(exc))
                continue
            admitted.append((name, part))
        if not admitted:
            return
        text = "\n\n".join(part for _, part in admitted)
        hook_name = ", ".join(name for name, _ in admitted)
        metadata: dict[str, Any] = {"source": "hook", "hook_name": hook_name, "event": event}
        if result.suppress_output:
            # The agent still sees it; transcripts shown to the user hide it.
            metadata["suppress_output"] = True
        if result.append_to_last_tool_result and event == events.TOOL_POST:
            self.tool_post_appends.append(text)
        elif result.ephemeral:
            self.ephemeral.append(
                Message(result.context_injection_role, text, {**metadata, "ephemeral": True})
            )
        else:
            # Stored injections wait for the next model call, so they never
            # split an assistant tool_calls message from its tool results.
            self.pending_injections.append(Message(result.context_injection_role, text, metadata))

    async def take_injections(self) -> list[Message]:
        """Tell the user about refused injections; the stored ones queued
        since the last model call, for the turn to store now."""
        for notice in self.refused_notices:
            await self.notify(notice, "warning")
        self.refused_notices.clear()
        pending, self.pending_injections = self.pending_injections, []
        return pending

    def drop_ephemeral(self, sent: list[Message]) -> None:
        """`sent` reached the model: drop them (kept until now for a
        context_length retry)."""
        self.ephemeral = [m for m in self.ephemeral if all(m is not e for e in sent)]

    def take_tool_post_appends(self) -> list[str]:
        """The texts tool:post hooks asked to append to the result just made."""
        appends, self.tool_post_appends = self.tool_post_appends, []
        return appends

    async def notify(self, text: str, level: MessageLevel) -> None:
        await self.emit(events.USER_NOTIFICATION, {"message": text, "level": level})
        display = self.display
        if display is None:
            log.info("[%s] %s", level, text)
            return
        try:
            await display.show_message(text, level)
        except Exception:
            log.exception("Display channel failed")


def _now() -> str:
    return datetime.now(UTC).isoformat()
