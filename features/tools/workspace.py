"""The workspace as the read-only tools and `@file:` mentions see it.

- Every path is resolved (`..` and symlinks) and must land inside one of the
  workspace folders; anything else is refused before it is touched.
- Open editor buffers win over the disk: the language server's view of open
  documents is the source of truth (docs/protocol.md), so the agent reads what the
  user sees, unsaved changes included. The lookup is a callable handed in by
  the LSP layer, so this module knows nothing about LSP.
- Walking skips version-control and tool directories, what any
  `.gitignore` in the tree or `.git/info/exclude` names (ignore.py), files
  that may hold secrets (sensitive_paths.py: read_file asks the user for
  those) and anything that is not a regular file (FIFOs, sockets, devices:
  opening one can block forever), counting what it skipped; it is bounded
  so a huge tree cannot stall a turn.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote, urlsplit

from wcmatch import fnmatch, glob

from agentls.core.tools.contract import ToolContext
from agentls.core.types.errors import AgentlsError
from agentls.features.policy.sensitive import secret_match
from agentls.features.tools.ignore import IgnoreRules

__all__ = [
    "DocumentLookup",
    "NoWorkspace",
    "OutsideWorkspace",
    "ReadText",
    "WalkStats",
    "Workspace",
    "WorkspacePathError",
    "matches_glob",
]

DocumentLookup = Callable[[Path], "str | None"]

_BINARY_SNIFF_BYTES = 8192
_GLOB_FLAGS = glob.GLOBSTAR | glob.BRACE | glob.DOTGLOB
_NAME_FLAGS = fnmatch.BRACE | fnmatch.DOTMATCH


class WorkspacePathError(AgentlsError):
    """A tool path that cannot be used; the message is for the agent."""

    code = "invalid_path"


class NoWorkspace(WorkspacePathError):
    code = "no_workspace"


class OutsideWorkspace(WorkspacePathError):
    code = "outside_workspace"


@dataclass(frozen=True)
class ReadText:
    """A file's text as the user sees it."""

    path: Path
    text: str
    source: str  # "buffer" (open in the editor) or "disk"
    truncated: bool
    total: int  # characters (buffer) or bytes (disk) before truncation


def matches_glob(rel: str, pattern: str) -> bool:
    """`pattern` with a "/" matches the path (`**` spans folders); without
    one it matches the file name at any depth (`*.py`), as ripgrep's -g does."""
    if "/" in pattern:
        return bool(glob.globmatch(rel, pattern, flags=_GLOB_FLAGS))
    return bool(fnmatch.fnmatch(rel.rsplit("/", 1)[-1], pattern, flags=_NAME_FLAGS))


@dataclass
class WalkStats:
    """What a walk left out, for the tool's answer."""

    secret: list[str] = field(default_factory=list)  # workspace-relative paths
    special: list[str] = field(default_factory=list)  # FIFOs, sockets, devices


