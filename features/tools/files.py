"""The file-changing tools: `write_file {path, content}`, `edit_file {path,
old_string, new_string, replace_all?, edits?}`, `delete_file {path}`,
`rename_file {path, new_path}` (docs/protocol.md, "Tool calls become
workspace edits").

They never write to disk. Each one reads the server's view of the file (the
open buffer with its version, else the disk; the `snapshots` lookup in the
tool context), computes an LSP WorkspaceEdit in `documentChanges` form
(minimal TextEdits with positions in the negotiated position encoding,
CreateFile / DeleteFile / RenameFile for resource operations) and hands it
to the edit applier (`ToolContext.editor`), which checks that the document
did not move and sends `workspace/applyEdit`.

Approval is not theirs: `tool_need` declares an edit of the paths,
`prepare_call` computes the edit and its diff (what the approval gate shows
the user), and `call` applies that very edit (ToolContext.need.prepared).
The pure text machinery is in text_edits.py.

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
declined | timeout (the gate), stale | failed | unsupported (the applier) or
not_found | ambiguous | outside_workspace | no_workspace |
invalid_arguments | already_exists | unreadable (found here); the message
tells the agent what happened and what to do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from agentls.core.editor.edits import (
    DocumentSnapshot,
    UnreadableDocument,
    disk_snapshot,
    edit_refusal,
)
from agentls.core.tools.contract import ToolContext, ToolNeed, ToolRefused, failure_result
from agentls.features.tools.file_plans import (
    NO_EDITOR,
    NO_WORKSPACE,
    EditPlan,
    PlanEnv,
    SnapshotLookup,
    replace_plan,
    string_argument,
    string_edits,
    text_document_edit,
)
from agentls.features.tools.single_tool import SingleTool
from agentls.features.tools.text_edits import (
    all_lines,
    apply_string_edits,
    bounded,
    preview_lines,
    unified_diff,
    unified_preview,
)
from agentls.features.tools.workspace import Workspace

_PREVIEW_FILE_LIMIT = 1_000_000  # transcript previews skip diffing larger files

__all__ = ["DeleteFileTool", "EditFileTool", "RenameFileTool", "WriteFileTool"]

# --------------------------------------------------------------------------- the tools


_PATH_DESCRIPTION = "Path relative to the workspace root, or absolute inside a workspace folder."


class _FileTool(SingleTool):
    """What the four tools share: the need, planning, applying."""

    # Path arguments the tool cannot do without.
    path_arguments: ClassVar[tuple[str, ...]] = ("path",)

    # -- TypedTool ---------------------------------------------------------------------
    def tool_need(self, tool_name: str, arguments: Mapping[str, Any],
                  state: dict[str, Any]) -> ToolNeed:
        paths: list[str] = []
        for key in self.path_arguments:
            value = arguments.get(key)
            if value is None:
                raise ToolRefused(f"{self.name} needs the argument {key!r}: a path inside the "
                                  "workspace.")
            if not isinstance(value, str):
                raise ToolRefused(f"The argument {key!r} of {self.name} must be a string path, "
                                  f"not {type(value).__name__}.")
            paths.append(value)
        return ToolNeed("edit", tuple(paths), remember=True)

    async def prepare_call(self, tool_name: str, arguments: dict[str, Any],
                           state: dict[str, Any], context: ToolContext,
                           need: ToolNeed) -> ToolNeed:
        """The edit and its diff, before the gate asks; nothing to ask about
        when it changes nothing (kind "none")."""
        plan = await self._plan(arguments, state, context)
        if plan.unchanged:
            return replace(need, kind="none", prepared=plan)
        refused = edit_refusal(context.editor, plan.request(self.name, context.session_id))
        if refused is not None:
            subject = plan.label.removeprefix("agentls: ")
            raise ToolRefused(f"{subject}: {refused.reason}", refused.code or "failed")
        # The question shows the whole diff (the gate sends a long one as a
        # document); the editor's review gets the bounded preview.
        return replace(need, title=plan.label, preview=plan.diff or plan.preview,
                       prepared=plan)

    async def call(self, arguments: dict[str, Any], state: dict[str, Any],
                   context: ToolContext) -> dict[str, Any]:
        prepared = context.need.prepared if context.need is not None else None
        plan = prepared if isinstance(prepared, EditPlan) else \
            await self._plan(arguments, state, context)
        if plan.unchanged:
            return {"success": True, "output": {**plan.output, "unchanged": True}}
        editor = context.editor
        if editor is None:
            raise ToolRefused(NO_EDITOR.format(tool=self.name), "unsupported")
        outcome = await editor.apply(plan.request(self.name, context.session_id))
        if not outcome.applied:
            subject = plan.label.removeprefix("agentls: ")
            reason = outcome.reason or "The editor did not apply the change; nothing was written."
            return failure_result(f"{subject}: {reason}", outcome.code or "failed")
        return {"success": True, "output": plan.output}

    async def _plan(self, arguments: Mapping[str, Any], state: dict[str, Any],
                    context: ToolContext) -> EditPlan:
        workspace = Workspace.from_tool_context(context, state.get("config"))
        if not workspace.folders:
            raise ToolRefused(NO_WORKSPACE, "no_workspace")
        lookup, editor = context.snapshots, context.editor
        if lookup is None or editor is None:
            raise ToolRefused(NO_EDITOR.format(tool=self.name), "unsupported")
        state["snapshots"] = lookup  # for later transcript previews (no context there)
        encoding = str(getattr(lookup, "position_encoding", None)
                       or getattr(editor, "position_encoding", None) or "utf-16")
        return await asyncio.to_thread(self.plan, PlanEnv(workspace, lookup, encoding), arguments)

    def plan(self, env: PlanEnv, arguments: Mapping[str, Any]) -> EditPlan:
        raise NotImplementedError

    # -- what the model and the user see ----------------------------------------------
    def render(self, output: dict[str, Any]) -> str:
        return self.summary(output)

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
            return self.plan(PlanEnv(workspace, lookup, "utf-16"), arguments).preview
        except Exception:
            return self.fallback_preview(arguments)

    def fallback_preview(self, arguments: Mapping[str, Any]) -> str:
        return f"{self.name} {arguments.get('path', '?')}"


def _limited_disk_snapshot(path: str) -> DocumentSnapshot | None:
    target = Path(path)
    if target.is_file() and target.stat().st_size > _PREVIEW_FILE_LIMIT:
        raise UnreadableDocument("too large to preview")
    return disk_snapshot(path)


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

    def plan(self, env: PlanEnv, arguments: Mapping[str, Any]) -> EditPlan:
        resolved = env.resolve(arguments.get("path"))
        content = string_argument(arguments, "content")
        if resolved.is_dir():
            raise ToolRefused(f"{env.shown(resolved)} is a folder; give a file path.",
                               "invalid_arguments")
        snap = env.snapshot(resolved)
        if snap is not None:
            return replace_plan(self.name, env, resolved, snap, content)
        rel = env.shown(resolved)
        uri = resolved.as_uri()
        changes: list[dict[str, Any]] = [
            {"kind": "create", "uri": uri, "options": {"overwrite": False, "ignoreIfExists": False}}
        ]
        if content:
            start = {"line": 0, "character": 0}
            changes.append(text_document_edit(
                uri, None, [{"range": {"start": start, "end": start}, "newText": content}]))
        return EditPlan(
            label=f"agentls: {self.name} {rel}",
            edit={"documentChanges": changes},
            preview="", diff=unified_diff(None, rel, "", content),
            paths=(str(resolved),),
            base_versions={uri: None},
            output={
                "path": str(resolved), "uri": uri, "old_text": None, "new_text": content,
                "changed_lines": all_lines(content), "applied": True, "relative_path": rel,
                "created": True,
            },
        )

    def summary(self, output: dict[str, Any]) -> str:
        rel = output.get("relative_path") or output.get("path")
        if output.get("unchanged"):
            return f"{rel} already has exactly this content; nothing to change."
        if output.get("old_text") is None:
            ranges = all_lines(str(output.get("new_text") or ""))
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

    def plan(self, env: PlanEnv, arguments: Mapping[str, Any]) -> EditPlan:
        resolved = env.resolve(arguments.get("path"))
        edits = string_edits(arguments)
        snap = env.snapshot(resolved)
        rel = env.shown(resolved)
        if snap is None:
            raise ToolRefused(
                f"{rel} does not exist (nor is it open in the editor). Use write_file to "
                "create it, or list_files to find the right path.", "not_found")
        new = apply_string_edits(snap.text, edits, rel)
        if new == snap.text:
            raise ToolRefused("The edits leave the file unchanged; nothing to do.",
                               "invalid_arguments")
        return replace_plan(self.name, env, resolved, snap, new)

    def summary(self, output: dict[str, Any]) -> str:
        rel = output.get("relative_path") or output.get("path")
        return (f"Edited {rel} (changed lines: "
                f"{_lines_text(output.get('changed_lines') or []) or 'none'}).")

    def fallback_preview(self, arguments: Mapping[str, Any]) -> str:
        path = str(arguments.get("path", "?"))
        try:
            edits = string_edits(arguments)
        except ToolRefused:
            return f"edit_file {path}"
        lines: list[str] = [f"--- a/{path}", f"+++ b/{path}"]
        for edit in edits:
            lines.append("@@" + (" (every occurrence)" if edit.replace_all else "") + " @@")
            lines.extend("-" + line for line in preview_lines(edit.old_string))
            lines.extend("+" + line for line in preview_lines(edit.new_string))
        return bounded(lines)


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

    def plan(self, env: PlanEnv, arguments: Mapping[str, Any]) -> EditPlan:
        resolved = env.resolve(arguments.get("path"))
        rel = env.shown(resolved)
        if resolved.is_dir():
            raise ToolRefused(f"{rel} is a folder; delete_file only deletes files.",
                               "invalid_arguments")
        snap = env.snapshot(resolved)
        if snap is None:
            raise ToolRefused(f"{rel} does not exist; nothing to delete.", "not_found")
        return EditPlan(
            label=f"agentls: {self.name} {rel}",
            edit={"documentChanges": [{"kind": "delete", "uri": snap.uri,
                                       "options": {"recursive": False,
                                                   "ignoreIfNotExists": False}}]},
            preview="", diff=unified_diff(rel, None, snap.text, ""),
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
    path_arguments = ("path", "new_path")
    description = (
        "Rename or move a file inside the workspace (a file, not a name in the code: to "
        "rename a function, class or constant, edit_file every file that uses it). "
        "new_path must not exist yet. The change "
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

    def plan(self, env: PlanEnv, arguments: Mapping[str, Any]) -> EditPlan:
        source = env.resolve(arguments.get("path"))
        target = env.resolve(arguments.get("new_path"), "new_path")
        rel, new_rel = env.shown(source), env.shown(target)
        if source.is_dir():
            raise ToolRefused(f"{rel} is a folder; rename_file only renames files.",
                               "invalid_arguments")
        if source == target:
            raise ToolRefused("path and new_path name the same file; nothing to rename.",
                               "invalid_arguments")
        snap = env.snapshot(source)
        if snap is None:
            raise ToolRefused(f"{rel} does not exist; nothing to rename.", "not_found")
        if target.exists() or target.is_symlink() or env.snapshot(target) is not None:
            raise ToolRefused(f"{new_rel} already exists; rename_file does not overwrite. "
                               "Choose another name, or delete it first.", "already_exists")
        new_uri = target.as_uri()
        return EditPlan(
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
