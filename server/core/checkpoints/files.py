"""Checkpoints: put the files a turn changed back as they were before it
(docs/protocol.md, "Checkpoints").

Recording: for each turn the orchestrator wraps the tools' edit applier in
a `CheckpointingEditor`. Before an edit goes to the editor it stores the
text (or absence) of every path the edit touches that the turn has not
touched yet, and the hash the edit will leave; once the editor answers, the
hash of what the agent wrote. Only edits made through the editor are seen:
files `run_command` changes are outside checkpoints.

Restoring: `plan_restore` turns the stored files of a turn and every later
turn into one WorkspaceEdit that puts each file back (text replaced,
deleted files re-created, created files deleted; a renamed file whose new
path still has its old text is renamed back, so the editor keeps its
buffer). A file changed by someone else since the agent's last
write, now outside the workspace, a folder, or unreadable is a conflict and
left alone (the first kind only unless forced). `restore_turn` puts the
restore to the approval gate like a `write_file` (core/approval/gate.py: the
policy resolves every path and its parents again, now; a path that leads
outside is refused, a hard-linked file is refused, a protected or secret
file asks; anything else needs no question, since the user asked), then
sends the edit through the applier the LSP layer gives it (the one tool
edits use).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentls.core.approval.gate import ApprovalGate, ApprovalPolicy, ApprovalQuestion, decide
from agentls.core.checkpoints.store import CheckpointStore, TrackedFile, content_hash
from agentls.core.editor.edits import (
    DocumentLookup,
    DocumentSnapshot,
    EditApplier,
    EditOutcome,
    EditRequest,
    editor_confirms,
)
from agentls.core.tools.contract import ToolContext, ToolNeed
from agentls.core.types.conversation import Message
from agentls.core.types.errors import AgentlsError

__all__ = [
    "OUTSIDE_CHECKPOINTS_NOTE",
    "CheckpointingEditor",
    "Conflict",
    "NoCheckpoint",
    "RestoreOutcome",
    "RestorePlan",
    "TurnCheckpoints",
    "current_text",
    "plan_restore",
    "prompt_turn",
    "restore_need",
    "restore_request",
    "restore_turn",
]

log = logging.getLogger("agentls.checkpoints")

OUTSIDE_CHECKPOINTS_NOTE = (
    "Only changes made through the agent's file tools are checkpointed; files changed by "
    "run_command (builds, formatters, scripts) are outside checkpoints and were not restored."
)


def prompt_turn(messages: Iterable[Message]) -> int:
    """The turn number of the newest prompt: how many prompts the user sent
    in the session (the Nth user entry the chat views show). Injected
    context (hooks, compaction summaries) carries a metadata `source` and is
    not a prompt."""
    return sum(1 for m in messages
               if m.role == "user" and not (m.metadata or {}).get("source"))


class TurnCheckpoints:
    """The checkpoint of one turn: which files it has stored so far."""

    def __init__(self, store: CheckpointStore, session_id: str, turn: int,
                 message_index: int) -> None:
        self.store = store
        self.session_id = session_id
        self.turn = turn
        self.message_index = message_index
        self.stored: set[str] = set()  # paths whose "before" is stored
        self.changed: set[str] = set()  # paths an applied edit of this turn changed

    @classmethod
    def for_prompt(cls, store: CheckpointStore | None, session_id: str,
                   messages: list[Message]) -> TurnCheckpoints | None:
        """The checkpoint of the turn whose prompt is the last of `messages`
        (None without a store: nothing is recorded)."""
        if store is None:
            return None
        return cls(store, session_id, prompt_turn(messages), len(messages) - 1)

    def wrap(self, context: ToolContext) -> ToolContext:
        """The tool context with its editor recording into this checkpoint."""
        editor = context.editor
        if editor is None or isinstance(editor, CheckpointingEditor):
            return context
        return replace(context, editor=CheckpointingEditor(editor, self, context.snapshots))


class CheckpointingEditor:
    """An EditApplier that stores what it is about to change first.

    Other attributes (position_encoding, ...) are the wrapped applier's."""

    def __init__(self, inner: EditApplier, turn: TurnCheckpoints,
                 lookup: DocumentLookup | None) -> None:
        self.inner = inner
        self.turn = turn
        self.lookup = lookup

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def apply(self, request: EditRequest) -> EditOutcome:
        turn = self.turn
        paths = list(dict.fromkeys([*request.paths, *request.after]))
        new = [p for p in paths if p not in turn.stored]
        try:
            before = {p: await asyncio.to_thread(current_text, p, self.lookup) for p in new}
        except OSError as exc:
            return EditOutcome(applied=False, code="failed", reason=(
                f"agentls could not keep a copy of the file to restore it later ({exc}). "
                "Nothing was written."))
        pending = {p: content_hash(text) for p, text in request.after.items()}
        try:
            await asyncio.to_thread(turn.store.save_before, turn.session_id, turn.turn,
                                    turn.message_index, before, pending)
        except Exception as exc:  # SessionStoreError (disk full, locked) or a bug
            log.warning("Checkpoint of %s not saved: %s", request.label, exc)
            return EditOutcome(applied=False, code="failed", reason=(
                f"agentls could not save a checkpoint before changing the file ({exc}), so "
                "the change could not be undone later. Nothing was written."))
        turn.stored.update(before)
        # Cancelled while the editor is asked: the row and its pending hash
        # stay, since the editor may have applied the edit all the same.
        outcome = await self.inner.apply(request)
        written: dict[tuple[int, str], str | None] = {}
        for path in paths:
            digest = None
            if outcome.applied:
                digest = await self._written_hash(request, path)
                turn.changed.add(path)
            written[(turn.turn, path)] = digest
        # A file whose only edits in this turn were declined is not part of it.
        dropped = [] if outcome.applied else [
            (turn.turn, p) for p in new if p not in turn.changed]
        try:
            await asyncio.to_thread(turn.store.settle, turn.session_id, written, dropped=dropped)
        except Exception:
            # The edit stands; its pending hash still marks it as the agent's.
            log.exception("Checkpoint of %s not settled", request.label)
        turn.stored.difference_update(p for _, p in dropped)
        return outcome

    async def _written_hash(self, request: EditRequest, path: str) -> str | None:
        if path in request.after:
            return content_hash(request.after[path])
        try:  # an edit that did not say what it leaves: read it back
            return content_hash(await asyncio.to_thread(current_text, path, self.lookup))
        except OSError:
            return None


