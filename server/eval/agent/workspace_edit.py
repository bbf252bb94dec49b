"""The editor's side of `workspace/applyEdit` for the agent eval: a
WorkspaceEdit (plain JSON, as it arrives) written to the files of one
workspace folder on disk, as an editor with no open buffers does.

All or nothing: every change is computed first, nothing is written when one
of them cannot be applied (a path outside the folder, a range past the end
of a file, a file to create that exists). Positions are UTF-16 code units,
the encoding the eval's client negotiates (LSP's default).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

from agentls.core.editor.positions import PositionOutOfRange, offset_at

__all__ = ["EditRefused", "apply_workspace_edit"]


class EditRefused(ValueError):
    """A change this editor will not make; the message is the failure reason."""


@dataclass
class _Plan:
    root: Path
    texts: dict[Path, str | None]  # the planned content; None: deleted

    def path(self, uri: str) -> Path:
        parsed = urlparse(uri)
        if parsed.scheme != "file":
            raise EditRefused(f"not a file URI: {uri}")
        path = Path(url2pathname(unquote(parsed.path))).resolve()
        if not path.is_relative_to(self.root):
            raise EditRefused(f"{path} is outside the workspace folder")
        return path

    def text(self, path: Path) -> str | None:
        if path not in self.texts:
            self.texts[path] = _read(path)
        return self.texts[path]


def _read(path: Path) -> str | None:
    """The file's text with its line ends as they are (positions count them)."""
    if not path.is_file():
        return None
    with path.open(encoding="utf-8", newline="") as stream:
        return stream.read()


def _edited(text: str, edits: list[dict[str, Any]]) -> str:
    spans = []
    for edit in edits:
        start, end = edit["range"]["start"], edit["range"]["end"]
        try:
            spans.append((offset_at(text, start["line"], start["character"]),
                          offset_at(text, end["line"], end["character"]),
                          str(edit.get("newText", ""))))
        except PositionOutOfRange as exc:
            raise EditRefused(f"a range past the end of the file: {exc}") from None
    for begin, end, new in sorted(spans, key=lambda s: (s[0], s[1]), reverse=True):
        text = text[:begin] + new + text[end:]
    return text


def _change(plan: _Plan, change: dict[str, Any]) -> None:
    kind = change.get("kind")
    if kind == "create":
        path = plan.path(change["uri"])
        options = change.get("options") or {}
        if plan.text(path) is not None and not (options.get("overwrite")
                                                or options.get("ignoreIfExists")):
            raise EditRefused(f"{path.name} already exists")
        if plan.text(path) is None or options.get("overwrite"):
            plan.texts[path] = ""
    elif kind == "delete":
        path = plan.path(change["uri"])
        if plan.text(path) is None and not (change.get("options") or {}).get("ignoreIfNotExists"):
            raise EditRefused(f"{path.name} does not exist")
        plan.texts[path] = None
    elif kind == "rename":
        old, new = plan.path(change["oldUri"]), plan.path(change["newUri"])
        text = plan.text(old)
        if text is None:
            raise EditRefused(f"{old.name} does not exist")
        if plan.text(new) is not None and not (change.get("options") or {}).get("overwrite"):
            raise EditRefused(f"{new.name} already exists")
        plan.texts[new], plan.texts[old] = text, None
    else:  # a TextDocumentEdit
        _text_edits(plan, change["textDocument"]["uri"], change.get("edits") or [])


def _text_edits(plan: _Plan, uri: str, edits: list[dict[str, Any]]) -> None:
    path = plan.path(uri)
    text = plan.text(path)
    if text is None:
        raise EditRefused(f"{path.name} does not exist")
    plan.texts[path] = _edited(text, edits)


def apply_workspace_edit(edit: dict[str, Any], root: Path) -> list[Path]:
    """Write `edit` under `root`; the files changed. EditRefused (nothing
    written) when a change cannot be made."""
    plan = _Plan(root.resolve(), {})
    try:
        for change in edit.get("documentChanges") or []:
            _change(plan, change)
        for uri, edits in (edit.get("changes") or {}).items():
            _text_edits(plan, uri, edits)
    except (KeyError, TypeError) as exc:
        raise EditRefused(f"a malformed WorkspaceEdit ({type(exc).__name__}: {exc})") from None
    changed = []
    for path, text in plan.texts.items():
        if text == _read(path):
            continue
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("w", encoding="utf-8", newline="") as stream:
                stream.write(text)
        changed.append(path)
    return changed
