"""What one server process knows: the AgentHost (agentls.host: settings
with their sources, the plugin registry, the provider, the agent bundle,
the orchestrator, the approval gate, the session store) and the editor
front's own counters and notices. Built lazily, so the first
`initialize` answer does not wait for any of it. The keystroke path
(inline completion, next edit) uses `host.provider()` and
`host.feature()` alone and never pays for a bundle."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentls.host import AgentHost, HostStores
from agentls.lsp.suggestions.served import ServedIds

if TYPE_CHECKING:
    from agentls.core.editor.history import EditHistory


RECENT_ANSWERS = 50  # inline answers the latency summary is taken over


@dataclass
class CompletionCounters:
    served: int = 0  # non-empty inline completion answers
    shown: int = 0  # textDocument/didShowCompletion received
    accepted: int = 0  # agentls.inlineCompletionAccepted run (or notifyAccepted)
    partially_accepted: int = 0  # items with a didPartiallyAcceptCompletion
    warmed: int = 0  # prompts the engine evaluated ahead at a resting cursor
    # The newest answers (not superseded): milliseconds from the request to
    # the answer, whether it had a suggestion, whether the cache gave it and
    # whether it was a part of the answer (showPartialAfterMs).
    recent: deque[tuple[float, bool, bool, bool]] = field(
        default_factory=lambda: deque(maxlen=RECENT_ANSWERS))

    def answered(self, ms: float, *, suggested: bool, cached: bool,
                 partial: bool = False) -> None:
        self.recent.append((ms, suggested, cached, partial))

    def latency(self) -> dict[str, Any]:
        """What the user waited for the last answers: p50/p90 of those with a
        suggestion, and how many came from the cache, were empty, or were
        the part of a model's answer streamed by `showPartialAfterMs`."""
        times = sorted(ms for ms, suggested, _, _ in self.recent if suggested)

        def at(share: float) -> float | None:
            return round(times[min(len(times) - 1, int(share * len(times)))], 1) \
                if times else None

        return {"answers": len(self.recent), "p50Ms": at(0.5), "p90Ms": at(0.9),
                "cacheHits": sum(cached for _, _, cached, _ in self.recent),
                "empty": sum(not suggested for _, suggested, _, _ in self.recent),
                "partial": sum(partial for *_, partial in self.recent)}

    def to_wire(self) -> dict[str, Any]:
        return {"served": self.served, "shown": self.shown, "accepted": self.accepted,
                "partiallyAccepted": self.partially_accepted, "warmed": self.warmed,
                "latency": self.latency()}


@dataclass
class PromptCounters:
    """What inline completion sent to the model (agentls/status
    `inlinePrompts`; read by `agentls eval`)."""

    requests: int = 0  # model calls
    chars: int = 0  # prompt characters
    input_tokens: int = 0  # as the provider reported (0 when it does not)

    def to_wire(self) -> dict[str, int]:
        return {"requests": self.requests, "chars": self.chars,
                "inputTokens": self.input_tokens}


@dataclass
class NextEditCounters:
    served: int = 0  # non-empty copilotInlineEdit answers
    accepted: int = 0  # agentls.nextEditAccepted run

    def to_wire(self) -> dict[str, int]:
        return {"served": self.served, "accepted": self.accepted}


class ServerState:
    """The language server's side: the AgentHost (settings, provider,
    agent, gate; agentls.host) and what only the editor front keeps: the
    keystroke counters, the user's edit history, notices already shown."""

    def __init__(self, *, environ: Mapping[str, str] | None = None) -> None:
        self.host = AgentHost(HostStores(environ))
        self.counters = CompletionCounters()
        self.next_edit_counters = NextEditCounters()
        self.prompt_counters = PromptCounters()
        # Inline suggestions served (ids in their accept commands / uuids)
        # and the notices they showed (lsp/suggestions/inline.py).
        self.inline_served = ServedIds()
        self.inline_told: set[str] = set()
        self._edit_history: EditHistory | None = None
        self._told: set[str] = set()
        # Settings problems shown at the last report (lifecycle.report_problems).
        self.reported_problems: set[str] = set()
        # The restricted-mode notice last shown (reload.report_restricted).
        self.reported_restricted: str | None = None
        # Set once the first inline completion was answered (lsp.inline).
        self.inline_warm: Any = None
        # The provider whose completion model a document's opening readied
        # (lsp/suggestions/inline.py prepare_soon).
        self.inline_prepared: object | None = None

    # -- the user's edits (next edit suggestions) --------------------------------
    @property
    def edit_history(self) -> EditHistory:
        if self._edit_history is None:
            from agentls.core.editor.history import EditHistory

            self._edit_history = EditHistory()
        return self._edit_history

    async def warm_up(self, limit: float = 2.0) -> None:
        """Until the first inline completion was answered, at most `limit` s."""
        import asyncio

        if self.inline_warm is None:
            self.inline_warm = asyncio.Event()
        try:
            await asyncio.wait_for(self.inline_warm.wait(), limit)
        except TimeoutError:
            pass

    # -- user notices ----------------------------------------------------------------
    def first_time(self, key: str) -> bool:
        """True once per key: errors the user can act on are shown once, not
        per keystroke."""
        if key in self._told:
            return False
        self._told.add(key)
        return True

    def forget_notice(self, key: str) -> None:
        self._told.discard(key)