def current_text(path: str, lookup: DocumentLookup | None) -> str | None:
    """The file as the agent sees it: the open buffer, else the disk; None
    when it does not exist. OSError when it cannot be read as text."""
    if lookup is not None:
        snapshot = lookup(path)
        return snapshot.text if snapshot is not None and snapshot.exists else None
    try:
        with open(path, encoding="utf-8", newline="") as file:  # line ends as they are
            return file.read()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise OSError(f"{path} is not UTF-8 text") from exc


# --------------------------------------------------------------------------- restoring


@dataclass(frozen=True)
class Conflict:
    path: str
    reason: str


@dataclass
class RestorePlan:
    """One WorkspaceEdit putting every restorable file back, and what it does."""

    edit: dict[str, Any]
    base_versions: dict[str, int | None] = field(default_factory=dict)
    restored: list[str] = field(default_factory=list)  # absolute paths
    conflicts: list[Conflict] = field(default_factory=list)
    # (latest turn, path) -> the hash each restored file will hold
    hashes: dict[tuple[int, str], str] = field(default_factory=dict)
    after: dict[str, str | None] = field(default_factory=dict)

    @property
    def changes(self) -> list[dict[str, Any]]:
        changes: list[dict[str, Any]] = self.edit["documentChanges"]
        return changes


