"""What a turn uses of the orchestrator that runs it (`TurnHost`), and the
types both share. Turn (turn.py) depends on this Protocol, not on the
Orchestrator class, so orchestrator.py -> turn.py is the only edge between
them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

# TurnLimits is part of the agent bundle (core/agent/bundle.py); re-exported here,
# where the turn's view of its host is declared.
from agentls.core.agent.bundle import TurnLimits
from agentls.core.approval.gate import ApprovalGate, DisplayChannel
from agentls.core.checkpoints.store import CheckpointStore
from agentls.core.context.fitting import ContextManager
from agentls.core.editor.reply_edits import ReplyEditor
from agentls.core.plugins.hooks import HookRegistry
from agentls.core.provider.contract import Provider, ToolSpec
from agentls.core.tools.executor import ToolExecutor
from agentls.core.types.conversation import Message
from agentls.core.types.messages import SessionStatus

__all__ = ["MessageSink", "TurnHost", "TurnLimits"]


class MessageSink(Protocol):
    """Where final messages go (the SQLite SessionStore satisfies this)."""

    def append_message(self, session_id: str, message: Message) -> int: ...

    def update_status(self, session_id: str, status: SessionStatus) -> None: ...


class TurnHost(Protocol):
    """The agent a turn runs with (the Orchestrator satisfies it; read-only
    here, so any object with these attributes does)."""

    @property
    def provider(self) -> Provider: ...

    @property
    def hooks(self) -> HookRegistry: ...

    @property
    def tools(self) -> ToolExecutor: ...

    @property
    def sink(self) -> MessageSink | None: ...

    @property
    def gate(self) -> ApprovalGate: ...

    @property
    def display(self) -> DisplayChannel | None: ...

    @property
    def limits(self) -> TurnLimits: ...

    @property
    def model(self) -> str | None: ...

    @property
    def max_tokens(self) -> int | None: ...

    @property
    def output_cap(self) -> int | None: ...

    # The composition's tool context keys (workspace_folders, documents,
    # snapshots, editor): ToolContext.from_mapping reads them.
    @property
    def tool_context(self) -> Mapping[str, Any]: ...

    @property
    def checkpoints(self) -> CheckpointStore | None: ...

    @property
    def context(self) -> ContextManager: ...

    @property
    def reply_editor(self) -> ReplyEditor | None: ...

    def offered_tools(self) -> list[ToolSpec]: ...

    def system_prompt(self) -> str: ...

    def first_notice(self, session_id: str, notice: str) -> bool: ...
