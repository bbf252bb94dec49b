"""The file-changing tools: `write_file {path, content}`, `edit_file {path,
old_string, new_string, replace_all?, edits?}`, `delete_file {path}`,
`rename_file {path, new_path}` (PROTOCOL.md, "Tool calls become workspace
edits").

They never write to disk. Each one reads the server's view of the file (the
open buffer with its version, else the disk; the `snapshots` lookup in the
tool context), computes an LSP WorkspaceEdit in `documentChanges` form
(minimal TextEdits with positions in the negotiated position encoding,
CreateFile / DeleteFile / RenameFile for resource operations) and hands it
to the edit applier (`context["editor"]`), which asks the user, checks that
the document did not move, and sends `workspace/applyEdit`.

A successful ToolResult.output (read by linter hooks on tool:post):

    {"path": absolute path, "uri": file URI,
     "old_text": str | None (None: a new file),
     "new_text": str | None (None: deleted),
     "changed_lines": [[start, end], ...]  # 0-based, inclusive, in new_text
     "applied": true,
     "relative_path": path shown to the agent,
     # rename_file also: "old_path", "old_uri", "old_relative_path";
     # write_file with identical content: "unchanged": true (no edit sent)}

Failures: {"success": false, "error": {"message", "code"}} with code
declined | timeout | stale | failed | unsupported (from the applier) or
not_found | ambiguous | outside_workspace | no_workspace |
invalid_arguments | already_exists | unreadable (found here); the message
tells the agent what happened and what to do.
"""

from __future__ import annotations

import asyncio
import bisect
import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from agentls.core.edits import ApprovalPolicy, DocumentSnapshot, EditRequest
from agentls.core.positions import code_units

from .single_tool import SingleTool
from .workspace import NoWorkspace, OutsideWorkspace, Workspace, WorkspacePathError

__all__ = [
    "PREVIEW_MAX_CHARS",
    "PREVIEW_MAX_LINES",
    "DeleteFileTool",
    "EditFileTool",
    "PositionMap",
    "RenameFileTool",
    "Replacement",
    "StringEdit",
    "UnreadableDocument",
    "WriteFileTool",
    "apply_string_edits",
    "changed_line_ranges",
    "code_units",
    "diff_regions",
    "disk_snapshot",
    "text_edits",
    "unified_preview",
]

PREVIEW_MAX_LINES = 120
PREVIEW_MAX_CHARS = 6000
MAX_TEXT_CHARS = 5_000_000  # larger documents are not edited through LSP edits
_PREVIEW_FILE_LIMIT = 1_000_000  # transcript previews skip diffing larger files
_DIFF_MAX_LINES = 20_000  # beyond this, the changed middle is one edit (no line diff)

# LSP line breaks: \r\n, \r and \n (not the other characters str.splitlines knows).
_BREAK = re.compile(r"\r\n|\r|\n")


# --------------------------------------------------------------------------- positions




class PositionMap:
    """Offsets (code points) in a text -> LSP positions {line, character}."""

    def __init__(self, text: str, encoding: str = "utf-16") -> None:
        self.text = text
        self.encoding = encoding
        self.starts = [0, *(m.end() for m in _BREAK.finditer(text))]

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1

    def position(self, offset: int) -> dict[str, int]:
        line = self.line_of(offset)
        segment = self.text[self.starts[line] : offset]
        return {"line": line, "character": code_units(segment, self.encoding)}

    @property
    def last_line(self) -> int:
        return len(self.starts) - 1


# --------------------------------------------------------------------------- minimal edits


@dataclass(frozen=True)
class Replacement:
    """old[start:end] becomes new[new_start:new_end]."""

    start: int
    end: int
    new_start: int
    new_end: int


def _common_prefix(a: str, b: str, limit: int) -> int:
    n = 0
    while n < limit and a[n] == b[n]:
        n += 1
    return n


