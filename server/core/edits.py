"""File changes as workspace edits the user approves in the editor
(PROTOCOL.md, "Tool calls become workspace edits").

File-changing tools never write to disk. They build an LSP WorkspaceEdit
(plain JSON-shaped dicts, so features need not import pygls) against the
server's view of the document, and hand it to an `EditApplier` through the
tool context key `"editor"`. The LSP layer implements EditApplier: it asks
for approval (annotation or message mode), checks that the document version
has not moved, and sends workspace/applyEdit.

The policy hook (tool:pre) tells the applier whether a rule already allowed
the change (`approval="allow"`: no prompt), the user must be asked unless
they chose "Allow for session" for this tool (`"ask"`), or must be asked
every time (`"protected"`: the file configures agentls, the editor, git,
CI or a package manager). The applier leaves that decision to the core's
ApprovalGate. The model never decides what needs approval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = [
    "ApprovalPolicy",
    "DocumentLookup",
    "DocumentSnapshot",
    "EditApplier",
    "EditOutcome",
    "EditRequest",
]

ApprovalPolicy = Literal["allow", "ask", "protected"]


@dataclass(frozen=True)
class DocumentSnapshot:
    """What the server knows of a file: the open buffer (with its LSP
    version) when the editor has it open, else the disk content (version
    None)."""

    uri: str
    path: str
    text: str
    version: int | None  # None: not open in the editor; content is from disk
    exists: bool = True


# Resolves a workspace path (absolute) to its current snapshot, or None when
# neither an open buffer nor a file exists.
DocumentLookup = Callable[[str], DocumentSnapshot | None]


@dataclass(frozen=True)
class EditRequest:
    tool_name: str
    session_id: str
    label: str  # "agentls: <tool> <relative path>"
    edit: dict[str, Any]  # an LSP WorkspaceEdit (documentChanges form)
    preview: str  # unified diff / summary shown in prompts and transcripts
    paths: tuple[str, ...]  # absolute paths the edit touches
    # uri -> the version the edit was computed from (None: the file was not
    # open). The applier refuses the edit when the document moved since.
    base_versions: dict[str, int | None] = field(default_factory=dict)
    approval: ApprovalPolicy = "ask"
    # path -> the text the file will have once the edit is applied (None:
    # the edit removes it). Checkpoints record it as what the agent wrote,
    # so a later change by someone else is seen; a path left out is read
    # back after the edit instead.
    after: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class EditOutcome:
    applied: bool
    # What the agent is told when not applied: declined, timed out, the
    # editor refused, the document changed (re-read), no workspace, ...
    reason: str = ""
    # "declined" | "timeout" | "stale" | "failed" | "unsupported" | "" (applied)
    code: str = ""
    choice: str | None = None


class EditApplier(Protocol):
    async def apply(self, request: EditRequest) -> EditOutcome: ...
