"""Documents over LSP for the core's edit interfaces: LspDocumentLookup
(path -> DocumentSnapshot: the open buffer with its version, else the disk,
only inside the workspace folders) and diagnostics_publisher
(textDocument/publishDiagnostics for hook modules)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import converters, types

from agentls.core.editor.edits import DocumentSnapshot, disk_snapshot
from agentls.lsp.wire.convert import position_encoding

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

__all__ = [
    "LspDocumentLookup",
    "diagnostics_publisher",
    "open_document",
    "resolved",
    "structure",
    "workspace_folders",
]

log = logging.getLogger("agentls.lsp.agent.edits")


# --------------------------------------------------------------------------- documents


class LspDocumentLookup:
    """DocumentLookup: the open buffer (text and version) for a path, else
    the disk (version None); None outside the workspace folders or when
    neither exists. Open buffers are matched by resolved path, so a buffer
    opened through a symlink is found. UnreadableDocument (an OSError) for
    binary, non-UTF-8 or huge files."""

    def __init__(self, ls: LanguageServer) -> None:
        self.ls = ls

    @property
    def position_encoding(self) -> str:
        return position_encoding(self.ls)

    def __call__(self, path: str) -> DocumentSnapshot | None:
        target = resolved(Path(path))
        if target is None or not self._inside(target):
            return None
        document = open_document(self.ls, target)
        if document is not None:
            return DocumentSnapshot(uri=document.uri, path=str(target), text=document.source,
                                    version=document.version)
        return disk_snapshot(str(target))

    def _inside(self, target: Path) -> bool:
        for folder in workspace_folders(self.ls):
            root = resolved(Path(folder))
            if root is not None and (target == root or target.is_relative_to(root)):
                return True
        return False


def open_document(ls: Any, target: Path | None) -> Any:
    if target is None:
        return None
    from pygls.uris import to_fs_path

    target = resolved(target) or target
    for document in list(ls.workspace.text_documents.values()):
        fs_path = to_fs_path(document.uri)
        if fs_path and resolved(Path(fs_path)) == target:
            return document
    return None


# --------------------------------------------------------------------------- diagnostics


def diagnostics_publisher(ls: LanguageServer) -> Callable[[str, list[Any], int | None], None]:
    """publish(uri, diagnostics, version): textDocument/publishDiagnostics
    with LSP Diagnostic dicts (or lsprotocol Diagnostics); an invalid
    diagnostic is logged and left out, an empty list clears."""

    def publish(uri: str, diagnostics: list[Any], version: int | None = None) -> None:
        items: list[types.Diagnostic] = []
        for diagnostic in diagnostics:
            if isinstance(diagnostic, types.Diagnostic):
                items.append(diagnostic)
                continue
            try:
                items.append(structure(diagnostic, types.Diagnostic))
            except Exception as exc:
                log.warning("Dropped an invalid diagnostic for %s: %s", uri, exc)
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=items, version=version))

    return publish


def structure(value: Any, cls: type[Any]) -> Any:
    return converters.get_converter().structure(value, cls)


def resolved(path: Path) -> Path | None:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return None


def workspace_folders(ls: Any) -> list[Path]:
    """The server's workspace folders (none for a server without state)."""
    host = getattr(getattr(ls, "state", None), "host", None)
    return [Path(f) for f in getattr(host, "workspace_folders", None) or []]