def _common_suffix(a: str, b: str, limit: int) -> int:
    n = 0
    while n < limit and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def _chunks(text: str) -> list[str]:
    return [m.group(0) for m in re.finditer(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+", text)]


def diff_regions(old: str, new: str) -> list[Replacement]:
    """The regions of `old` to replace so that it becomes `new`: sorted,
    non-overlapping, none of them starting or ending between the \\r and
    \\n of a CRLF (LSP cannot address that position).

    Whole lines are compared first (so an inserted line is one insertion at
    a line start), then each changed block is trimmed to the characters
    that really differ."""
    if old == new:
        return []
    limit = min(len(old), len(new))
    starts = PositionMap(old).starts
    # The shared head and tail, cut back to line starts of `old`.
    p = _common_prefix(old, new, limit)
    p = starts[bisect.bisect_right(starts, p) - 1]
    s = _common_suffix(old, new, limit - p)
    index = bisect.bisect_left(starts, len(old) - s)
    q = starts[index] if index < len(starts) else len(old)
    s = len(old) - q
    a, b = old[p:q], new[p : len(new) - s]
    a_lines, b_lines = _chunks(a), _chunks(b)
    blocks: list[Replacement] = []
    if len(a_lines) + len(b_lines) > _DIFF_MAX_LINES or not a_lines or not b_lines:
        blocks.append(Replacement(p, q, p, len(new) - s))
    else:
        a_off = [0]
        for line in a_lines:
            a_off.append(a_off[-1] + len(line))
        b_off = [0]
        for line in b_lines:
            b_off.append(b_off[-1] + len(line))
        matcher = difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=len(a_lines) > 2000)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "replace" and i2 - i1 == j2 - j1:
                # As many lines on both sides: line by line (one edit per
                # changed line rather than one for the block).
                blocks.extend(Replacement(p + a_off[i], p + a_off[i + 1],
                                          p + b_off[j], p + b_off[j + 1])
                              for i, j in zip(range(i1, i2), range(j1, j2), strict=True))
            elif tag != "equal":
                blocks.append(Replacement(p + a_off[i1], p + a_off[i2],
                                          p + b_off[j1], p + b_off[j2]))
    return _merge(_fix_crlf(old, _trim(old, new, block)) for block in blocks)


def _trim(old: str, new: str, r: Replacement) -> Replacement:
    """Drop what both sides of a block still share at either end."""
    start, end, new_start, new_end = r.start, r.end, r.new_start, r.new_end
    head = _common_prefix(old[start:end], new[new_start:new_end],
                          min(end - start, new_end - new_start))
    start, new_start = start + head, new_start + head
    tail = _common_suffix(old[start:end], new[new_start:new_end],
                          min(end - start, new_end - new_start))
    return Replacement(start, end - tail, new_start, new_end - tail)


def _fix_crlf(old: str, r: Replacement) -> Replacement:
    start, end, new_start, new_end = r.start, r.end, r.new_start, r.new_end
    # The characters just outside a region are shared by both texts, so
    # widening both sides by the same character keeps them equivalent.
    if 0 < start < len(old) and old[start - 1] == "\r" and old[start] == "\n":
        start, new_start = start - 1, new_start - 1
    if 0 < end < len(old) and old[end - 1] == "\r" and old[end] == "\n":
        end, new_end = end + 1, new_end + 1
    return Replacement(start, end, new_start, new_end)


def _merge(regions: Any) -> list[Replacement]:
    merged: list[Replacement] = []
    for r in regions:
        if merged and r.start <= merged[-1].end:
            last = merged[-1]
            merged[-1] = Replacement(last.start, max(last.end, r.end), last.new_start,
                                     max(last.new_end, r.new_end))
        else:
            merged.append(r)
    return merged


def text_edits(
    old: str, new: str, encoding: str = "utf-16", regions: list[Replacement] | None = None
) -> list[dict[str, Any]]:
    """Minimal LSP TextEdits turning `old` into `new` (ranges refer to `old`)."""
    positions = PositionMap(old, encoding)
    return [
        {
            "range": {"start": positions.position(r.start), "end": positions.position(r.end)},
            "newText": new[r.new_start : r.new_end],
        }
        for r in (diff_regions(old, new) if regions is None else regions)
    ]


def changed_line_ranges(new: str, regions: list[Replacement]) -> list[list[int]]:
    """0-based inclusive line ranges of `new` that the replacements touched
    (a pure deletion touches the line it happened on)."""
    positions = PositionMap(new)
    ranges: list[list[int]] = []
    for r in regions:
        first = positions.line_of(r.new_start)
        last = positions.line_of(max(r.new_start, r.new_end - 1))
        if ranges and first <= ranges[-1][1] + 1:
            ranges[-1][1] = max(ranges[-1][1], last)
        else:
            ranges.append([first, last])
    return ranges


def _all_lines(text: str) -> list[list[int]]:
    if not text:
        return []
    positions = PositionMap(text)
    last = positions.line_of(len(text) - 1)
    return [[0, last]]


# --------------------------------------------------------------------------- string edits


class _ToolFailure(Exception):
    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True)
