"""The turn observer interface (what the LSP layer turns into
notifications). Its own module, free of pydantic and the turn loop, so the
language server can define its observer without importing them at start-up."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentls.core.tools.contract import ToolNeed
    from agentls.core.types.conversation import Message

__all__ = ["TurnObserver"]


class TurnObserver:
    """Receives a turn's stream; the LSP layer turns these into notifications.
    Subclass and override what you need."""

    async def on_delta(self, session_id: str, index: int, delta: str, kind: str) -> None:
        return None

    async def on_message(self, session_id: str, index: int, message: Message) -> None:
        return None

    async def on_progress(self, session_id: str, text: str) -> None:
        return None

    async def on_tool_need(self, session_id: str, call_id: str, tool_name: str,
                           need: ToolNeed) -> None:
        """A tool call's prepared need (kind, paths, the diff), known
        before the approval gate clears it; the ACP front shows it as the
        tool call's kind, locations and content."""
        return None

    async def on_tool_output(self, session_id: str, call_id: str, text: str) -> None:
        """A piece of a running tool's output (a command's stdout or
        stderr, decoded), as it arrives (ToolContext.output)."""
        return None
