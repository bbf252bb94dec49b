"""What a file tool plans before anything is asked or applied
(features/tools/files.py): the environment a plan is made in (`PlanEnv`:
the workspace, the document lookup, the position encoding), the plan
(`EditPlan`: the WorkspaceEdit, its label and diff, the versions it was
computed from, the output it will report), and the argument readers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentls.core.editor.edits import (
    MAX_TEXT_CHARS,
    DocumentSnapshot,
    EditRequest,
    UnreadableDocument,
)
from agentls.core.tools.contract import ToolRefused
from agentls.features.tools.text_edits import (
    StringEdit,
    bounded,
    changed_line_ranges,
    diff_regions,
    text_edits,
    unified_diff,
)
from agentls.features.tools.workspace import (
    NoWorkspace,
    OutsideWorkspace,
    Workspace,
    WorkspacePathError,
)

__all__ = [
    "NO_EDITOR",
    "NO_WORKSPACE",
    "EditPlan",
    "PlanEnv",
    "SnapshotLookup",
    "after_texts",
    "replace_plan",
    "string_argument",
    "string_edits",
    "text_document_edit",
]

SnapshotLookup = Callable[[str], DocumentSnapshot | None]


@dataclass
class PlanEnv:
    workspace: Workspace
    lookup: SnapshotLookup
    encoding: str

    def resolve(self, raw: Any, key: str = "path") -> Path:
        if raw is None or raw == "":
            raise ToolRefused(f"The argument {key!r} is required.", "invalid_arguments")
        if not isinstance(raw, str):
            raise ToolRefused(f"The argument {key!r} must be a string.", "invalid_arguments")
        try:
            return self.workspace.resolve(raw)
        except NoWorkspace:
            raise ToolRefused(NO_WORKSPACE, "no_workspace") from None
        except OutsideWorkspace:
            folders = ", ".join(str(f) for f in self.workspace.folders)
            raise ToolRefused(
                f"{raw!r} is outside the workspace folders ({folders}) once `..` and symlinks "
                "are resolved; agentls only changes files inside them. Nothing was written.",
                "outside_workspace") from None
        except WorkspacePathError as exc:
            raise ToolRefused(str(exc), "invalid_arguments") from None

    def snapshot(self, resolved: Path) -> DocumentSnapshot | None:
        try:
            snap = self.lookup(str(resolved))
        except UnreadableDocument as exc:
            raise ToolRefused(f"Cannot edit {self.shown(resolved)}: it is {exc}.",
                               "unreadable") from None
        except OSError as exc:
            raise ToolRefused(f"Cannot read {self.shown(resolved)}: {exc.strerror or exc}.",
                               "unreadable") from None
        if snap is not None and len(snap.text) > MAX_TEXT_CHARS:
            raise ToolRefused(f"{self.shown(resolved)} is too large to edit through the "
                               "editor.", "unreadable")
        return snap

    def shown(self, resolved: Path) -> str:
        return self.workspace.relative(resolved)


NO_EDITOR = (
    "{tool} needs an editor connection to apply changes (agentls changes files only through "
    "the editor's workspace/applyEdit); none is attached. Nothing was written."
)
NO_WORKSPACE = (
    "No workspace folder is open (single-file mode), so agentls cannot change files. "
    "Nothing was written. Ask the user to open a folder in the editor."
)


@dataclass
class EditPlan:
    """What a tool wants applied, and what it will report."""

    label: str
    edit: dict[str, Any]
    preview: str
    paths: tuple[str, ...]
    base_versions: dict[str, int | None]
    output: dict[str, Any]
    unchanged: bool = False
    # The whole diff the approval question shows; `preview` is its bounded
    # head (the editor's review, transcripts), made from it when left "".
    # "" when preview is whole.
    diff: str = ""

    def __post_init__(self) -> None:
        if self.diff and not self.preview:
            self.preview = bounded(self.diff.split("\n"))

    def request(self, tool: str, session_id: str) -> EditRequest:
        return EditRequest(tool_name=tool, session_id=session_id, label=self.label,
                           edit=self.edit, preview=self.preview, paths=self.paths,
                           base_versions=self.base_versions, after=after_texts(self.output))


def text_document_edit(uri: str, version: int | None, edits: list[dict[str, Any]]
                        ) -> dict[str, Any]:
    return {"textDocument": {"uri": uri, "version": version}, "edits": edits}


def replace_plan(tool: str, env: PlanEnv, resolved: Path, snap: DocumentSnapshot, new: str
                  ) -> EditPlan:
    rel = env.shown(resolved)
    regions = diff_regions(snap.text, new)
    edits = text_edits(snap.text, new, env.encoding, regions)
    return EditPlan(
        label=f"agentls: {tool} {rel}",
        edit={"documentChanges": [text_document_edit(snap.uri, snap.version, edits)]},
        preview="", diff=unified_diff(rel, rel, snap.text, new),
        paths=(str(resolved),),
        base_versions={snap.uri: snap.version},
        output={
            "path": str(resolved), "uri": snap.uri, "old_text": snap.text, "new_text": new,
            "changed_lines": changed_line_ranges(new, regions), "applied": True,
            "relative_path": rel,
        },
        unchanged=not regions,
    )


def string_argument(arguments: Mapping[str, Any], key: str, *, required: bool = True) -> str:
    value = arguments.get(key)
    if value is None:
        if required:
            raise ToolRefused(f"The argument {key!r} is required.", "invalid_arguments")
        return ""
    if not isinstance(value, str):
        raise ToolRefused(f"The argument {key!r} must be a string, not "
                           f"{type(value).__name__}.", "invalid_arguments")
    return value


def flag_argument(value: Any, key: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ToolRefused(f"The argument {key!r} must be true or false.", "invalid_arguments")


def string_edits(arguments: Mapping[str, Any]) -> list[StringEdit]:
    edits: list[StringEdit] = []
    if arguments.get("old_string") is not None or arguments.get("new_string") is not None:
        edits.append(StringEdit(string_argument(arguments, "old_string"),
                                string_argument(arguments, "new_string"),
                                flag_argument(arguments.get("replace_all"), "replace_all")))
    more = arguments.get("edits")
    if more is not None:
        if not isinstance(more, list) or not all(isinstance(e, dict) for e in more):
            raise ToolRefused("The argument 'edits' must be a list of {old_string, new_string, "
                               "replace_all?} objects.", "invalid_arguments")
        for index, item in enumerate(more):
            try:
                edits.append(StringEdit(string_argument(item, "old_string"),
                                        string_argument(item, "new_string"),
                                        flag_argument(item.get("replace_all"), "replace_all")))
            except ToolRefused as exc:
                raise ToolRefused(f"edits[{index}]: {exc.message}", exc.code) from None
    if not edits:
        raise ToolRefused("Give old_string and new_string (or a list of edits).",
                           "invalid_arguments")
    return edits


def after_texts(output: Mapping[str, Any]) -> dict[str, str | None]:
    """What each path holds once the plan is applied (None: gone), for
    checkpoints (agentls.core.checkpoints.files)."""
    after: dict[str, str | None] = {}
    if output.get("old_path"):
        after[str(output["old_path"])] = None
    new_text = output.get("new_text")
    after[str(output["path"])] = new_text if isinstance(new_text, str) else None
    return after