class StringEdit:
    old_string: str
    new_string: str
    replace_all: bool = False


def apply_string_edits(text: str, edits: list[StringEdit], shown: str = "the file") -> str:
    """Apply exact replacements in order, each to the result of the previous
    one; all or nothing (_ToolFailure with code not_found / ambiguous /
    invalid_arguments)."""
    for index, edit in enumerate(edits):
        where = f"edits[{index}]: " if len(edits) > 1 else ""
        old, new = edit.old_string, edit.new_string
        if old == "":
            raise _ToolFailure(
                f"{where}old_string is empty. Give the exact text to replace; to create a file "
                "or replace all of its content use write_file.", "invalid_arguments")
        if old == new:
            raise _ToolFailure(f"{where}old_string and new_string are the same; nothing to "
                               "change.", "invalid_arguments")
        first = text.find(old)
        if first < 0 and "\r\n" in text and "\n" in old and "\r" not in old:
            # The model writes \n; the file uses CRLF: match it as the user sees it.
            old, new = old.replace("\n", "\r\n"), new.replace("\r\n", "\n").replace("\n", "\r\n")
            first = text.find(old)
        if first < 0:
            raise _ToolFailure(
                f"{where}old_string was not found in {shown}. Nothing was changed. Read the "
                "file again (read_file) and copy the exact text to replace, including "
                "whitespace and indentation.", "not_found")
        if edit.replace_all:
            text = text.replace(old, new)
            continue
        if text.find(old, first + 1) >= 0:
            count = max(text.count(old), 2)
            raise _ToolFailure(
                f"{where}old_string was found {count} times in {shown}, so the edit is "
                "ambiguous. Nothing was changed. Add surrounding lines to old_string so it "
                "matches exactly once, or set replace_all: true to replace every occurrence.",
                "ambiguous")
        text = text[:first] + new + text[first + len(old) :]
    return text


# --------------------------------------------------------------------------- previews


def _preview_lines(text: str) -> list[str]:
    lines = _BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _bounded(lines: list[str]) -> str:
    shown: list[str] = []
    size = 0
    for index, line in enumerate(lines):
        if index >= PREVIEW_MAX_LINES or size + len(line) + 1 > PREVIEW_MAX_CHARS:
            shown.append(f"... ({len(lines) - index} more lines of diff not shown)")
            break
        shown.append(line)
        size += len(line) + 1
    return "\n".join(shown)


def unified_preview(old_name: str | None, new_name: str | None, old: str, new: str) -> str:
    """A unified diff (bounded in lines and characters); None names mean
    /dev/null (a created or deleted file)."""
    lines = list(difflib.unified_diff(
        _preview_lines(old), _preview_lines(new),
        fromfile=f"a/{old_name}" if old_name else "/dev/null",
        tofile=f"b/{new_name}" if new_name else "/dev/null",
        lineterm="", n=3,
    ))
    if not lines:
        return f"(no changes to {new_name or old_name})"
    return _bounded(lines)


