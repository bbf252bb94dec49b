"""File changes as workspace edits the user approves in the editor
(docs/protocol.md, "Tool calls become workspace edits").

File-changing tools never write to disk. They build an LSP WorkspaceEdit
(plain JSON-shaped dicts, so features need not import pygls) against the
server's view of the document, and hand it to an `EditApplier`
(`ToolContext.editor`). The LSP layer implements EditApplier: it renders and
applies, never decides: `check` says what the editor cannot do (no
applyEdit, a resource operation it lacks, a path that now leads outside),
`apply` checks that the document version has not moved and sends
workspace/applyEdit.

Whether the user is asked was decided before the tool ran, by the approval
gate (core/approval/gate.py). When the gate wants the editor's own review UI to
ask (annotation mode), the turn hands the tool a `ConfirmingEditor`: every
request it applies carries `confirm=True` (needsConfirmation). The model
never decides what needs approval, and the tools never see a verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "MAX_TEXT_CHARS",
    "ConfirmingEditor",
    "DocumentLookup",
    "DocumentSnapshot",
    "EditApplier",
    "EditOutcome",
    "EditRequest",
    "UnreadableDocument",
    "disk_snapshot",
    "edit_refusal",
    "editor_confirms",
]

MAX_TEXT_CHARS = 5_000_000  # larger documents are not edited through LSP edits


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
    # The editor asks the user before applying (the gate decided to ask and
    # the editor confirms edits itself: annotation mode's needsConfirmation).
    confirm: bool = False
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


def edit_refusal(editor: Any, request: EditRequest) -> EditOutcome | None:
    """The editor's refusal of `request` before anyone is asked (it cannot
    apply it, or a path now leads outside the workspace), if it has a
    `check(request)`; None otherwise."""
    check = getattr(editor, "check", None)
    outcome = check(request) if callable(check) else None
    return outcome if isinstance(outcome, EditOutcome) else None


def editor_confirms(editor: Any) -> bool:
    """Whether the editor asks the user itself before applying an edit
    (`confirms_in_editor()`, the LSP applier in annotation mode)."""
    confirms = getattr(editor, "confirms_in_editor", None)
    return bool(confirms()) if callable(confirms) else False


class ConfirmingEditor:
    """An EditApplier that sends every request as one the editor asks the
    user to confirm. Other attributes are the wrapped applier's."""

    def __init__(self, inner: EditApplier) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def apply(self, request: EditRequest) -> EditOutcome:
        return await self.inner.apply(replace(request, confirm=True))


class UnreadableDocument(OSError):
    """A file that cannot be edited as text; str() completes "it is ..."
    ("a binary file", "not UTF-8 text", "too large ...")."""


def disk_snapshot(path: str) -> DocumentSnapshot | None:
    """The file on disk as a snapshot (version None), None when it does not
    exist or is not a regular file. UnreadableDocument for binary, non-UTF-8
    or huge files. A leading UTF-8 BOM is dropped, as editors do."""
    target = Path(path)
    if not target.is_file():
        return None
    if target.stat().st_size > MAX_TEXT_CHARS * 4:
        raise UnreadableDocument("too large to edit through the editor")
    data = target.read_bytes()
    if b"\0" in data[:8192]:
        raise UnreadableDocument("a binary file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableDocument(f"not UTF-8 text ({exc.reason})") from None
    return DocumentSnapshot(uri=target.as_uri(), path=str(target), text=text, version=None)
