"""Hook dispatch (Amplifier's Hooks API plus the behaviours the API documents imply).

Precedence when several handlers answer one event:
deny > ask_user > inject_context > modify > continue.

- The first `deny` short-circuits: later handlers do not run.
- The first `ask_user` wins over any inject_context, whatever the order (a
  later deny still beats it, which is why handlers keep running).
- `modify` chains `data` through the following handlers.
- Several inject_context results merge into one: texts joined by a blank
  line; role, ephemeral, suppress_output (and placement) from the first.
- A handler that raises, times out, or returns something that is not a
  HookResult is logged and skipped.
- Lower priority number runs first; equal priorities keep registration order.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agentls.core.types.events import is_valid_event_name
from agentls.core.types.messages import HookResult

if TYPE_CHECKING:
    from agentls.core.approval.gate import ApprovalPolicy

__all__ = ["HookEmission", "HookHandler", "HookRegistry"]

log = logging.getLogger("agentls.hooks")

HookHandler = Callable[[str, dict[str, Any]], Awaitable[HookResult]]

_LEVELS = {"info": 0, "warning": 1, "error": 2}


@dataclass(frozen=True)
class _Registration:
    event: str
    handler: HookHandler
    priority: int
    name: str
    order: int


@dataclass(frozen=True)
class HookEmission:
    """The merged result plus the names of the handlers that produced it
    (the injectors for inject_context, the asker for ask_user, ...), so the
    orchestrator can tag stored injections with their source hook."""

    result: HookResult
    sources: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    # (handler name, its own text) of each inject_context answer before the
    # merge: the size limit is per injection (Amplifier's Hooks API), so the orchestrator
    # admits each on its own.
    injections: list[tuple[str, str]] = field(default_factory=list)


class HookRegistry:
    """Registers async handlers per event and resolves their answers."""

    def __init__(self, *, handler_timeout: float | None = 30.0) -> None:
        # A hook that hangs must not block the turn forever.
        self.handler_timeout = handler_timeout
        self._handlers: dict[str, list[_Registration]] = {}
        self._counter = itertools.count()
        # Typed approval rules a hook module contributes (features/policy/rules.py):
        # the turn asks them about every tool call before it runs
        # (core/approval/gate.py, `decide`).
        self.approval_policies: list[ApprovalPolicy] = []

    def add_approval_policy(self, policy: ApprovalPolicy) -> None:
        """Register an approval policy; the strictest answer of all wins."""
        self.approval_policies.append(policy)

    def register(
        self,
        event: str,
        handler: HookHandler,
        priority: int = 0,
        name: str | None = None,
    ) -> Callable[[], None]:
        """Add `handler` for `event`; returns a function that removes it."""
        if not is_valid_event_name(event):
            raise ValueError(
                f"Invalid hook event name {event!r}: use 'namespace:action' with one colon, "
                "e.g. 'tool:pre'"
            )
        if not callable(handler):
            raise TypeError(f"Hook handler for {event!r} is not callable: {handler!r}")
        registration = _Registration(
            event=event,
            handler=handler,
            priority=priority,
            name=name or str(getattr(handler, "__name__", None) or repr(handler)),
            order=next(self._counter),
        )
        handlers = self._handlers.setdefault(event, [])
        handlers.append(registration)
        handlers.sort(key=lambda r: (r.priority, r.order))

        def unregister() -> None:
            current = self._handlers.get(event, [])
            if registration in current:
                current.remove(registration)

        return unregister

    def list_handlers(self, event: str | None = None) -> dict[str, list[str]]:
        """Handler names per event, in the order they run."""
        events = [event] if event is not None else sorted(self._handlers)
        return {e: [r.name for r in self._handlers.get(e, [])] for e in events}

    def has_handlers(self, event: str) -> bool:
        return bool(self._handlers.get(event))

    async def emit(self, event: str, data: dict[str, Any]) -> HookResult:
        return (await self.emit_with_sources(event, data)).result

    async def emit_with_sources(self, event: str, data: dict[str, Any]) -> HookEmission:
        registrations = list(self._handlers.get(event, ()))
        if not registrations:
            return HookEmission(HookResult())
        current = dict(data)
        current.setdefault("timestamp", datetime.now(UTC).isoformat())

        ask: tuple[HookResult, str] | None = None
        injections: list[tuple[HookResult, str]] = []
        modified_by: list[str] = []
        notices: list[HookResult] = []
        skipped: list[str] = []

        for reg in registrations:
            result = await self._call(reg, event, current)
            if result is None:
                skipped.append(reg.name)
                continue
            if result.action == "deny":
                return HookEmission(result, [reg.name], skipped)
            if result.user_message:
                notices.append(result)
            if result.action == "ask_user":
                if ask is None:
                    ask = (result, reg.name)
            elif result.action == "inject_context":
                if result.context_injection:
                    injections.append((result, reg.name))
                if result.data is not None:
                    current = dict(result.data)
                    modified_by.append(reg.name)
            elif result.action == "modify" and result.data is not None:
                current = dict(result.data)
                modified_by.append(reg.name)

        message = _merge_user_messages(notices)
        if ask is not None:
            return HookEmission(ask[0].model_copy(update=message), [ask[1]], skipped)
        if injections:
            first = injections[0][0]
            merged = first.model_copy(
                update={
                    "context_injection": "\n\n".join(
                        r.context_injection or "" for r, _ in injections
                    ),
                    "data": current if modified_by else None,
                    **message,
                }
            )
            return HookEmission(merged, [name for _, name in injections], skipped,
                                [(name, r.context_injection or "") for r, name in injections])
        if modified_by:
            return HookEmission(
                HookResult(action="modify", data=current, **message), modified_by, skipped
            )
        return HookEmission(HookResult(**message), [], skipped)

    async def _call(
        self, reg: _Registration, event: str, data: dict[str, Any]
    ) -> HookResult | None:
        try:
            # Each handler gets its own shallow copy: one handler mutating the
            # payload in place must not leak into the next (use `modify`).
            call = reg.handler(event, dict(data))
            if self.handler_timeout is None:
                result = await call
            else:
                result = await asyncio.wait_for(call, self.handler_timeout)
        except TimeoutError:
            log.error(
                "Hook %r on %s timed out after %ss; skipped", reg.name, event, self.handler_timeout
            )
            return None
        except Exception:
            log.exception("Hook %r on %s raised; skipped", reg.name, event)
            return None
        if not isinstance(result, HookResult):
            log.error(
                "Hook %r on %s returned %s instead of a HookResult; skipped",
                reg.name,
                event,
                type(result).__name__,
            )
            return None
        return result


def _merge_user_messages(results: list[HookResult]) -> dict[str, Any]:
    """user_message from every answering handler is kept (joined), at the
    highest severity, so a notice is not lost because another action won."""
    texts: list[str] = []
    level = "info"
    for r in results:
        if r.user_message and r.user_message not in texts:
            texts.append(r.user_message)
            if _LEVELS[r.user_message_level] > _LEVELS[level]:
                level = r.user_message_level
    if not texts:
        return {}
    return {"user_message": "\n".join(texts), "user_message_level": level}