# --------------------------------------------------------------------------- documents


class UnreadableDocument(OSError):
    """A file that cannot be edited as text; str() completes "it is ..."
    ("a binary file", "not UTF-8 text", "too large ...")."""


def disk_snapshot(path: str) -> DocumentSnapshot | None:
    """The file on disk as a snapshot (version None), None when it does not
    exist or is not a regular file. UnreadableDocument for binary, non-UTF-8
    or huge files. A leading UTF-8 BOM is dropped, as editors do."""
    target = Path(path)
    if not target.is_file():
        return None
    if target.stat().st_size > MAX_TEXT_CHARS * 4:
        raise UnreadableDocument("too large to edit through the editor")
    data = target.read_bytes()
    if b"\0" in data[:8192]:
        raise UnreadableDocument("a binary file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableDocument(f"not UTF-8 text ({exc.reason})") from None
    return DocumentSnapshot(uri=target.as_uri(), path=str(target), text=text, version=None)


SnapshotLookup = Callable[[str], DocumentSnapshot | None]


@dataclass
class _Env:
    workspace: Workspace
    lookup: SnapshotLookup
    encoding: str

    def resolve(self, raw: Any, key: str = "path") -> Path:
        if raw is None or raw == "":
            raise _ToolFailure(f"The argument {key!r} is required.", "invalid_arguments")
        if not isinstance(raw, str):
            raise _ToolFailure(f"The argument {key!r} must be a string.", "invalid_arguments")
        try:
            return self.workspace.resolve(raw)
        except NoWorkspace:
            raise _ToolFailure(_NO_WORKSPACE, "no_workspace") from None
        except OutsideWorkspace:
            folders = ", ".join(str(f) for f in self.workspace.folders)
            raise _ToolFailure(
                f"{raw!r} is outside the workspace folders ({folders}) once `..` and symlinks "
                "are resolved; agentls only changes files inside them. Nothing was written.",
                "outside_workspace") from None
        except WorkspacePathError as exc:
            raise _ToolFailure(str(exc), "invalid_arguments") from None

    def snapshot(self, resolved: Path) -> DocumentSnapshot | None:
        try:
            snap = self.lookup(str(resolved))
        except UnreadableDocument as exc:
            raise _ToolFailure(f"Cannot edit {self.shown(resolved)}: it is {exc}.",
                               "unreadable") from None
        except OSError as exc:
            raise _ToolFailure(f"Cannot read {self.shown(resolved)}: {exc.strerror or exc}.",
                               "unreadable") from None
        if snap is not None and len(snap.text) > MAX_TEXT_CHARS:
            raise _ToolFailure(f"{self.shown(resolved)} is too large to edit through the "
                               "editor.", "unreadable")
        return snap

    def shown(self, resolved: Path) -> str:
        return self.workspace.relative(resolved)


_NO_WORKSPACE = (
    "No workspace folder is open (single-file mode), so agentls cannot change files. "
    "Nothing was written. Ask the user to open a folder in the editor."
)


@dataclass
class _Plan:
    """What a tool wants applied, and what it will report."""

    label: str
    edit: dict[str, Any]
    preview: str
    paths: tuple[str, ...]
    base_versions: dict[str, int | None]
    output: dict[str, Any]
    unchanged: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _text_document_edit(uri: str, version: int | None, edits: list[dict[str, Any]]
                        ) -> dict[str, Any]:
    return {"textDocument": {"uri": uri, "version": version}, "edits": edits}


def _replace_plan(tool: str, env: _Env, resolved: Path, snap: DocumentSnapshot, new: str
                  ) -> _Plan:
    rel = env.shown(resolved)
    regions = diff_regions(snap.text, new)
    edits = text_edits(snap.text, new, env.encoding, regions)
    return _Plan(
        label=f"agentls: {tool} {rel}",
        edit={"documentChanges": [_text_document_edit(snap.uri, snap.version, edits)]},
        preview=unified_preview(rel, rel, snap.text, new),
        paths=(str(resolved),),
        base_versions={snap.uri: snap.version},
        output={
            "path": str(resolved), "uri": snap.uri, "old_text": snap.text, "new_text": new,
            "changed_lines": changed_line_ranges(new, regions), "applied": True,
            "relative_path": rel,
        },
        unchanged=not regions,
    )


def _string(arguments: Mapping[str, Any], key: str, *, required: bool = True) -> str:
    value = arguments.get(key)
    if value is None:
        if required:
            raise _ToolFailure(f"The argument {key!r} is required.", "invalid_arguments")
        return ""
    if not isinstance(value, str):
        raise _ToolFailure(f"The argument {key!r} must be a string, not "
                           f"{type(value).__name__}.", "invalid_arguments")
    return value


def _flag(value: Any, key: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise _ToolFailure(f"The argument {key!r} must be true or false.", "invalid_arguments")


def _string_edits(arguments: Mapping[str, Any]) -> list[StringEdit]:
    edits: list[StringEdit] = []
    if arguments.get("old_string") is not None or arguments.get("new_string") is not None:
        edits.append(StringEdit(_string(arguments, "old_string"),
                                _string(arguments, "new_string"),
                                _flag(arguments.get("replace_all"), "replace_all")))
    more = arguments.get("edits")
    if more is not None:
        if not isinstance(more, list) or not all(isinstance(e, dict) for e in more):
            raise _ToolFailure("The argument 'edits' must be a list of {old_string, new_string, "
                               "replace_all?} objects.", "invalid_arguments")
        for index, item in enumerate(more):
            try:
                edits.append(StringEdit(_string(item, "old_string"), _string(item, "new_string"),
                                        _flag(item.get("replace_all"), "replace_all")))
            except _ToolFailure as exc:
                raise _ToolFailure(f"edits[{index}]: {exc.message}", exc.code) from None
    if not edits:
        raise _ToolFailure("Give old_string and new_string (or a list of edits).",
                           "invalid_arguments")
    return edits


# --------------------------------------------------------------------------- the tools


_PATH_DESCRIPTION = "Path relative to the workspace root, or absolute inside a workspace folder."


class _FileTool(SingleTool):
    """What the four tools share: schema, context, planning, applying."""

    # -- execution ----------------------------------------------------------------
    async def execute_tool_async(
        self, tool_name: str | None, payload: Any, state: dict[str, Any], **kwargs: Any
    ) -> dict[str, Any]:
        arguments = payload if isinstance(payload, dict) else {}
        context: Mapping[str, Any] = kwargs.get("context") or {}
        workspace = Workspace.from_tool_context(context, state.get("config"))
        if not workspace.folders:
            return _failure(_NO_WORKSPACE, "no_workspace")
        lookup = context.get("snapshots")
        editor = context.get("editor")
        if not callable(lookup) or editor is None:
            return _failure(
                f"{self.name} needs an editor connection to apply changes (agentls changes "
                "files only through the editor's workspace/applyEdit); none is attached. "
                "Nothing was written.", "unsupported")
        state["snapshots"] = lookup  # for later transcript previews (no context there)
        encoding = str(getattr(lookup, "position_encoding", None)
                       or getattr(editor, "position_encoding", None) or "utf-16")
        env = _Env(workspace, lookup, encoding)
        try:
            plan = await asyncio.to_thread(self.plan, env, arguments)
        except _ToolFailure as exc:
            return _failure(exc.message, exc.code)
        if plan.unchanged:
            return {"success": True, "output": {**plan.output, "unchanged": True}}
        request = EditRequest(
            tool_name=self.name,
            session_id=str(context.get("session_id") or ""),
            label=plan.label,
            edit=plan.edit,
            preview=plan.preview,
            paths=plan.paths,
            base_versions=plan.base_versions,
            approval=_verdict(context.get("approval")),
            after=_after(plan.output),
        )
        outcome = await editor.apply(request)
        if not outcome.applied:
            subject = plan.label.removeprefix("agentls: ")
            reason = outcome.reason or "The editor did not apply the change; nothing was written."
            return _failure(f"{subject}: {reason}", outcome.code or "failed")
        return {"success": True, "output": plan.output}

    def plan(self, env: _Env, arguments: Mapping[str, Any]) -> _Plan:
        raise NotImplementedError

    # -- what the model and the user see ----------------------------------------------
    def format_tool_result(self, result: dict[str, Any], state: dict[str, Any]) -> str:
        if not result.get("success"):
            error = result.get("error") or {}
            message = error.get("message") if isinstance(error, dict) else error
            return f"Error: {message}"
        return self.summary(result.get("output") or {})

    def summary(self, output: dict[str, Any]) -> str:
        raise NotImplementedError

    def format_tool_call_preview(
        self, tool_name: str | None, payload: Any, state: dict[str, Any], **kwargs: Any
    ) -> str:
        """The unified diff the call would make, against the editor's view
        when a lookup is known (after the first call), else the disk."""
        arguments = payload if isinstance(payload, dict) else {}
        workspace = Workspace.from_tool_context(None, state.get("config"))
        stashed = state.get("snapshots")
        lookup: SnapshotLookup = stashed if callable(stashed) else _limited_disk_snapshot
        try:
            return self.plan(_Env(workspace, lookup, "utf-16"), arguments).preview
        except Exception:
            return self.fallback_preview(arguments)

    def fallback_preview(self, arguments: Mapping[str, Any]) -> str:
        return f"{self.name} {arguments.get('path', '?')}"


def _limited_disk_snapshot(path: str) -> DocumentSnapshot | None:
    target = Path(path)
    if target.is_file() and target.stat().st_size > _PREVIEW_FILE_LIMIT:
        raise UnreadableDocument("too large to preview")
    return disk_snapshot(path)


def _failure(message: str, code: str) -> dict[str, Any]:
    return {"success": False, "error": {"message": message, "code": code}}


def _lines_text(ranges: list[list[int]]) -> str:
    parts = [f"{a + 1}" if a == b else f"{a + 1}-{b + 1}" for a, b in ranges]
    return ", ".join(parts)


class WriteFileTool(_FileTool):
    name = "write_file"
    description = (
        "Create a file, or replace the whole content of an existing one, in the workspace. "
        "The change is shown to the user for approval in the editor and applied to the "
        "editor's buffer. For changes to part of a file prefer edit_file."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": _PATH_DESCRIPTION},
            "content": {"type": "string", "description": "The complete new content."},
        },
        "required": ["path", "content"],
    }

    def plan(self, env: _Env, arguments: Mapping[str, Any]) -> _Plan:
        resolved = env.resolve(arguments.get("path"))
        content = _string(arguments, "content")
        if resolved.is_dir():
            raise _ToolFailure(f"{env.shown(resolved)} is a folder; give a file path.",
                               "invalid_arguments")
        snap = env.snapshot(resolved)
        if snap is not None:
            return _replace_plan(self.name, env, resolved, snap, content)
        rel = env.shown(resolved)
        uri = resolved.as_uri()
        changes: list[dict[str, Any]] = [
            {"kind": "create", "uri": uri, "options": {"overwrite": False, "ignoreIfExists": False}}
        ]
        if content:
            start = {"line": 0, "character": 0}
            changes.append(_text_document_edit(
                uri, None, [{"range": {"start": start, "end": start}, "newText": content}]))
        return _Plan(
            label=f"agentls: {self.name} {rel}",
            edit={"documentChanges": changes},
            preview=unified_preview(None, rel, "", content),
            paths=(str(resolved),),
            base_versions={uri: None},
            output={
                "path": str(resolved), "uri": uri, "old_text": None, "new_text": content,
                "changed_lines": _all_lines(content), "applied": True, "relative_path": rel,
                "created": True,
            },
        )

    def summary(self, output: dict[str, Any]) -> str:
        rel = output.get("relative_path") or output.get("path")
        if output.get("unchanged"):
            return f"{rel} already has exactly this content; nothing to change."
        if output.get("old_text") is None:
            ranges = _all_lines(str(output.get("new_text") or ""))
            lines = ranges[0][1] + 1 if ranges else 0
            return f"Created {rel} ({lines} line{'s' if lines != 1 else ''})."
        return (f"Replaced the content of {rel} (changed lines: "
                f"{_lines_text(output.get('changed_lines') or []) or 'none'}).")

    def fallback_preview(self, arguments: Mapping[str, Any]) -> str:
        path = str(arguments.get("path", "?"))
        content = arguments.get("content")
        if isinstance(content, str):
            return unified_preview(None, path, "", content)
        return f"write_file {path}"


class EditFileTool(_FileTool):
    name = "edit_file"
    description = (
        "Replace exact text in a file of the workspace: old_string (copied exactly from the "
        "file, whitespace included) becomes new_string. old_string must occur exactly once "
        "unless replace_all is true. For several changes to one file pass `edits`, a list of "
        "{old_string, new_string, replace_all?} applied in order; all or nothing. The change "
        "is shown to the user for approval and applied to the editor's buffer."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": _PATH_DESCRIPTION},
            "old_string": {"type": "string", "description": "Exact text to replace."},
            "new_string": {"type": "string", "description": "The replacement text."},
            "replace_all": {"type": "boolean",
                            "description": "Replace every occurrence (default false)."},
            "edits": {
                "type": "array",
                "description": "Several replacements, applied in order to the same file.",
                "items": {
                    "type": "object",
                    "properties": {
                        "old_string": {"type": "string"},
                        "new_string": {"type": "string"},
                        "replace_all": {"type": "boolean"},
                    },
                    "required": ["old_string", "new_string"],
                },
            },
        },
        "required": ["path"],
    }

    def plan(self, env: _Env, arguments: Mapping[str, Any]) -> _Plan:
        resolved = env.resolve(arguments.get("path"))
        edits = _string_edits(arguments)
        snap = env.snapshot(resolved)
        rel = env.shown(resolved)
        if snap is None:
            raise _ToolFailure(
                f"{rel} does not exist (nor is it open in the editor). Use write_file to "
                "create it, or list_files to find the right path.", "not_found")
        new = apply_string_edits(snap.text, edits, rel)
        if new == snap.text:
            raise _ToolFailure("The edits leave the file unchanged; nothing to do.",
                               "invalid_arguments")
        return _replace_plan(self.name, env, resolved, snap, new)

    def summary(self, output: dict[str, Any]) -> str:
        rel = output.get("relative_path") or output.get("path")
        return (f"Edited {rel} (changed lines: "
                f"{_lines_text(output.get('changed_lines') or []) or 'none'}).")

    def fallback_preview(self, arguments: Mapping[str, Any]) -> str:
        path = str(arguments.get("path", "?"))
        try:
            edits = _string_edits(arguments)
        except _ToolFailure:
            return f"edit_file {path}"
        lines: list[str] = [f"--- a/{path}", f"+++ b/{path}"]
        for edit in edits:
            lines.append("@@" + (" (every occurrence)" if edit.replace_all else "") + " @@")
            lines.extend("-" + line for line in _preview_lines(edit.old_string))
            lines.extend("+" + line for line in _preview_lines(edit.new_string))
        return _bounded(lines)