def plan_restore(
    files: Iterable[TrackedFile],
    lookup: DocumentLookup,
    inside_workspace: Callable[[Path], bool],
    *,
    force: bool = False,
    encoding: str = "utf-16",
    shown: Callable[[str], str] = str,
) -> RestorePlan:
    """The edit that puts `files` back as they were (see the module doc)."""
    plan = RestorePlan(edit={"documentChanges": []})
    creates: list[TrackedFile] = []  # absent now, existed before
    deletes: list[tuple[TrackedFile, DocumentSnapshot]] = []  # exist now, did not before
    for tracked in files:
        path = tracked.path
        name = shown(path)
        if not inside_workspace(Path(os.path.realpath(path))):
            plan.conflicts.append(Conflict(path, f"{name} is outside the workspace folders now "
                                           "(or a folder on its way is a link out of them); "
                                           "left alone."))
            continue
        if os.path.isdir(path):
            plan.conflicts.append(Conflict(path, f"{name} is a folder now; left alone."))
            continue
        try:
            snapshot = lookup(path)
        except OSError as exc:  # binary, not UTF-8, too large
            plan.conflicts.append(Conflict(path, f"{name} cannot be read as text now ({exc}); "
                                           "left alone."))
            continue
        if snapshot is not None and not snapshot.exists:
            snapshot = None
        current = snapshot.text if snapshot is not None else None
        if not force and not tracked.is_agents(content_hash(current)):
            plan.conflicts.append(Conflict(path, f"{name} was changed by someone else since the "
                                           "agent last wrote it; left alone (restore with force "
                                           "to overwrite it)."))
            continue
        target = tracked.before
        plan.restored.append(path)
        plan.hashes[(tracked.latest_turn, path)] = content_hash(target)
        plan.after[path] = target
        if current == target:
            continue  # already as it was
        if snapshot is None:
            creates.append(tracked)
        elif target is None:
            deletes.append((tracked, snapshot))
        else:
            plan.base_versions[snapshot.uri] = snapshot.version
            plan.changes.append(_replace_all(snapshot, target, encoding))
    # A file that is gone and one that appeared with its exact text are a
    # rename to undo: renamed back, the editor keeps the buffer (and undo).
    renames: list[dict[str, Any]] = []
    for tracked in list(creates):
        match = next(((t, snap) for t, snap in deletes if snap.text == tracked.before), None)
        if match is None:
            continue
        creates.remove(tracked)
        deletes.remove(match)
        plan.base_versions[match[1].uri] = match[1].version
        plan.base_versions[Path(tracked.path).as_uri()] = None
        renames.append({"kind": "rename", "oldUri": match[1].uri,
                        "newUri": Path(tracked.path).as_uri(),
                        "options": {"overwrite": False, "ignoreIfExists": False}})
    plan.changes.extend(renames)
    for _, snapshot in deletes:  # created since: remove
        plan.base_versions[snapshot.uri] = snapshot.version
        plan.changes.append({"kind": "delete", "uri": snapshot.uri,
                             "options": {"recursive": False, "ignoreIfNotExists": False}})
    for tracked in creates:  # deleted since: create again
        uri = Path(tracked.path).as_uri()
        plan.base_versions[uri] = None
        plan.changes.append({"kind": "create", "uri": uri,
                             "options": {"overwrite": False, "ignoreIfExists": False}})
        if tracked.before:
            start = {"line": 0, "character": 0}
            plan.changes.append({"textDocument": {"uri": uri, "version": None},
                                 "edits": [{"range": {"start": start, "end": start},
                                            "newText": tracked.before}]})
    return plan


def _replace_all(snapshot: DocumentSnapshot, text: str, encoding: str) -> dict[str, Any]:
    """A TextDocumentEdit replacing the whole document (at its version)."""
    end = _end_position(snapshot.text, encoding)
    return {
        "textDocument": {"uri": snapshot.uri, "version": snapshot.version},
        "edits": [{"range": {"start": {"line": 0, "character": 0}, "end": end},
                   "newText": text}],
    }


def _end_position(text: str, encoding: str) -> dict[str, int]:
    """The LSP position just past the end of `text`."""
    line = text.count("\n") + text.count("\r") - text.count("\r\n")
    last = max(text.rfind("\n"), text.rfind("\r"))
    tail = text[last + 1:]
    kind = encoding.lower()
    if kind == "utf-8":
        units = len(tail.encode("utf-8", "surrogatepass"))
    elif kind == "utf-32":
        units = len(tail)
    else:
        units = len(tail) + sum(1 for ch in tail if ord(ch) > 0xFFFF)
    return {"line": line, "character": units}


RESTORE_TOOL = "restoreCheckpoint"


