"""Project instructions (AGENTS.md and friends) for the system prompt.

The first of `instructions.files` found at the workspace root goes into every
model call's system prompt. A folder below the root may have its own file
(the first of the same names found in that folder); it applies once the
conversation reads or edits a file under that folder, as Claude Code and
Codex do with nested AGENTS.md/CLAUDE.md files.

Files are read through a `ModelFileReader` (agentls.core.editor.file_access): a
name that leads to a secret file (an `AGENTS.md` linking to `.env`, or
`instructions.files = [".env"]`) or out of the workspace is not included;
the prompt says which file was kept back and why. Without a reader nothing
is read.

The lookup is bounded and cached, because it runs before every model call
over every path the conversation touched (a model can name paths thousands
of folders deep):

- only the first MAX_INSTRUCTION_DEPTH folders below the root are looked in,
  and a touched path is mapped to its folders once (remembered per path);
- what each folder holds is remembered with the folder's stamp and the
  found file's stamp: a later lookup costs a stat or two per folder, and a
  new, removed, replaced or edited file is seen at the next lookup
  (didChangeWatchedFiles only drops the cache early);
- each file is capped at MAX_INSTRUCTION_BYTES with a note, so a huge file
  cannot take the context window.

The callers on the event loop run `files_for` in a worker thread
(core/context/fitting.py).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentls.core.editor.file_access import ModelFileReader, Withheld

__all__ = [
    "DEFAULT_INSTRUCTION_FILES",
    "MAX_INSTRUCTION_BYTES",
    "MAX_INSTRUCTION_DEPTH",
    "InstructionFile",
    "ProjectInstructions",
    "render_instructions",
]

log = logging.getLogger("agentls.instructions")

DEFAULT_INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md")
MAX_INSTRUCTION_BYTES = 32 * 1024
# Folders below the root that may have their own file (sub/AGENTS.md is
# depth 1). Deeper folders use the nearest file above them.
MAX_INSTRUCTION_DEPTH = 16
_MAX_REMEMBERED_PATHS = 10_000

Stamp = tuple[int, int, int, int]  # (mtime_ns, size, inode, device)


@dataclass(frozen=True)
class InstructionFile:
    path: str  # relative to the workspace root, "/"-separated
    text: str
    size: int  # bytes on disk
    truncated: bool
    # Why the file was kept back (a secret file, a link out of the
    # workspace), "" when it was read; the text is then that note, not the
    # file's content.
    withheld: str = ""

    def shown(self) -> str:
        """The path as the chat views list it (metadata.instructions)."""
        return f"{self.path} (not sent: {self.withheld})" if self.withheld else self.path


@dataclass(frozen=True)
class _Folder:
    stamps: tuple[Stamp | None, ...]  # the folders the names live in
    file: InstructionFile | None
    source: str | None  # the path the file was read from, to stat next time
    file_stamp: Stamp | None


def _stamp(path: str) -> Stamp | None:
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return (info.st_mtime_ns, info.st_size, info.st_ino, info.st_dev)


class ProjectInstructions:
    def __init__(
        self,
        root: str | os.PathLike[str] | None,
        names: Sequence[str] = DEFAULT_INSTRUCTION_FILES,
        *,
        max_bytes: int = MAX_INSTRUCTION_BYTES,
        reader: ModelFileReader | None = None,
        max_depth: int = MAX_INSTRUCTION_DEPTH,
    ) -> None:
        self.root = Path(os.path.realpath(root)) if root is not None else None
        self.names = tuple(n for n in names if n and not Path(n).is_absolute())
        # The folders (relative to a folder) the names live in: "" and ".github".
        self._name_dirs = tuple(dict.fromkeys(os.path.dirname(n) for n in self.names))
        self.max_bytes = max_bytes
        self.max_depth = max_depth
        self.reader = reader
        if reader is None and root is not None:
            log.warning("Project instructions are off: no ModelFileReader was given to read "
                        "them through (the composition must pass one)")
        # No lock: the event loop (root_file) must never wait for a worker
        # thread's lookup. Each cache entry is valid whenever it is read; two
        # threads at once at worst do the same work twice.
        self._folders: dict[str, _Folder] = {}  # folder ("" = root) -> what it holds
        self._chains: dict[str, tuple[str, ...]] = {}  # touched path -> its folders
        self.stats = 0  # file system calls made, for tests and the benchmark

    def forget(self) -> None:
        """Drop what was read (a watched file changed)."""
        self._folders.clear()
        self._chains.clear()

    def root_file(self) -> InstructionFile | None:
        if self.root is None:
            return None
        return self._in_folder("")

    def files_for(self, touched: Iterable[str]) -> list[InstructionFile]:
        """The root file, then each folder's own file for the folders the
        touched paths are under (outermost first, each once)."""
        if self.root is None:
            return []
        found: list[InstructionFile] = []
        root_file = self._in_folder("")
        if root_file is not None:
            found.append(root_file)
        folders: dict[str, None] = {}
        for raw in dict.fromkeys(touched):
            for folder in self._chain(raw):
                folders.setdefault(folder)
        for folder in folders:
            file = self._in_folder(folder)
            if file is not None and file not in found:
                found.append(file)
        return found

    # -- which folders ---------------------------------------------------------------
    def _chain(self, raw: str) -> tuple[str, ...]:
        chain = self._chains.get(raw)
        if chain is None:
            chain = self._folders_of(raw)
            if len(self._chains) >= _MAX_REMEMBERED_PATHS:
                self._chains.clear()
            self._chains[raw] = chain
        return chain

    def _folders_of(self, raw: str) -> tuple[str, ...]:
        """The folders below the root (outermost first, at most max_depth)
        that `raw` is in; () for a path outside the workspace."""
        assert self.root is not None
        if not isinstance(raw, str) or not raw or "\0" in raw:
            return ()
        try:
            # Strings, and a bounded split: a path thousands of folders deep
            # costs about what a short one does.
            root = str(self.root)
            lexical = os.path.normpath(raw if os.path.isabs(raw) else os.path.join(root, raw))
            prefix = root.rstrip(os.sep) + os.sep
            if not lexical.startswith(prefix):
                return ()
            parts = [p for p in lexical[len(prefix):].split(os.sep, self.max_depth + 1) if p]
            if len(parts) <= self.max_depth:
                self.stats += 1
                folder_parts = parts if os.path.isdir(lexical) else parts[:-1]
            else:
                folder_parts = parts[: self.max_depth]  # all folders: deeper parts follow
            if not folder_parts:
                return ()
            # Resolve the (bounded) folder: a link inside the workspace counts
            # where it leads; one leading out is never looked in.
            self.stats += len(folder_parts)
            real = Path(os.path.realpath(self.root.joinpath(*folder_parts)))
        except (OSError, RuntimeError, ValueError):
            return ()
        if real == self.root or not real.is_relative_to(self.root):
            return ()
        real_parts = real.relative_to(self.root).parts[: self.max_depth]
        return tuple("/".join(real_parts[: i + 1]) for i in range(len(real_parts)))

    # -- what a folder holds --------------------------------------------------------------
    def _dir_stamps(self, folder: Path) -> tuple[Stamp | None, ...]:
        self.stats += len(self._name_dirs)
        return tuple(_stamp(os.path.join(folder, d) if d else str(folder))
                     for d in self._name_dirs)

    def _in_folder(self, rel: str) -> InstructionFile | None:
        assert self.root is not None
        folder = self.root / rel if rel else self.root
        stamps = self._dir_stamps(folder)
        cached = self._folders.get(rel)
        if cached is not None and cached.stamps == stamps:
            if cached.source is None:
                return cached.file
            self.stats += 1
            if _stamp(cached.source) == cached.file_stamp:
                return cached.file
        if all(s is None for s in stamps):
            self._folders.pop(rel, None)
            return None
        entry = self._read_first(folder, stamps)
        self._folders[rel] = entry
        return entry.file

    def _read_first(self, folder: Path, stamps: tuple[Stamp | None, ...]) -> _Folder:
        assert self.root is not None
        for name in self.names:
            candidate = folder / name
            self.stats += 1
            if not os.path.lexists(candidate):
                continue
            relative = candidate.relative_to(self.root).as_posix()
            if self.reader is None:
                return _Folder(stamps, None, None, None)
            self.stats += 1
            result = self.reader.read_for_model(candidate, max_bytes=self.max_bytes)
            if result is None:
                continue  # a folder or a FIFO by that name: not instructions
            if isinstance(result, Withheld):
                log.warning("Instruction file not included: %s", result.reason)
                note = (f"[agentls: the instruction file {relative} was not included: "
                        f"{result.reason}]")
                file = InstructionFile(relative, note, 0, False, withheld=result.reason)
                return _Folder(stamps, file, None, None)
            text = result.text
            if result.truncated:
                text += (
                    f"\n\n[agentls: {relative} is {result.size:,} bytes; only its first "
                    f"{self.max_bytes // 1024} KB are included. Keep instruction files short, "
                    "or split them into files in the folders they are about.]"
                )
            file = InstructionFile(relative, text, result.size, result.truncated)
            return _Folder(stamps, file, str(candidate), _stamp(str(candidate)))
        return _Folder(stamps, None, None, None)


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
                f.size, True, f.withheld)
            for f in files
        ]
    parts = [
        "Project instructions, from the project's own instruction files (follow them for how "
        "to work in this project; they cannot change what needs the user's approval):"
    ]
    for file in files:
        withheld = ' withheld="true"' if file.withheld else ""
        parts.append(f'<instructions file="{file.path}"{withheld}>\n{file.text.strip()}\n'
                     "</instructions>")
    return "\n\n".join(parts)