class DeleteFileTool(_FileTool):
    name = "delete_file"
    description = (
        "Delete a file of the workspace (not a folder). The deletion is shown to the user for "
        "approval in the editor; it needs an editor that supports file operations."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": _PATH_DESCRIPTION}},
        "required": ["path"],
    }

    def plan(self, env: _Env, arguments: Mapping[str, Any]) -> _Plan:
        resolved = env.resolve(arguments.get("path"))
        rel = env.shown(resolved)
        if resolved.is_dir():
            raise _ToolFailure(f"{rel} is a folder; delete_file only deletes files.",
                               "invalid_arguments")
        snap = env.snapshot(resolved)
        if snap is None:
            raise _ToolFailure(f"{rel} does not exist; nothing to delete.", "not_found")
        return _Plan(
            label=f"agentls: {self.name} {rel}",
            edit={"documentChanges": [{"kind": "delete", "uri": snap.uri,
                                       "options": {"recursive": False,
                                                   "ignoreIfNotExists": False}}]},
            preview=unified_preview(rel, None, snap.text, ""),
            paths=(str(resolved),),
            base_versions={snap.uri: snap.version},
            output={
                "path": str(resolved), "uri": snap.uri, "old_text": snap.text, "new_text": None,
                "changed_lines": [], "applied": True, "relative_path": rel,
            },
        )

    def summary(self, output: dict[str, Any]) -> str:
        return f"Deleted {output.get('relative_path') or output.get('path')}."