def restore_request(session_id: str, turn: int, plan: RestorePlan,
                    shown: Callable[[str], str] = str, *, confirm: bool = False) -> EditRequest:
    """The restore as the edit the applier sends (`confirm`: the editor asks)."""
    names = [shown(p) for p in plan.restored]
    return EditRequest(
        tool_name=RESTORE_TOOL,
        session_id=session_id,
        label=f"agentls: restore checkpoint (before turn {turn})",
        edit=plan.edit,
        preview="Restore to before turn {}: {}".format(turn, ", ".join(names)),
        paths=tuple(plan.restored),
        base_versions=dict(plan.base_versions),
        confirm=confirm,
        after=dict(plan.after),
    )


def restore_need(request: EditRequest) -> ToolNeed:
    """What the gate is asked about a restore: an edit of every restored
    path, asked for by the user."""
    return ToolNeed("edit", request.paths, by_user=True, title=request.label,
                    preview=request.preview)


class NoCheckpoint(AgentlsError):
    """The session has no checkpoint for this turn."""

    def __init__(self, session_id: str, turn: int, turns: Sequence[int]) -> None:
        listed = ", ".join(str(t) for t in turns) or "none"
        super().__init__(
            f"Session {session_id} has no checkpoint for turn {turn} (turns with checkpoints: "
            f"{listed}). Only turns that changed files have one; list them with "
            "agentls/checkpoints.")


@dataclass(frozen=True)
class RestoreOutcome:
    restored: list[str]  # absolute paths now as they were before the turn
    conflicts: list[Conflict]  # left alone, with why


async def restore_turn(
    store: CheckpointStore,
    session_id: str,
    turn: int,
    *,
    editor: EditApplier,
    lookup: DocumentLookup,
    workspace_folders: Sequence[str | Path],
    gate: ApprovalGate,
    policies: Sequence[ApprovalPolicy] = (),
    force: bool = False,
    encoding: str = "utf-16",
    shown: Callable[[str], str] = str,
) -> RestoreOutcome:
    """Put the files of `turn` and every later turn back (the module doc):
    plan, clear it with the approval `gate` and `policies` like a file
    edit, store what the edit will leave, send it through `editor`, then
    store what it left. NoCheckpoint, SessionNotFound, SessionStoreError."""
    files = await asyncio.to_thread(store.files_since, session_id, turn)
    if files is None:
        listed = await asyncio.to_thread(store.list_checkpoints, session_id)
        raise NoCheckpoint(session_id, turn, [c.turn for c in listed])

    def make_plan() -> RestorePlan:  # reads the disk: off the event loop, like the tools
        roots = [Path(os.path.realpath(f)) for f in workspace_folders]
        return plan_restore(files, lookup,
                            lambda real: any(real == r or r in real.parents for r in roots),
                            force=force, encoding=encoding, shown=shown)

    plan = await asyncio.to_thread(make_plan)
    if not plan.changes:  # everything restorable is as it was already
        await asyncio.to_thread(store.settle, session_id, dict(plan.hashes))
        return RestoreOutcome(list(plan.restored), list(plan.conflicts))
    request = restore_request(session_id, turn, plan, shown)
    question = ApprovalQuestion(RESTORE_TOOL, {"sessionId": session_id, "turn": turn,
                                               "force": force},
                                restore_need(request), session_id)
    clearance = await gate.clearance(question, decide(policies, question),
                                 editor_confirms=editor_confirms(editor))
    if not clearance.allowed:
        refused = [Conflict(p, f"{shown(p)}: {clearance.reason}") for p in plan.restored]
        return RestoreOutcome([], [*plan.conflicts, *refused])
    if clearance.confirm_in_editor:
        request = replace(request, confirm=True)
    # Stored first: a crash once the editor applied it must not make the
    # restored files look like someone else's change.
    await asyncio.to_thread(store.set_pending, session_id, plan.hashes)
    outcome = await editor.apply(request)
    if outcome.applied:
        await asyncio.to_thread(store.settle, session_id, dict(plan.hashes))
        return RestoreOutcome(list(plan.restored), list(plan.conflicts))
    await asyncio.to_thread(store.settle, session_id, dict.fromkeys(plan.hashes))
    refused = [Conflict(p, f"{shown(p)}: {outcome.reason}") for p in plan.restored]
    return RestoreOutcome([], [*plan.conflicts, *refused])