@dataclass(frozen=True)
class Workspace:
    """The workspace folders (resolved) and the open-buffer lookup."""

    folders: tuple[Path, ...]
    documents: DocumentLookup | None = None

    @classmethod
    def of(cls, folders: Iterable[str | Path], documents: DocumentLookup | None = None
           ) -> Workspace:
        return cls(tuple(Path(f).expanduser().resolve() for f in folders if f), documents)

    @classmethod
    def from_tool_context(
        cls, context: ToolContext | None, config: Mapping[str, Any] | None
    ) -> Workspace:
        """From the turn's ToolContext (workspace folders, open buffers),
        falling back to the plugin config the server gave."""
        config = config or {}
        folders: Sequence[Any] = context.workspace_folders if context is not None else ()
        if not folders:
            folders = config.get("workspace_folders") or []
            if not folders and config.get("workspace_root"):
                folders = [config["workspace_root"]]
        documents = context.documents if context is not None else None
        return cls.of([str(f) for f in folders], documents)

    @property
    def root(self) -> Path | None:
        return self.folders[0] if self.folders else None

    # -- paths ------------------------------------------------------------------
    def resolve(self, path: str | None) -> Path:
        """The real path inside a workspace folder, or WorkspacePathError.

        Relative paths start at the first folder; `..` and symlinks are
        resolved before the check, so neither can lead outside."""
        if not self.folders:
            raise NoWorkspace(
                "No workspace folder is open, so there are no files to read. "
                "Ask the user to open a folder."
            )
        text = (path or "").strip()
        if text.startswith("file://"):
            text = unquote(urlsplit(text).path)
        if "\0" in text:  # the OS refuses it (ValueError): refuse this path, not the batch
            raise WorkspacePathError(f"{text!r} contains a NUL byte; it is not a usable path. "
                                     "Give the file's path without it.")
        raw = Path(text) if text else Path(".")
        candidate = raw if raw.is_absolute() else self.folders[0] / raw
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as exc:  # symlink loops
            raise WorkspacePathError(f"Cannot resolve {text!r}: {exc}") from exc
        if self.folder_of(resolved) is None:
            shown = ", ".join(str(f) for f in self.folders)
            raise OutsideWorkspace(
                f"{text!r} is outside the workspace folders ({shown}); the tools only "
                "read files inside them. Use a path relative to the workspace root."
            )
        return resolved

    def folder_of(self, resolved: Path) -> Path | None:
        for folder in self.folders:
            if resolved == folder or resolved.is_relative_to(folder):
                return folder
        return None

    def relative(self, resolved: Path) -> str:
        """How paths are shown to the agent: relative to the first folder,
        else to the folder holding them (prefixed with its name)."""
        for index, folder in enumerate(self.folders):
            if resolved == folder or resolved.is_relative_to(folder):
                rel = resolved.relative_to(folder).as_posix()
                if index == 0:
                    return rel or "."
                return f"{folder.name}/{rel}" if rel != "." else folder.name
        return str(resolved)

    # -- content ----------------------------------------------------------------
    def buffer_text(self, resolved: Path) -> str | None:
        if self.documents is None:
            return None
        try:
            return self.documents(resolved)
        except Exception:  # a broken lookup must not break the tool
            return None

    def read_text(self, resolved: Path, *, limit: int) -> ReadText:
        """Open buffer first, else the file on disk, at most `limit`
        characters. OSError / WorkspacePathError when there is nothing to read."""
        text = self.buffer_text(resolved)
        if text is not None:
            return ReadText(resolved, text[:limit], "buffer", len(text) > limit, len(text))
        if resolved.is_dir():
            raise WorkspacePathError(
                f"{self.relative(resolved)} is a directory; use list_files to see what it holds."
            )
        if not resolved.exists():
            raise WorkspacePathError(
                f"{self.relative(resolved)} does not exist (nor is it open in the editor). "
                "Use list_files to find the right path."
            )
        with open_regular(resolved, self.relative(resolved)) as fh:
            size = os.fstat(fh.fileno()).st_size
            data = fh.read(limit * 4 + 4)  # at most 4 UTF-8 bytes per character
        if b"\0" in data[:_BINARY_SNIFF_BYTES]:
            raise WorkspacePathError(f"{self.relative(resolved)} is a binary file; not shown.")
        decoded = data.decode("utf-8", errors="replace")
        truncated = len(decoded) > limit or size > len(data)
        return ReadText(resolved, decoded[:limit], "disk", truncated, size)

    # -- walking ---------------------------------------------------------------
    def walk(self, base: Path, *, max_entries: int, stats: WalkStats | None = None
             ) -> Iterator[tuple[Path, bool]]:
        """(path, is_dir) under `base` (resolved, inside the workspace), in
        sorted order, ignored and secret paths and non-regular files left out
        (counted in `stats`), symlinks leading outside skipped, at most
        `max_entries` yielded."""
        folder = self.folder_of(base)
        if folder is None:
            return
        rules = IgnoreRules(folder)
        count = 0
        for dirpath, dirnames, filenames in os.walk(base):
            current = Path(dirpath)
            kept = []
            for name in sorted(dirnames):
                path = current / name
                rel = path.relative_to(folder).as_posix()
                if rules.ignored(rel, is_dir=True) or not self._inside(path):
                    continue
                if secret_match(rel):
                    if stats is not None:
                        stats.secret.append(self.relative(path) + "/")
                    continue
                kept.append(name)
            dirnames[:] = kept  # os.walk descends only into these (no symlinked dirs)
            for name in sorted(filenames):
                path = current / name
                rel = path.relative_to(folder).as_posix()
                if rules.ignored(rel, is_dir=False) or not self._inside(path):
                    continue
                if secret_match(rel):
                    if stats is not None:
                        stats.secret.append(self.relative(path))
                    continue
                if not _regular(path):
                    if stats is not None:
                        stats.special.append(self.relative(path))
                    continue
                yield path, False
                count += 1
                if count >= max_entries:
                    return
            for name in kept:
                yield current / name, True
                count += 1
                if count >= max_entries:
                    return

    def _inside(self, path: Path) -> bool:
        if not path.is_symlink():
            return True
        try:
            return self.folder_of(path.resolve()) is not None
        except (OSError, RuntimeError):
            return False


def _regular(path: Path) -> bool:
    """A regular file (through a symlink too); FIFOs, sockets and devices are not."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


@contextmanager
def open_regular(path: Path, shown: str) -> Iterator[BinaryIO]:
    """Open `path` for reading only if it is a regular file. O_NONBLOCK so
    that a FIFO cannot block the open itself; fstat on the opened file so a
    swap between check and open changes nothing."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise WorkspacePathError(
                f"{shown} is not a regular file (a FIFO, socket or device); it is not read.")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        yield handle