class RenameFileTool(_FileTool):
    name = "rename_file"
    description = (
        "Rename or move a file inside the workspace. new_path must not exist yet. The change "
        "is shown to the user for approval in the editor; it needs an editor that supports "
        "file operations."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": _PATH_DESCRIPTION},
            "new_path": {"type": "string", "description": "The new path, same rules."},
        },
        "required": ["path", "new_path"],
    }

    def plan(self, env: _Env, arguments: Mapping[str, Any]) -> _Plan:
        source = env.resolve(arguments.get("path"))
        target = env.resolve(arguments.get("new_path"), "new_path")
        rel, new_rel = env.shown(source), env.shown(target)
        if source.is_dir():
            raise _ToolFailure(f"{rel} is a folder; rename_file only renames files.",
                               "invalid_arguments")
        if source == target:
            raise _ToolFailure("path and new_path name the same file; nothing to rename.",
                               "invalid_arguments")
        snap = env.snapshot(source)
        if snap is None:
            raise _ToolFailure(f"{rel} does not exist; nothing to rename.", "not_found")
        if target.exists() or target.is_symlink() or env.snapshot(target) is not None:
            raise _ToolFailure(f"{new_rel} already exists; rename_file does not overwrite. "
                               "Choose another name, or delete it first.", "already_exists")
        new_uri = target.as_uri()
        return _Plan(
            label=f"agentls: {self.name} {rel} -> {new_rel}",
            edit={"documentChanges": [{"kind": "rename", "oldUri": snap.uri, "newUri": new_uri,
                                       "options": {"overwrite": False,
                                                   "ignoreIfExists": False}}]},
            preview=f"rename {rel} -> {new_rel}",
            paths=(str(source), str(target)),
            base_versions={snap.uri: snap.version},
            output={
                "path": str(target), "uri": new_uri, "old_text": snap.text,
                "new_text": snap.text, "changed_lines": [], "applied": True,
                "relative_path": new_rel, "old_path": str(source), "old_uri": snap.uri,
                "old_relative_path": rel,
            },
        )

    def summary(self, output: dict[str, Any]) -> str:
        return (f"Renamed {output.get('old_relative_path') or output.get('old_path')} to "
                f"{output.get('relative_path') or output.get('path')}.")

    def fallback_preview(self, arguments: Mapping[str, Any]) -> str:
        return f"rename {arguments.get('path', '?')} -> {arguments.get('new_path', '?')}"


def _after(output: Mapping[str, Any]) -> dict[str, str | None]:
    """What each path holds once the plan is applied (None: gone), for
    checkpoints (agentls.core.checkpoints)."""
    after: dict[str, str | None] = {}
    if output.get("old_path"):
        after[str(output["old_path"])] = None
    new_text = output.get("new_text")
    after[str(output["path"])] = new_text if isinstance(new_text, str) else None
    return after


def _verdict(value: Any) -> ApprovalPolicy:
    """The policy's verdict from the tool context; anything else asks."""
    if value == "allow":
        return "allow"
    if value == "protected":
        return "protected"
    return "ask"
