"""Edits a model writes in its reply instead of in tool calls.

Small local models write code well in prose and badly inside a tool call's
JSON string (bench/README.md, "Agent tasks: edits written in the reply";
Aider's "whole" edit format exists for the same reason). With a
`ReplyEditor` in the agent (AgentBundle.reply_editor, chosen by
`session.editFormat`), the model is told to write a changed file whole in
its reply, the file tools it would fumble are not offered to it, and a
final reply's file blocks become file-tool calls that the turn runs
through the one approval call site like any other call (turn_tools.py): the
user approves each file, the checkpoints and linters see a normal edit.

The contract is typed here (core); the mechanism that reads blocks and
merges them into files is a feature (features/reply_edits.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .models import ToolCall

__all__ = ["ReplyEditor", "ReplySources", "resolved_edit_format"]


def resolved_edit_format(chosen: str, provider: str) -> str:
    """`session.editFormat` as it applies: "auto" is "file-blocks" for the
    embedded `local` provider (small models on the user's CPU), else
    "tool-calls"."""
    if chosen == "auto":
        return "file-blocks" if provider == "local" else "tool-calls"
    return chosen


@dataclass(frozen=True)
class ReplySources:
    """What a ReplyEditor may read: the workspace folders, the open
    buffers' texts, and this turn's texts (the prompt with its attached
    files, the tool results), where the files the reply changes were seen."""

    workspace_folders: tuple[str, ...]
    documents: Callable[[Path], str | None] | None
    seen: tuple[str, ...] = ()


@runtime_checkable
class ReplyEditor(Protocol):
    """Reads file edits out of a final reply (a feature plugin offers it)."""

    def instructions(self) -> str:
        """Added to the system prompt: how to write a change in a reply."""
        ...

    def hidden_tools(self) -> frozenset[str]:
        """Tools kept from the model (still run for the reply's edits)."""
        ...

    def reply_edits(self, reply: str, sources: ReplySources) -> list[ToolCall]:
        """The tool calls that make the changes `reply` writes ([] for none)."""
        ...
