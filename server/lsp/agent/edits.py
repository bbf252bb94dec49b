"""File changes through the editor: the LSP side of the core's edit
interfaces (agentls.core.editor.edits; docs/protocol.md, "Tool calls become
workspace edits").

- LspEditApplier: renders and applies, never decides (the approval gate,
  core/approval/gate.py, decided before the tool ran whether the user is asked).
  - `annotation` mode (`approval.mode` auto picks it when the client
    advertises workspace.workspaceEdit.changeAnnotationSupport and
    documentChanges; `confirms_in_editor()` tells the gate): every change
    carries the annotation `agentls` (AnnotatedTextEdit, annotationId on
    resource operations) and the `changeAnnotations` map is always sent:
    {label, needsConfirmation (the request's `confirm`: the gate wants the
    user asked), description: the preview}. The editor's own review UI asks.
  - `message` mode: a plain applyEdit (the gate asked with
    window/showMessageRequest before the tool ran).
  - `check(request)`: what the editor cannot do (no applyEdit, a resource
    operation it lacks) or a path that now leads outside the workspace or
    has other hard links, before anyone is asked; `apply` checks again.
  - Right before applyEdit every document's version is compared with the
    one the edit was computed from; a moved document refuses the edit
    (code "stale"). So does a file that appeared (create) or vanished
    (delete, rename) in the meantime.
- LspDocumentLookup and diagnostics_publisher live in documents.py (and
  are importable from here).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote

from lsprotocol import types

from agentls.core.approval.documents import shown_question
from agentls.core.approval.gate import EDIT_OPTIONS, ApprovalGate
from agentls.core.editor.edit_paths import unsafe_edit_path
from agentls.core.editor.edits import EditOutcome, EditRequest
from agentls.lsp.agent.channels import send_request
from agentls.lsp.agent.documents import (
    open_document,
    resolved,
    structure,
    workspace_folders,
)
from agentls.lsp.wire.convert import position_encoding

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

    from agentls.core.settings.schema import ApprovalSettings

__all__ = ["ANNOTATION_ID", "APPROVAL_ACTIONS", "LspEditApplier", "end_session_approvals"]

log = logging.getLogger("agentls.lsp.agent.edits")

APPROVAL_ACTIONS = tuple(option.label for option in EDIT_OPTIONS)
ANNOTATION_ID = "agentls"

ApprovalMode = Literal["annotation", "message"]


def _outcome(code: str, reason: str) -> EditOutcome:
    return EditOutcome(applied=False, reason=reason, code=code)


class LspEditApplier:
    """EditApplier over LSP (see the module docstring)."""

    def __init__(self, ls: LanguageServer) -> None:
        self.ls = ls
        self._warned_mode = False

    # -- capabilities and settings -------------------------------------------------
    @property
    def position_encoding(self) -> str:
        return position_encoding(self.ls)

    def _settings(self) -> ApprovalSettings:
        state = getattr(self.ls, "state", None)
        if state is None:
            from agentls.core.settings.schema import ApprovalSettings

            return ApprovalSettings()
        settings: ApprovalSettings = state.host.settings.approval
        return settings

    def _edit_caps(self) -> types.WorkspaceEditClientCapabilities | None:
        workspace = _client_workspace(self.ls)
        return workspace.workspace_edit if workspace is not None else None

    def supports_apply_edit(self) -> bool:
        workspace = _client_workspace(self.ls)
        return bool(workspace is not None and workspace.apply_edit)

    def supports_document_changes(self) -> bool:
        caps = self._edit_caps()
        return bool(caps is not None and caps.document_changes)

    def supports_annotations(self) -> bool:
        caps = self._edit_caps()
        return bool(caps is not None and caps.document_changes
                    and caps.change_annotation_support is not None)

    def resource_operations(self) -> set[str]:
        caps = self._edit_caps()
        if caps is None or not caps.document_changes or not caps.resource_operations:
            return set()
        return {str(getattr(op, "value", op)) for op in caps.resource_operations}

    def mode(self) -> ApprovalMode:
        """`approval.mode`, with auto resolved by the client's capabilities.
        A forced `annotation` the client cannot honour falls back to
        `message`: an editor ignoring annotations would apply unasked."""
        configured = self._settings().mode
        if configured == "message":
            return "message"
        if self.supports_annotations():
            return "annotation"
        if configured == "annotation" and not self._warned_mode:
            self._warned_mode = True
            log.warning("approval.mode is annotation but the client does not advertise "
                        "changeAnnotationSupport; asking with showMessageRequest instead")
        return "message"

    def confirms_in_editor(self) -> bool:
        """Whether the editor asks the user before applying an edit itself
        (annotation mode): the gate then sends the question with the edit."""
        return self.mode() == "annotation"

    # -- EditApplier ------------------------------------------------------------------
    def check(self, request: EditRequest) -> EditOutcome | None:
        """A refusal before anyone is asked: the editor cannot apply the
        edit, or a path of it leads outside the workspace."""
        if not self.supports_apply_edit():
            return _outcome("unsupported", "The editor does not support workspace/applyEdit, so "
                            "agentls cannot change files in it. Nothing was written.")
        missing = self._missing_operations(request.edit)
        if missing:
            return _outcome("unsupported", f"The editor does not support {missing} through "
                            "workspace edits (workspace.workspaceEdit.resourceOperations), so "
                            "this change cannot be made here. Nothing was written.")
        return self.unsafe(request)

    async def apply(self, request: EditRequest) -> EditOutcome:
        refused = self.check(request)
        if refused is not None:
            return refused
        settings = self._settings()
        mode = self.mode()
        if request.confirm and mode != "annotation":
            # The gate chose the editor's review UI; it is gone (settings changed).
            return _outcome("failed", "The editor can no longer confirm changes itself "
                            "(approval.mode changed while asking). Nothing was written; try "
                            "the change again.")
        stale = self.stale(request)
        if stale is not None:
            return stale
        if mode == "annotation":
            edit = self.annotated(request, needs_confirmation=request.confirm)
        else:
            edit = self.plain(request.edit)
        # The didChange the editor sends for this edit is the agent's, not
        # the user's: next edit suggestions must not learn from it.
        agent_texts = _agent_texts(edit)
        history = getattr(getattr(self.ls, "state", None), "edit_history", None)
        for uri, texts in agent_texts.items():
            if history is not None:
                history.agent_edit_started(uri, texts)
        try:
            result = await send_request(
                self.ls, types.WORKSPACE_APPLY_EDIT,
                types.ApplyWorkspaceEditParams(edit=structure(edit, types.WorkspaceEdit),
                                               label=shown_question(request.label)),
                settings.timeout_seconds)
        except TimeoutError:
            return _outcome("timeout", f"The editor did not answer within "
                            f"{settings.timeout_seconds:g} s (approval.timeoutSeconds); the "
                            "change is treated as not applied. If the editor still applies it, "
                            "read the file again before changing it further.")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("workspace/applyEdit failed: %s", exc)
            return _outcome("failed", f"The editor refused the edit ({exc}). Nothing was "
                            "written.")
        finally:
            for uri in agent_texts:
                if history is not None:
                    history.agent_edit_finished(uri)
        if getattr(result, "applied", False):
            return EditOutcome(applied=True)
        stale = self.stale(request)
        if stale is not None:
            return stale
        detail = getattr(result, "failure_reason", None)
        why = f" ({detail})" if detail else ""
        return _outcome("failed", f"The editor did not apply the change{why}: the user declined "
                        "it or the editor refused it. Nothing was written.")

    def unsafe(self, request: EditRequest) -> EditOutcome | None:
        """A refusal when a path of the edit now leads outside the workspace
        folders (a parent swapped for a symlink), or when a file whose text
        would change has other hard links (one may be outside)."""
        from pygls.uris import to_fs_path

        folders = workspace_folders(self.ls)
        if not folders:
            return None  # the policy already refused file changes without a folder
        found = unsafe_edit_path(request.edit, folders, to_fs_path)
        if found is None:
            return None
        shown = _shown_path(self.ls, found.path)
        if not found.hard_links:
            log.warning("Refused %s: %s now leads to %s", request.label, found.path,
                        os.path.realpath(found.path))
            return _outcome("unsafe", f"{shown} now leads outside the workspace (a folder on its "
                            "way was replaced by a link). Nothing was written.")
        return _outcome("unsafe", f"{shown} has {found.hard_links} hard links; another one may "
                        "be outside the workspace, so agentls will not change it. Nothing was "
                        "written. Tell the user, who can edit it by hand.")

    # -- the edit ------------------------------------------------------------------------
    def _missing_operations(self, edit: dict[str, Any]) -> str:
        needed = {str(change["kind"]) for change in edit.get("documentChanges") or []
                  if isinstance(change, dict) and "kind" in change}
        if not needed:
            return ""
        missing = sorted(needed - self.resource_operations())
        names = {"create": "creating files", "rename": "renaming files",
                 "delete": "deleting files"}
        return " or ".join(names.get(kind, kind) for kind in missing)

    def plain(self, edit: dict[str, Any]) -> dict[str, Any]:
        """The edit as is, or in `changes` form for a client without
        documentChanges (text edits only; resource operations were refused)."""
        changes = edit.get("documentChanges")
        if changes is None or self.supports_document_changes():
            return edit
        by_uri: dict[str, list[Any]] = {}
        for change in changes:
            uri = change["textDocument"]["uri"]
            by_uri.setdefault(uri, []).extend(change["edits"])
        return {"changes": by_uri}

    def annotated(self, request: EditRequest, *, needs_confirmation: bool) -> dict[str, Any]:
        edit = copy.deepcopy(request.edit)
        for change in edit.get("documentChanges") or []:
            if "kind" in change:
                change["annotationId"] = ANNOTATION_ID
            else:
                for text_edit in change.get("edits") or []:
                    text_edit["annotationId"] = ANNOTATION_ID
        for text_edits in (edit.get("changes") or {}).values():
            for text_edit in text_edits:
                text_edit["annotationId"] = ANNOTATION_ID
        edit["changeAnnotations"] = {
            # The editor's confirmation is a question too: nothing in a path
            # or the diff may hide itself (docs/security.md, "Long questions").
            ANNOTATION_ID: {"label": shown_question(request.label),
                            "needsConfirmation": needs_confirmation,
                            "description": shown_question(request.preview)},
        }
        return edit

    def stale(self, request: EditRequest) -> EditOutcome | None:
        """A refusal when a document moved since the edit was computed."""
        for uri, base in request.base_versions.items():
            shown = _shown(self.ls, uri)
            if base is not None:
                document = self.ls.workspace.text_documents.get(unquote(uri))
                if document is None:
                    return _outcome("stale", f"{shown} was closed in the editor since it was "
                                    "read. Nothing was written. Read it again (read_file) and "
                                    "redo the change.")
                if document.version != base:
                    return _outcome("stale", f"{shown} changed in the editor since it was read "
                                    f"(version {base}, now {document.version}). Nothing was "
                                    "written. Read the file again (read_file) and redo the change "
                                    "against its current content.")
            elif open_document(self.ls, _path_of(uri)) is not None:
                return _outcome("stale", f"{shown} was opened in the editor since it was read "
                                "from disk. Nothing was written. Read it again (read_file) and "
                                "redo the change.")
        for change in request.edit.get("documentChanges") or []:
            kind = change.get("kind") if isinstance(change, dict) else None
            if kind == "create":
                path = _path_of(change["uri"])
                if path is not None and (path.exists() or open_document(self.ls, path)):
                    shown = _shown(self.ls, change["uri"])
                    return _outcome("stale", f"{shown} exists now; it did not when the change "
                                    "was made. Nothing was written. Read it (read_file) and "
                                    "edit it instead.")
            elif kind in ("delete", "rename"):
                uri = change["uri"] if kind == "delete" else change["oldUri"]
                path = _path_of(uri)
                if path is not None and not path.exists() and not open_document(self.ls, path):
                    shown = _shown(self.ls, uri)
                    return _outcome("stale", f"{shown} no longer exists. Nothing was written. "
                                    "List the files again (list_files).")
        return None


def end_session_approvals(ls: Any, session_id: str | None = None) -> None:
    """Forget "Allow for session" answers when a session ends (None: all)."""
    host = getattr(getattr(ls, "state", None), "host", None)
    gate = getattr(host, "gate", None)
    if isinstance(gate, ApprovalGate):
        gate.forget(session_id)


# --------------------------------------------------------------------------- helpers


def _client_workspace(ls: Any) -> types.WorkspaceClientCapabilities | None:
    try:
        capabilities = ls.client_capabilities
    except Exception:
        return None
    workspace: types.WorkspaceClientCapabilities | None = getattr(capabilities, "workspace", None)
    return workspace


def _path_of(uri: str) -> Path | None:
    from pygls.uris import to_fs_path

    fs_path = to_fs_path(uri)
    return resolved(Path(fs_path)) if fs_path else None


def _shown(ls: Any, uri: str) -> str:
    """A document as the agent knows it: relative to its workspace folder."""
    path = _path_of(uri)
    if path is None:
        return uri
    for index, folder in enumerate(workspace_folders(ls)):
        root = resolved(Path(folder))
        if root is not None and path.is_relative_to(root):
            rel = path.relative_to(root).as_posix()
            return rel if index == 0 else f"{root.name}/{rel}"
    return str(path)


def _shown_path(ls: Any, raw: str) -> str:
    from pygls.uris import from_fs_path

    uri = from_fs_path(raw)
    return _shown(ls, uri) if uri else raw


def _agent_texts(edit: dict[str, Any]) -> dict[str, list[str]]:
    """Document key (unquoted URI) -> the new texts of the edit's TextEdits."""
    found: dict[str, list[str]] = {}
    pairs: list[tuple[str, Any]] = [
        (change["textDocument"]["uri"], change.get("edits") or [])
        for change in edit.get("documentChanges") or []
        if isinstance(change, dict) and "textDocument" in change]
    pairs += list((edit.get("changes") or {}).items())
    for uri, text_edits in pairs:
        found.setdefault(unquote(uri), []).extend(
            str(e.get("newText", "")) for e in text_edits if isinstance(e, dict))
    return found
