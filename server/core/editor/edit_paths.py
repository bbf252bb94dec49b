"""Which files an LSP WorkspaceEdit touches, and whether it may still be
written there: the check every front's EditApplier makes just before it
applies an edit (lsp/agent/edits.py, acp/files.py).

An edit was planned against paths inside the workspace, but between the
plan and the write a folder on the way may have been swapped for a link
(the path now leads outside), or a file may have gained another hard link
(a name outside the workspace for the same bytes). Either way nothing is
written. Each front words the refusal itself; `to_path` turns a URI into a
file path the way that front does (pygls for LSP).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["UnsafeEditPath", "edit_uris", "text_edited_uris", "unsafe_edit_path"]

UriToPath = Callable[[str], str | None]


def _document_changes(edit: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in edit.get("documentChanges") or [] if isinstance(c, dict)]


def text_edited_uris(edit: dict[str, Any]) -> list[str]:
    """URIs whose text the edit changes (TextDocumentEdits and the `changes`
    form), not files it only creates, deletes or renames."""
    uris = [c["textDocument"]["uri"] for c in _document_changes(edit) if "textDocument" in c]
    return uris + list((edit.get("changes") or {}).keys())


def edit_uris(edit: dict[str, Any]) -> list[str]:
    """Every URI the edit touches: edited, created, deleted, renamed from and to."""
    uris: list[str] = list((edit.get("changes") or {}).keys())
    for change in _document_changes(edit):
        if "textDocument" in change:
            uris.append(change["textDocument"]["uri"])
        uris += [change[key] for key in ("uri", "oldUri", "newUri") if key in change]
    return uris


@dataclass(frozen=True)
class UnsafeEditPath:
    path: str  # as the edit names it
    hard_links: int = 0  # 0: the path now leads outside the workspace folders


def unsafe_edit_path(edit: dict[str, Any], folders: Sequence[str | os.PathLike[str]],
                     to_path: UriToPath) -> UnsafeEditPath | None:
    """The first path of `edit` that must not be written now: one that leads
    outside `folders` once every link is resolved (checked when folders are
    given), or a regular file whose text would change and that has other
    hard links. None: the edit may be applied."""
    real_folders = [Path(os.path.realpath(f)) for f in folders]
    if real_folders:
        for raw in filter(None, map(to_path, edit_uris(edit))):
            real = Path(os.path.realpath(raw))
            if not any(real == f or f in real.parents for f in real_folders):
                return UnsafeEditPath(raw)
    for raw in filter(None, map(to_path, text_edited_uris(edit))):
        try:
            info = os.lstat(raw)
        except OSError:
            continue
        if os.path.isfile(raw) and not os.path.islink(raw) and info.st_nlink > 1:
            return UnsafeEditPath(raw, info.st_nlink)
    return None
