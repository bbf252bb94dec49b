"""File reads and changes for the ACP front: the core's EditApplier and
document lookups, through the client when it advertises it.

- Reads (`documents`, `snapshots`): `fs/read_text_file` when the client
  advertises fs.readTextFile (it answers with the editor's buffer when the
  file is open), called from the tools' worker threads; the disk otherwise,
  or when the client does not answer. The size limit comes first: a file
  larger on disk than a read keeps is not asked for (the disk is read, as
  far as the reader's own limit), the request carries a `limit` in lines,
  and a larger answer is refused (the disk again).
- Changes (`apply`): whether the user is asked was decided before by the
  approval gate; this only applies. Each file's new text comes from the
  request's `after` map (what the file tools and a checkpoint restore say
  every path will hold). Text goes through `fs/write_text_file` when the
  client advertises fs.writeTextFile, so the editor's buffers and undo see
  it, else to disk. Deletes and renames, which ACP has no method for,
  happen on disk. Before anything is written the same checks as the LSP
  applier: a path that now leads outside the workspace folders, a file
  with other hard links, a file created or removed in the meantime.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from agentls.acp import updates
from agentls.acp.channels import ClientLink
from agentls.core.editor.edit_paths import unsafe_edit_path
from agentls.core.editor.edits import (
    MAX_TEXT_CHARS,
    DocumentSnapshot,
    EditOutcome,
    EditRequest,
    UnreadableDocument,
    disk_snapshot,
)

__all__ = ["AcpFiles"]

log = logging.getLogger("agentls.acp.files")

CLIENT_SECONDS = 30.0
# The most a read takes through the client: what the largest reader keeps
# (reply edits merge files up to 200,000 characters, 4 UTF-8 bytes each at
# most). Edits' snapshots take what an edit may change (MAX_TEXT_CHARS).
READ_MAX_BYTES = 1024 * 1024
SNAPSHOT_MAX_BYTES = MAX_TEXT_CHARS * 4


def _refused(code: str, reason: str) -> EditOutcome:
    return EditOutcome(applied=False, reason=reason, code=code)


class AcpFiles:
    """EditApplier and document lookups of one workspace."""

    position_encoding = "utf-16"

    def __init__(self, link: ClientLink, folders: Sequence[Path],
                 session_for: Callable[[], str | None],
                 loop: asyncio.AbstractEventLoop) -> None:
        self.link = link
        self.folders = [Path(os.path.realpath(f)) for f in folders]
        self.session_for = session_for
        self.loop = loop

    # -- reads ------------------------------------------------------------------------
    def documents(self, path: Path) -> str | None:
        """The editor's text of `path` when the client can tell; None: read the disk."""
        return self._client_text(Path(path), READ_MAX_BYTES)

    def _client_text(self, path: Path, max_bytes: int) -> str | None:
        """`fs/read_text_file` of `path` when it is a regular file of at
        most `max_bytes` on disk and the answer is no larger; else None."""
        sid = self.session_for()
        if not self.link.fs_read or self.link.conn is None or sid is None:
            return None
        try:
            asyncio.get_running_loop()
            return None  # on the event loop itself: waiting here would block it
        except RuntimeError:
            pass
        try:
            found = os.stat(path)
        except (OSError, ValueError):
            return None
        if not stat.S_ISREG(found.st_mode) or found.st_size > max_bytes:
            return None
        # A file within max_bytes has at most max_bytes + 1 lines: the limit
        # keeps the client from sending a buffer that grew past it.
        future = asyncio.run_coroutine_threadsafe(
            self.link.conn.read_text_file(session_id=sid, path=str(path),
                                          limit=max_bytes + 1), self.loop)
        try:
            text = str(future.result(CLIENT_SECONDS).content)
        except Exception as exc:  # the disk then
            future.cancel()
            log.info("fs/read_text_file %s failed: %s", path, exc)
            return None
        if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
            log.info("fs/read_text_file %s: the answer is over %d bytes; the disk is read",
                     path, max_bytes)
            return None
        return text

    def snapshots(self, path: str) -> DocumentSnapshot | None:
        text = self._client_text(Path(path), SNAPSHOT_MAX_BYTES)
        if text is None:
            return disk_snapshot(path)
        target = Path(path)
        return DocumentSnapshot(uri=target.as_uri(), path=str(target), text=text, version=None)

    # -- EditApplier ------------------------------------------------------------------
    def check(self, request: EditRequest) -> EditOutcome | None:
        found = unsafe_edit_path(request.edit, self.folders, _path)
        if found is None:
            return None
        if not found.hard_links:
            return _refused("unsafe", f"{found.path} now leads outside the workspace. Nothing "
                            "was written.")
        return _refused("unsafe", f"{found.path} has {found.hard_links} hard links; another "
                        "one may be outside the workspace, so agentls will not change it. "
                        "Nothing was written.")

    async def apply(self, request: EditRequest) -> EditOutcome:
        refused = self.check(request)
        if refused is not None:
            return refused
        steps, problem = self._plan(request)
        if problem is not None:
            return problem
        call_id = self.link.current_calls.get(request.session_id)
        shown = [(path, _old_text(path), text) for kind, path, text in steps
                 if kind == "write" and text is not None]
        if call_id and shown:
            await self.link.update(request.session_id, updates.diff_update(call_id, shown))
        for kind, path, text in steps:
            try:
                if kind == "write":
                    await self._write(request.session_id, path, text or "")
                elif kind == "delete":
                    await asyncio.to_thread(_delete, path)
                else:  # rename: `text` is the new path
                    await asyncio.to_thread(os.rename, path, text or "")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("Applying %s failed at %s: %s", request.label, path, exc)
                return _refused("failed", f"Changing {path} failed ({exc}). Files before it in "
                                "this change were written; read them again.")
        return EditOutcome(applied=True)

    def _plan(self, request: EditRequest) -> tuple[list[tuple[str, str, str | None]],
                                                   EditOutcome | None]:
        """(kind, path, text or new path) per step, or why not."""
        after = {os.path.realpath(p): text for p, text in request.after.items()}
        steps: list[tuple[str, str, str | None]] = []
        for change in _changes(request.edit):
            kind = change.get("kind")
            if kind == "rename":
                old, new = _path(change["oldUri"]), _path(change["newUri"])
                if not os.path.exists(old):
                    return [], _refused("stale", f"{old} no longer exists. Nothing was written.")
                overwrite = bool((change.get("options") or {}).get("overwrite"))
                if os.path.exists(new) and not overwrite:
                    return [], _refused("stale", f"{new} exists now. Nothing was written.")
                steps.append(("rename", old, new))
                continue
            if kind == "delete":
                path = _path(change["uri"])
                if not os.path.exists(path):
                    return [], _refused("stale", f"{path} no longer exists. Nothing was written.")
                steps.append(("delete", path, None))
                continue
            path = _path(change["uri"]) if kind == "create" else _path(
                change["textDocument"]["uri"])
            if kind == "create" and os.path.exists(path) and not (
                    (change.get("options") or {}).get("overwrite")):
                return [], _refused("stale", f"{path} exists now; it did not when the change "
                                    "was made. Nothing was written. Read it and edit it instead.")
            text = after.get(os.path.realpath(path), "" if kind == "create" else None)
            if text is None:
                return [], _refused("unsupported", f"The change to {path} does not say the "
                                    "file's new text; agentls cannot apply it here. Nothing "
                                    "was written.")
            steps.append(("write", path, text))
        return steps, None

    async def _write(self, session_id: str, path: str, text: str) -> None:
        conn = self.link.conn
        if self.link.fs_write and conn is not None and session_id:
            await asyncio.wait_for(conn.write_text_file(session_id=session_id, path=path,
                                                        content=text), CLIENT_SECONDS)
            return
        await asyncio.to_thread(_write_disk, path, text)


# --------------------------------------------------------------------------- helpers


def _changes(edit: dict[str, Any]) -> list[dict[str, Any]]:
    found = [c for c in edit.get("documentChanges") or [] if isinstance(c, dict)]
    for uri in (edit.get("changes") or {}):
        found.append({"textDocument": {"uri": uri}})
    return found


def _path(uri: str) -> str:
    parts = urlsplit(uri)
    return unquote(parts.path) if parts.scheme == "file" else uri


def _old_text(path: str) -> str | None:
    try:
        snapshot = disk_snapshot(path)
    except (UnreadableDocument, OSError):
        return None
    return snapshot.text if snapshot is not None else None


def _write_disk(path: str, text: str) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)


def _delete(path: str) -> None:
    target = Path(path)
    if target.is_dir() and not target.is_symlink():
        target.rmdir()
    else:
        target.unlink()
