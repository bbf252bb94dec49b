"""The read-only tools: `read_file {path}`, `list_files {path?, glob?}`,
`search_text {pattern, path?, glob?}` (docs/protocol.md, "Tool calls become
workspace edits").

One ToolPlugin per tool, so `features.disabled` can switch each off by name.
They read open editor buffers before the disk, refuse any path outside the
workspace folders, and cap what they return so one call cannot flood the
model's context. The file system work runs in a thread: a large tree must
not stall the language server's event loop.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from agentls.core.tools.contract import ToolContext, ToolNeed, ToolRefused, failure_result
from agentls.features.tools.single_tool import SingleTool
from agentls.features.tools.workspace import (
    WalkStats,
    Workspace,
    WorkspacePathError,
    matches_glob,
    open_regular,
)

__all__ = [
    "LIST_MAX_FILES",
    "READ_MAX_CHARS",
    "SEARCH_MAX_MATCHES",
    "ListFilesTool",
    "ReadFileTool",
    "SearchTextTool",
]

READ_MAX_CHARS = 100_000
LIST_MAX_FILES = 500
LIST_MAX_WALK = 20_000  # entries visited before giving up on a huge tree
SEARCH_MAX_MATCHES = 200
SEARCH_MAX_FILES = 5_000
SEARCH_MAX_FILE_BYTES = 2 * 1024 * 1024
SEARCH_MAX_LINE_CHARS = 300
# A regular expression gets this long per file before the search gives up
# (the `regex` package's timeout; it releases the GIL while it matches, so a
# catastrophic pattern cannot freeze the server), and the whole search this long.
SEARCH_PATTERN_SECONDS = 1.0
SEARCH_TOTAL_SECONDS = 20.0
_SHOWN_SKIPPED = 10



@dataclass(frozen=True)
class _Call:
    workspace: Workspace
    arguments: dict[str, Any]
    # Set when the turn is cancelled; the worker thread stops at the next check.
    cancelled: threading.Event = field(default_factory=threading.Event)

    def check_cancelled(self) -> None:
        if self.cancelled.is_set():
            raise ToolRefused("Cancelled.", "cancelled")

    def text(self, key: str, *, required: bool = False) -> str | None:
        value = self.arguments.get(key)
        if value is None or value == "":
            if required:
                raise ToolRefused(f"The argument {key!r} is required.", "invalid_arguments")
            return None
        if not isinstance(value, str):
            raise ToolRefused(
                f"The argument {key!r} must be a string, not {type(value).__name__}.",
                "invalid_arguments",
            )
        return value


class _ReadOnlyTool(SingleTool):
    """What the three tools share: schema, context, the worker thread."""

    # The argument naming what is read; a missing one means the workspace
    # root, unless it is required.
    path_argument: ClassVar[str] = "path"
    path_required: ClassVar[bool] = False

    def tool_need(self, tool_name: str, arguments: Mapping[str, Any],
                  state: dict[str, Any]) -> ToolNeed:
        value = arguments.get(self.path_argument)
        if value is None and self.path_required:
            raise ToolRefused(f"{self.name} needs the argument {self.path_argument!r}: a path "
                              "inside the workspace.")
        if value is not None and not isinstance(value, str):
            raise ToolRefused(f"The argument {self.path_argument!r} of {self.name} must be a "
                              f"string path, not {type(value).__name__}.")
        if not self.path_required and (value is None or not value.strip()):
            value = "."  # the workspace root
        return ToolNeed("read", (str(value),))

    async def call(self, arguments: dict[str, Any], state: dict[str, Any],
                   context: ToolContext) -> dict[str, Any]:
        workspace = Workspace.from_tool_context(context, state.get("config"))
        call = _Call(workspace, arguments)
        try:
            output = await asyncio.to_thread(self.run, call)
        except asyncio.CancelledError:
            call.cancelled.set()  # the thread cannot be killed; it stops itself
            raise
        except OSError as exc:  # ToolRefused and WorkspacePathError: run_tool
            return failure_result(f"{self.name} failed: {exc.strerror or exc}", "io_error")
        return {"success": True, "output": output}

    def run(self, call: _Call) -> dict[str, Any]:
        raise NotImplementedError

    def format_tool_call_preview(
        self, tool_name: str | None, payload: Any, state: dict[str, Any], **kwargs: Any
    ) -> str:
        arguments = payload if isinstance(payload, dict) else {}
        return self.preview(arguments)

    def preview(self, arguments: dict[str, Any]) -> str:
        raise NotImplementedError


class ReadFileTool(_ReadOnlyTool):
    name = "read_file"
    path_required = True
    description = (
        "Read a text file of the workspace. Returns the content of the editor's open "
        "buffer when the file is open (unsaved changes included), else the file on disk. "
        f"Output is cut at {READ_MAX_CHARS} characters."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string",
                     "description": "Path relative to the workspace root, or absolute "
                                    "inside a workspace folder."},
        },
        "required": ["path"],
    }

    def run(self, call: _Call) -> dict[str, Any]:
        resolved = call.workspace.resolve(call.text("path", required=True))
        read = call.workspace.read_text(resolved, limit=READ_MAX_CHARS)
        return {
            "path": call.workspace.relative(resolved),
            "content": read.text,
            "source": read.source,
            "truncated": read.truncated,
        }

    def render(self, output: dict[str, Any]) -> str:
        text = str(output.get("content", ""))
        if output.get("truncated"):
            text += (f"\n\n[read_file: truncated after {READ_MAX_CHARS} characters; the rest "
                     "of the file was not shown. Use search_text to find specific lines.]")
        return text

    def preview(self, arguments: dict[str, Any]) -> str:
        return f"read_file {arguments.get('path', '?')}"


class ListFilesTool(_ReadOnlyTool):
    name = "list_files"
    description = (
        "List the files under a folder of the workspace, recursively (version-control, "
        "dependency and cache folders, what any .gitignore names, and files that may hold "
        "secrets such as .env are skipped). "
        f"At most {LIST_MAX_FILES} paths are returned."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string",
                     "description": "Folder relative to the workspace root (default: the root)."},
            "glob": {"type": "string",
                     "description": "Only files matching this glob: `*.py` matches file names "
                                    "at any depth, `src/**/*.ts` matches paths."},
        },
    }

    def run(self, call: _Call) -> dict[str, Any]:
        workspace = call.workspace
        base = workspace.resolve(call.text("path"))
        pattern = call.text("glob")
        if not base.is_dir():
            if base.exists():
                return {"path": workspace.relative(base), "files": [workspace.relative(base)],
                        "truncated": False}
            raise ToolRefused(f"{workspace.relative(base)} does not exist.", "not_found")
        files: list[str] = []
        truncated = False
        visited = 0
        stats = WalkStats()
        for path, is_dir in workspace.walk(base, max_entries=LIST_MAX_WALK, stats=stats):
            call.check_cancelled()
            visited += 1
            if is_dir:
                continue
            if pattern and not matches_glob(path.relative_to(base).as_posix(), pattern):
                continue
            if len(files) >= LIST_MAX_FILES:
                truncated = True
                break
            files.append(workspace.relative(path))
        if visited >= LIST_MAX_WALK:
            truncated = True
        return {"path": workspace.relative(base), "files": files, "truncated": truncated,
                **_skipped(stats)}

    def render(self, output: dict[str, Any]) -> str:
        files = [str(f) for f in output.get("files") or []]
        text = "\n".join(files) if files else "(no files)"
        if output.get("truncated"):
            text += (f"\n\n[list_files: stopped at {len(files)} files; narrow it with `path` "
                     "or `glob`.]")
        return text + _render_skipped("list_files", output)

    def preview(self, arguments: dict[str, Any]) -> str:
        where = arguments.get("path") or "."
        pattern = arguments.get("glob")
        return f"list_files {where}" + (f" (glob {pattern})" if pattern else "")


class SearchTextTool(_ReadOnlyTool):
    name = "search_text"
    description = (
        "Search the workspace's text files for a regular expression (Python syntax; an "
        "invalid expression is searched as plain text). Files ignored by .gitignore and "
        "files that may hold secrets are skipped. Open buffers are searched as the "
        f"user sees them. Returns `path:line: text`, at most {SEARCH_MAX_MATCHES} matches."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression to find."},
            "path": {"type": "string",
                     "description": "File or folder to search, relative to the workspace "
                                    "root (default: the root)."},
            "glob": {"type": "string",
                     "description": "Only files matching this glob (`*.py`, `src/**/*.ts`)."},
        },
        "required": ["pattern"],
    }

    def run(self, call: _Call) -> dict[str, Any]:
        workspace = call.workspace
        raw = call.text("pattern", required=True) or ""
        literal = False
        # Imported on first use: the tools are loaded in every session (for
        # their tags), and most never search.
        import regex

        try:
            compiled = regex.compile(raw, regex.MULTILINE)  # MULTILINE: `^`/`$` per line
        except (regex.error, ValueError, OverflowError):
            compiled, literal = regex.compile(regex.escape(raw)), True
        base = workspace.resolve(call.text("path"))
        pattern = call.text("glob")
        stats = WalkStats()
        candidates: Iterator[Path]
        if base.is_dir():
            candidates = (
                path for path, is_dir in workspace.walk(base, max_entries=LIST_MAX_WALK,
                                                        stats=stats)
                if not is_dir
                and (not pattern or matches_glob(path.relative_to(base).as_posix(), pattern))
            )
        elif base.exists() or workspace.buffer_text(base) is not None:
            candidates = iter([base])
        else:
            raise ToolRefused(f"{workspace.relative(base)} does not exist.", "not_found")
        matches: list[dict[str, Any]] = []
        large: list[dict[str, Any]] = []
        linked: list[str] = []
        truncated = False
        deadline = time.monotonic() + SEARCH_TOTAL_SECONDS
        for scanned, path in enumerate(candidates):
            call.check_cancelled()
            if scanned >= SEARCH_MAX_FILES or time.monotonic() > deadline:
                truncated = True
                break
            text = self._text(workspace, path, large, stats, linked)
            if text is None:
                continue
            try:
                if not self._search(compiled, text, deadline):
                    continue
                for number, line in enumerate(text.splitlines(), start=1):
                    if self._search(compiled, line, deadline):
                        if len(matches) >= SEARCH_MAX_MATCHES:
                            truncated = True
                            break
                        matches.append({"path": workspace.relative(path), "line": number,
                                        "text": line[:SEARCH_MAX_LINE_CHARS]})
            except TimeoutError:
                raise ToolRefused(
                    f"The pattern {raw!r} took longer than {SEARCH_PATTERN_SECONDS:g} s on "
                    f"{workspace.relative(path)} (catastrophic backtracking, e.g. nested "
                    "quantifiers such as (a+)+). The search was stopped; use a simpler pattern "
                    "or a plain word.", "pattern_timeout") from None
            if truncated:
                break
        return {"pattern": raw, "literal": literal, "matches": matches, "truncated": truncated,
                "skipped_large": large, "skipped_linked": linked[:LIST_MAX_FILES],
                **_skipped(stats)}

    @staticmethod
    def _search(compiled: Any, text: str, deadline: float) -> bool:
        limit = max(0.01, min(SEARCH_PATTERN_SECONDS, deadline - time.monotonic()))
        # concurrent=True: the GIL is released while matching.
        return compiled.search(text, timeout=limit, concurrent=True) is not None

    @staticmethod
    def _text(workspace: Workspace, path: Path, large: list[dict[str, Any]],
              stats: WalkStats, linked: list[str]) -> str | None:
        buffered = workspace.buffer_text(path)
        if buffered is not None:
            return buffered
        try:
            with open_regular(path, workspace.relative(path)) as handle:
                info = os.fstat(handle.fileno())
                if info.st_nlink > 1:
                    # As read_file refuses it: another name may be a secret
                    # file outside the workspace (docs/security.md).
                    linked.append(workspace.relative(path))
                    return None
                size = info.st_size
                if size > SEARCH_MAX_FILE_BYTES:
                    large.append({"path": workspace.relative(path), "bytes": size})
                    return None
                data = handle.read(SEARCH_MAX_FILE_BYTES + 1)
        except WorkspacePathError:
            stats.special.append(workspace.relative(path))
            return None
        except OSError:
            return None
        if b"\0" in data[:8192]:
            return None  # binary
        return data.decode("utf-8", errors="replace")

    def render(self, output: dict[str, Any]) -> str:
        matches = output.get("matches") or []
        lines = [f"{m['path']}:{m['line']}: {m['text']}" for m in matches]
        text = "\n".join(lines) if lines else "(no matches)"
        if output.get("literal"):
            text = "[search_text: the pattern is not a valid regular expression; searched " \
                   "for it as plain text]\n" + text
        if output.get("truncated"):
            text += (f"\n\n[search_text: stopped after {len(matches)} matches or files; narrow "
                     "it with `path` or `glob`.]")
        large = output.get("skipped_large") or []
        if large:
            shown = ", ".join(f"{f['path']} ({f['bytes'] / 1048576:.1f} MB)"
                              for f in large[:_SHOWN_SKIPPED])
            text += (f"\n\n[search_text: not searched, over the "
                     f"{SEARCH_MAX_FILE_BYTES // 1048576} MB limit: {shown}"
                     + (f" and {len(large) - _SHOWN_SKIPPED} more" if len(large) > _SHOWN_SKIPPED
                        else "") + "]")
        return text + _render_skipped("search_text", output)

    def preview(self, arguments: dict[str, Any]) -> str:
        text = f"search_text /{arguments.get('pattern', '')}/"
        if arguments.get("path"):
            text += f" in {arguments['path']}"
        if arguments.get("glob"):
            text += f" (glob {arguments['glob']})"
        return text


def _skipped(stats: WalkStats) -> dict[str, Any]:
    return {"skipped_secret": stats.secret[:LIST_MAX_FILES],
            "skipped_special": stats.special[:LIST_MAX_FILES]}


def _render_skipped(tool: str, output: dict[str, Any]) -> str:
    def listed(paths: list[str]) -> str:
        return ", ".join(paths[:_SHOWN_SKIPPED]) + (" ..." if len(paths) > _SHOWN_SKIPPED else "")

    text = ""
    if secret := output.get("skipped_secret") or []:
        text += (f"\n\n[{tool}: skipped {len(secret)} path(s) that may hold secrets: "
                 f"{listed(secret)}. read_file asks the user before reading one.]")
    if linked := output.get("skipped_linked") or []:
        text += (f"\n\n[{tool}: skipped {len(linked)} file(s) with more than one hard link "
                 f"(another name may be a secret file outside the workspace): {listed(linked)}]")
    if special := output.get("skipped_special") or []:
        text += (f"\n\n[{tool}: skipped {len(special)} file(s) that are not regular files "
                 f"(FIFOs, sockets, devices): {listed(special)}]")
    return text
