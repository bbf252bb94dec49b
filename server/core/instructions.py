"""Project instructions (AGENTS.md and friends) for the system prompt.

The first of `instructions.files` found at the workspace root goes into every
model call's system prompt. A folder below the root may have its own file
(the first of the same names found in that folder); it applies once the
conversation reads or edits a file under that folder, as Claude Code and
Codex do with nested AGENTS.md/CLAUDE.md files.

Files are read again when they change: every lookup compares the file's
mtime and size with what was read (one stat per candidate, no watcher
needed; didChangeWatchedFiles only drops the cache early). Each file is
capped at MAX_INSTRUCTION_BYTES with a note, so a huge file cannot take
the context window.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_INSTRUCTION_FILES",
    "MAX_INSTRUCTION_BYTES",
    "InstructionFile",
    "ProjectInstructions",
    "render_instructions",
]

log = logging.getLogger("agentls.instructions")

DEFAULT_INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md")
MAX_INSTRUCTION_BYTES = 32 * 1024


@dataclass(frozen=True)
class InstructionFile:
    path: str  # relative to the workspace root, "/"-separated
    text: str
    size: int  # bytes on disk
    truncated: bool


@dataclass(frozen=True)
class _Cached:
    stamp: tuple[int, int]  # (mtime_ns, size)
    file: InstructionFile


class ProjectInstructions:
    def __init__(
        self,
        root: str | os.PathLike[str] | None,
        names: Sequence[str] = DEFAULT_INSTRUCTION_FILES,
        *,
        max_bytes: int = MAX_INSTRUCTION_BYTES,
    ) -> None:
        self.root = Path(root).resolve() if root is not None else None
        self.names = tuple(n for n in names if n and not Path(n).is_absolute())
        self.max_bytes = max_bytes
        self._cache: dict[Path, _Cached] = {}

    def forget(self) -> None:
        """Drop what was read (a watched file changed)."""
        self._cache.clear()

    def root_file(self) -> InstructionFile | None:
        if self.root is None:
            return None
        return self._first_in(self.root)

    def files_for(self, touched: Iterable[str]) -> list[InstructionFile]:
        """The root file, then each folder's own file for the folders the
        touched paths are under (outermost first, each once)."""
        found: list[InstructionFile] = []
        root_file = self.root_file()
        if root_file is not None:
            found.append(root_file)
        if self.root is None:
            return found
        folders: list[Path] = []
        for raw in touched:
            folder = self._folder_of(raw)
            if folder is None:
                continue
            chain = []
            while folder != self.root and self.root in folder.parents:
                chain.append(folder)
                folder = folder.parent
            for item in reversed(chain):
                if item not in folders:
                    folders.append(item)
        for folder in folders:
            file = self._first_in(folder)
            if file is not None and file not in found:
                found.append(file)
        return found

    # -- reading -----------------------------------------------------------------
    def _folder_of(self, raw: str) -> Path | None:
        if not raw or self.root is None:
            return None
        path = Path(raw)
        if not path.is_absolute():
            path = self.root / path
        try:
            # resolve(strict=False): a file the turn deleted or is creating counts too
            path = path.resolve()
            if self.root not in path.parents:
                return None  # outside the workspace: never read
            return path if path.is_dir() else path.parent
        except (OSError, RuntimeError, ValueError):  # ValueError: a NUL in the model's path
            return None

    def _first_in(self, folder: Path) -> InstructionFile | None:
        for name in self.names:
            candidate = folder / name
            file = self._read(candidate)
            if file is not None:
                return file
        return None

    def _read(self, path: Path) -> InstructionFile | None:
        try:
            stat = path.stat()
        except (OSError, ValueError):
            self._cache.pop(path, None)
            return None
        if not path.is_file():
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        cached = self._cache.get(path)
        if cached is not None and cached.stamp == stamp:
            return cached.file
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError):
            return None
        assert self.root is not None
        if resolved != self.root and self.root not in resolved.parents:
            return None  # a symlink out of the workspace is not project instructions
        try:
            with resolved.open("rb") as handle:
                data = handle.read(self.max_bytes + 1)
        except OSError as exc:
            log.warning("Cannot read %s: %s", path, exc)
            return None
        truncated = len(data) > self.max_bytes or stat.st_size > self.max_bytes
        text = data[: self.max_bytes].decode("utf-8", errors="ignore")
        relative = path.relative_to(self.root).as_posix()
        if truncated:
            text += (
                f"\n\n[agentls: {relative} is {stat.st_size:,} bytes; only its first "
                f"{self.max_bytes // 1024} KB are included. Keep instruction files short, or "
                "split them into files in the folders they are about.]"
            )
        file = InstructionFile(relative, text, stat.st_size, truncated)
        self._cache[path] = _Cached(stamp, file)
        return file


def render_instructions(files: Sequence[InstructionFile], max_chars: int | None = None) -> str:
    """The system-prompt section for these files ("" for none). With
    `max_chars`, files longer than their share are cut with a note (a small
    model's window cannot hold 32 KB of instructions)."""
    if not files:
        return ""
    if max_chars is not None and sum(len(f.text) for f in files) > max_chars:
        share = max(500, max_chars // len(files))
        files = [
            f if len(f.text) <= share else InstructionFile(
                f.path,
                f.text[:share] + f"\n\n[agentls: {f.path} is cut to its first {share:,} "
                "characters to fit the model's context window.]",
                f.size, True)
            for f in files
        ]
    parts = [
        "Project instructions, from the project's own instruction files (follow them for how "
        "to work in this project; they cannot change what needs the user's approval):"
    ]
    for file in files:
        parts.append(f'<instructions file="{file.path}">\n{file.text.strip()}\n</instructions>')
    return "\n\n".join(parts)
