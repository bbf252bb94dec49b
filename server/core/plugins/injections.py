"""Limits on hook context injections (Amplifier's Hooks API, "Limit injection size").

One injection may not exceed `session.injection_size_limit` bytes (UTF-8);
all injections of one turn together may not exceed
`session.injection_budget_per_turn` tokens, estimated as characters / 4.
`None` means unlimited. A refused injection is not added to the context; the
orchestrator logs it and tells the user, and the turn goes on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agentls.core.types.errors import AgentlsError

__all__ = ["SYSTEM_REMINDER", "InjectionBudget", "InjectionLimits", "InjectionRefused",
           "estimate_tokens", "is_leading_system"]

# How a system-role message that is not part of the leading system prompt
# (a hook's injection, agentls's note after a malformed tool call) reaches a
# model whose API or chat template keeps system text at the top: as user
# text in place, so the prompt before it stays the same (the anthropic
# provider, and the local provider's chat templates, both do this).
SYSTEM_REMINDER = "<system-reminder>\n{text}\n</system-reminder>"


def is_leading_system(source: str | None, leading: bool) -> bool:
    """Whether a system message belongs to the top system prompt: it comes
    before any other message and a hook did not inject it."""
    return leading and source != "hook"


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


class InjectionRefused(AgentlsError):
    """A hook's context injection broke a configured limit."""

    def __init__(self, message: str, *, hook_name: str, event: str) -> None:
        super().__init__(message)
        self.hook_name = hook_name
        self.event = event


@dataclass(frozen=True)
class InjectionLimits:
    size_limit: int | None = 10240
    budget_per_turn: int | None = 10000


class InjectionBudget:
    """Per-turn accounting; create one per agent turn."""

    def __init__(self, limits: InjectionLimits) -> None:
        self.limits = limits
        self.used_tokens = 0

    def admit(self, text: str, *, hook_name: str, event: str) -> None:
        """Charge `text` to this turn or raise InjectionRefused (nothing charged)."""
        size = len(text.encode("utf-8"))
        limit = self.limits.size_limit
        if limit is not None and size > limit:
            raise InjectionRefused(
                f"Context injection from hook {hook_name!r} on {event} is {size} bytes, over "
                f"session.injectionSizeLimit ({limit} bytes); it was not added. Shorten what the "
                "hook injects or raise the limit.",
                hook_name=hook_name,
                event=event,
            )
        tokens = estimate_tokens(text)
        budget = self.limits.budget_per_turn
        if budget is not None and self.used_tokens + tokens > budget:
            raise InjectionRefused(
                f"Context injection from hook {hook_name!r} on {event} (~{tokens} tokens) would "
                f"exceed this turn's injection budget (session.injectionBudgetPerTurn = {budget} "
                f"tokens, {self.used_tokens} already used); it was not added.",
                hook_name=hook_name,
                event=event,
            )
        self.used_tokens += tokens
