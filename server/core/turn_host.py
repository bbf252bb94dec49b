"""What a turn uses of the orchestrator that runs it (`TurnHost`), and the
types both share. Turn (turn.py) depends on this Protocol, not on the
Orchestrator class, so orchestrator.py -> turn.py is the only edge between
them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .approval import ApprovalGate, DisplayChannel
from .checkpoint_store import CheckpointStore
from .context import ContextManager
from .hooks import HookRegistry
from .injections import InjectionLimits
from .models import SessionStatus
from .provider import Provider
from .session_types import Message
from .size_caps import DEFAULT_MAX_TOOL_RESULT_CHARS
from .tools import ToolExecutor

__all__ = ["MessageSink", "TurnHost", "TurnLimits"]


class MessageSink(Protocol):
    """Where final messages go (the SQLite SessionStore satisfies this)."""

    def append_message(self, session_id: str, message: Message) -> int: ...

    def update_status(self, session_id: str, status: SessionStatus) -> None: ...


@dataclass(frozen=True)
class TurnLimits:
    max_iterations: int = 25
    injection: InjectionLimits = field(default_factory=InjectionLimits)
    # Tool results over this many characters keep head and tail (size_caps).
    max_tool_result_chars: int | None = DEFAULT_MAX_TOOL_RESULT_CHARS


class TurnHost(Protocol):
    """The agent a turn runs with (the Orchestrator satisfies it)."""

    provider: Provider
    hooks: HookRegistry
    tools: ToolExecutor
    sink: MessageSink | None
    gate: ApprovalGate
    display: DisplayChannel | None
    limits: TurnLimits
    model: str | None
    max_tokens: int | None
    output_cap: int | None
    # The composition's tool context keys (workspace_folders, documents,
    # snapshots, editor): ToolContext.from_mapping reads them.
    tool_context: Mapping[str, Any]
    checkpoints: CheckpointStore | None
    context: ContextManager

    def system_prompt(self) -> str: ...

    def first_notice(self, session_id: str, notice: str) -> bool: ...
