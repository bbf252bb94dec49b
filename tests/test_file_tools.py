"""The file-changing tools' edit builders, run through the core's
ToolExecutor as the orchestrator runs them, with a recording edit applier:
the WorkspaceEdits they build (documentChanges, versions, CreateFile /
DeleteFile / RenameFile, positions in the negotiated encoding), labels and
previews, the ToolResult.output contract linters read, and the failures the
agent is told about."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from agentls.core.editor.edits import DocumentSnapshot, EditOutcome, EditRequest, disk_snapshot
from agentls.core.editor.positions import code_units
from agentls.core.tools.contract import ToolContext, ToolRefused
from agentls.core.tools.executor import ToolExecution, ToolExecutor
from agentls.core.types.messages import ToolCall
from agentls.features.tools.files import DeleteFileTool, EditFileTool, RenameFileTool, WriteFileTool
from agentls.features.tools.text_edits import PREVIEW_MAX_LINES, unified_preview


class Editor:
    def __init__(self, outcome: EditOutcome | None = None) -> None:
        self.outcome = outcome or EditOutcome(applied=True)
        self.requests: list[EditRequest] = []

    async def apply(self, request: EditRequest) -> EditOutcome:
        self.requests.append(request)
        return self.outcome


class Lookup:
    """Open buffers (path -> (text, version)) over the disk."""

    def __init__(self, buffers: dict[Path, tuple[str, int]] | None = None,
                 encoding: str = "utf-16") -> None:
        self.buffers = buffers or {}
        self.position_encoding = encoding

    def __call__(self, path: str) -> DocumentSnapshot | None:
        target = Path(path)
        if target in self.buffers:
            text, version = self.buffers[target]
            return DocumentSnapshot(uri=target.as_uri(), path=path, text=text, version=version)
        return disk_snapshot(path)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 'disk'\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    return root.resolve()


TOOLS = [WriteFileTool(), EditFileTool(), DeleteFileTool(), RenameFileTool()]


def run(tool: str, arguments: dict[str, Any], root: Path | None, *,
        editor: Editor | None = None, lookup: Lookup | None = None,
        executor: ToolExecutor | None = None) -> ToolExecution:
    executor = executor or ToolExecutor(TOOLS, {})
    context = ToolContext(
        workspace_folders=(str(root),) if root is not None else (),
        snapshots=lookup if lookup is not None else Lookup(),
        editor=editor if editor is not None else Editor(),
        session_id="sess-1",
    )
    call = ToolCall(id="c1", tool=tool, arguments=arguments)
    return asyncio.run(asyncio.wait_for(executor.execute(call, context), 10))


def position(line: int, character: int) -> dict[str, int]:
    return {"line": line, "character": character}


# --------------------------------------------------------------------------- edit_file


def test_edit_file_builds_a_minimal_versioned_text_document_edit(ws: Path) -> None:
    target = ws / "src" / "app.py"
    editor = Editor()
    lookup = Lookup({target: ("def main():\n    return 'buffer'\n", 4)})
    done = run("edit_file", {"path": "src/app.py", "old_string": "'buffer'",
                             "new_string": "'changed'"}, ws, editor=editor, lookup=lookup)
    assert done.result.success, done.result
    [request] = editor.requests
    assert request.tool_name == "edit_file" and request.session_id == "sess-1"
    assert request.label == "agentls: edit_file src/app.py"
    assert request.paths == (str(target),)
    assert request.base_versions == {target.as_uri(): 4}
    assert request.confirm is False  # the gate decides; the tool never asks
    assert request.edit == {"documentChanges": [{
        "textDocument": {"uri": target.as_uri(), "version": 4},
        "edits": [{"range": {"start": position(1, 12), "end": position(1, 18)},
                   "newText": "changed"}],
    }]}
    assert "-    return 'buffer'" in request.preview
    assert "+    return 'changed'" in request.preview
    output = done.result.output
    assert output == {
        "path": str(target), "uri": target.as_uri(),
        "old_text": "def main():\n    return 'buffer'\n",
        "new_text": "def main():\n    return 'changed'\n",
        "changed_lines": [[1, 1]], "applied": True, "relative_path": "src/app.py",
    }
    assert done.content == "Edited src/app.py (changed lines: 2)."


def test_edit_file_reads_the_disk_with_a_null_version(ws: Path) -> None:
    editor = Editor()
    done = run("edit_file", {"path": "src/app.py", "old_string": "disk", "new_string": "d"},
               ws, editor=editor)
    assert done.result.success
    change = editor.requests[0].edit["documentChanges"][0]
    assert change["textDocument"]["version"] is None
    assert editor.requests[0].base_versions == {(ws / "src" / "app.py").as_uri(): None}


def test_the_need_is_an_edit_of_every_path_and_the_preview_is_prepared(ws: Path) -> None:
    executor = ToolExecutor(TOOLS, {})
    rename = ToolCall(id="c1", tool="rename_file",
                      arguments={"path": "src/app.py", "new_path": "src/main.py"})
    need = executor.need(rename)
    assert (need.kind, need.paths, need.remember) == ("edit", ("src/app.py", "src/main.py"),
                                                      True)
    edit = ToolCall(id="c2", tool="edit_file",
                    arguments={"path": "src/app.py", "old_string": "disk", "new_string": "d"})
    context = ToolContext(workspace_folders=(str(ws),), snapshots=Lookup(), editor=Editor())
    prepared = asyncio.run(executor.prepare(edit, context, executor.need(edit)))
    assert prepared.title == "agentls: edit_file src/app.py"
    assert "+    return 'd'" in prepared.preview and prepared.prepared is not None
    for arguments in ({}, {"path": 3}):
        with pytest.raises(ToolRefused):
            executor.need(ToolCall(id="c3", tool="write_file", arguments=arguments))


def test_positions_use_the_negotiated_encoding(ws: Path) -> None:
    target = ws / "src" / "app.py"
    text = "s = '😀é'; x = 1\n"
    for encoding, character in (("utf-16", 15), ("utf-8", 18), ("utf-32", 14)):
        editor = Editor()
        run("edit_file", {"path": "src/app.py", "old_string": "x = 1", "new_string": "x = 2"},
            ws, editor=editor, lookup=Lookup({target: (text, 1)}, encoding))
        [edit] = editor.requests[0].edit["documentChanges"][0]["edits"]
        assert edit["range"]["start"] == position(0, character), encoding
    assert code_units("😀é", "utf-16") == 3 and code_units("😀é", "utf-8") == 6


@pytest.mark.parametrize(("arguments", "code", "said"), [
    ({"old_string": "nowhere", "new_string": "x"}, "not_found", "was not found in src/app.py"),
    ({"old_string": "'", "new_string": '"'}, "ambiguous", "found 2 times"),
    ({"old_string": "", "new_string": "x"}, "invalid_arguments", "old_string is empty"),
    ({"old_string": "main", "new_string": "main"}, "invalid_arguments", "are the same"),
    ({}, "invalid_arguments", "Give old_string and new_string"),
    ({"edits": "nope"}, "invalid_arguments", "must be a list"),
    ({"old_string": "main", "new_string": "x", "replace_all": "sometimes"},
     "invalid_arguments", "true or false"),
])
def test_edit_file_failures_tell_the_agent_what_to_do(
    ws: Path, arguments: dict[str, Any], code: str, said: str
) -> None:
    editor = Editor()
    done = run("edit_file", {"path": "src/app.py", **arguments}, ws, editor=editor)
    assert not done.result.success
    assert done.result.error is not None
    assert done.result.error["code"] == code and said in done.result.error["message"]
    assert done.content.startswith("Error: ")
    assert editor.requests == []


def test_replace_all_and_multi_edit_in_order(ws: Path) -> None:
    target = ws / "src" / "app.py"
    editor = Editor()
    lookup = Lookup({target: ("a = 1\nb = 1\nc = 1\n", 2)})
    done = run("edit_file", {"path": "src/app.py", "edits": [
        {"old_string": "= 1", "new_string": "= 2", "replace_all": True},
        {"old_string": "b = 2", "new_string": "b = 3"},
    ]}, ws, editor=editor, lookup=lookup)
    assert done.result.success, done.result
    assert done.result.output["new_text"] == "a = 2\nb = 3\nc = 2\n"
    assert done.result.output["changed_lines"] == [[0, 2]]
    edits = editor.requests[0].edit["documentChanges"][0]["edits"]
    assert [e["newText"] for e in edits] == ["2", "3", "2"]


def test_a_failing_edit_in_a_multi_edit_changes_nothing(ws: Path) -> None:
    editor = Editor()
    done = run("edit_file", {"path": "src/app.py", "edits": [
        {"old_string": "disk", "new_string": "d"},
        {"old_string": "missing", "new_string": "x"},
    ]}, ws, editor=editor)
    assert done.result.error is not None
    assert done.result.error["code"] == "not_found"
    assert done.result.error["message"].startswith("edits[1]: ")
    assert editor.requests == []


def test_edit_file_matches_lf_old_string_in_a_crlf_file(ws: Path) -> None:
    target = ws / "src" / "app.py"
    editor = Editor()
    lookup = Lookup({target: ("one\r\ntwo\r\nthree\r\n", 1)})
    done = run("edit_file", {"path": "src/app.py", "old_string": "one\ntwo",
                             "new_string": "1\n2"}, ws, editor=editor, lookup=lookup)
    assert done.result.success
    assert done.result.output["new_text"] == "1\r\n2\r\nthree\r\n"


def test_edit_file_of_a_missing_file_points_to_write_file(ws: Path) -> None:
    done = run("edit_file", {"path": "nope.py", "old_string": "a", "new_string": "b"}, ws)
    assert done.result.error is not None
    assert done.result.error["code"] == "not_found" and "write_file" in done.result.error["message"]


# --------------------------------------------------------------------------- write_file


def test_write_file_creates_with_create_file_and_a_null_version_edit(ws: Path) -> None:
    editor = Editor()
    done = run("write_file", {"path": "pkg/new.py", "content": "x = 1\ny = 2\n"}, ws,
               editor=editor)
    assert done.result.success
    target = ws / "pkg" / "new.py"
    [request] = editor.requests
    assert request.edit == {"documentChanges": [
        {"kind": "create", "uri": target.as_uri(),
         "options": {"overwrite": False, "ignoreIfExists": False}},
        {"textDocument": {"uri": target.as_uri(), "version": None},
         "edits": [{"range": {"start": position(0, 0), "end": position(0, 0)},
                    "newText": "x = 1\ny = 2\n"}]},
    ]}
    assert request.base_versions == {target.as_uri(): None}
    assert request.preview.startswith("--- /dev/null\n+++ b/pkg/new.py")
    assert done.result.output["old_text"] is None
    assert done.result.output["changed_lines"] == [[0, 1]]
    assert done.content == "Created pkg/new.py (2 lines)."
    assert not target.exists()  # the tool never writes


def test_write_file_of_an_empty_new_file_sends_only_create_file(ws: Path) -> None:
    editor = Editor()
    done = run("write_file", {"path": "empty.txt", "content": ""}, ws, editor=editor)
    assert done.result.success
    assert [c.get("kind") for c in editor.requests[0].edit["documentChanges"]] == ["create"]
    assert done.result.output["changed_lines"] == []


def test_write_file_over_an_existing_file_sends_minimal_edits(ws: Path) -> None:
    editor = Editor()
    done = run("write_file", {"path": "src/app.py",
                              "content": "def main():\n    return 'new'\n"}, ws, editor=editor)
    assert done.result.success
    [change] = editor.requests[0].edit["documentChanges"]
    assert change["edits"] == [{"range": {"start": position(1, 12), "end": position(1, 16)},
                                "newText": "new"}]
    assert done.content == "Replaced the content of src/app.py (changed lines: 2)."


def test_write_file_with_identical_content_sends_nothing(ws: Path) -> None:
    editor = Editor()
    done = run("write_file", {"path": "src/app.py",
                              "content": "def main():\n    return 'disk'\n"}, ws, editor=editor)
    assert done.result.success and done.result.output["unchanged"] is True
    assert editor.requests == []
    assert "already has exactly this content" in done.content


def test_write_file_onto_a_folder_is_refused(ws: Path) -> None:
    done = run("write_file", {"path": "src", "content": "x"}, ws)
    assert done.result.error is not None and "is a folder" in done.result.error["message"]


# --------------------------------------------------------------------------- delete / rename


def test_delete_file_sends_delete_file_with_the_buffer_version(ws: Path) -> None:
    target = ws / "src" / "app.py"
    editor = Editor()
    done = run("delete_file", {"path": "src/app.py"}, ws, editor=editor,
               lookup=Lookup({target: ("buffer\n", 9)}))
    assert done.result.success
    [request] = editor.requests
    assert request.edit == {"documentChanges": [{
        "kind": "delete", "uri": target.as_uri(),
        "options": {"recursive": False, "ignoreIfNotExists": False}}]}
    assert request.base_versions == {target.as_uri(): 9}
    assert "-buffer" in request.preview and "+++ /dev/null" in request.preview
    assert done.result.output["new_text"] is None and done.result.output["old_text"] == "buffer\n"
    assert done.content == "Deleted src/app.py."


def test_delete_file_refuses_folders_and_missing_files(ws: Path) -> None:
    folder = run("delete_file", {"path": "src"}, ws)
    missing = run("delete_file", {"path": "nope.txt"}, ws)
    assert folder.result.error is not None and missing.result.error is not None
    assert "folder" in folder.result.error["message"]
    assert missing.result.error["code"] == "not_found"


def test_rename_file_sends_rename_file(ws: Path) -> None:
    editor = Editor()
    done = run("rename_file", {"path": "src/app.py", "new_path": "lib/main.py"}, ws,
               editor=editor)
    assert done.result.success
    source, target = ws / "src" / "app.py", ws / "lib" / "main.py"
    [request] = editor.requests
    assert request.label == "agentls: rename_file src/app.py -> lib/main.py"
    assert request.paths == (str(source), str(target))
    assert request.edit == {"documentChanges": [{
        "kind": "rename", "oldUri": source.as_uri(), "newUri": target.as_uri(),
        "options": {"overwrite": False, "ignoreIfExists": False}}]}
    output = done.result.output
    assert output["path"] == str(target) and output["old_path"] == str(source)
    assert output["old_uri"] == source.as_uri() and output["uri"] == target.as_uri()
    assert output["old_text"] == output["new_text"] and output["changed_lines"] == []
    assert done.content == "Renamed src/app.py to lib/main.py."


def test_rename_file_never_overwrites(ws: Path) -> None:
    (ws / "taken.py").write_text("x\n")
    done = run("rename_file", {"path": "src/app.py", "new_path": "taken.py"}, ws)
    assert done.result.error is not None and done.result.error["code"] == "already_exists"


# --------------------------------------------------------------------------- confinement


@pytest.mark.parametrize("tool", ["write_file", "edit_file", "delete_file", "rename_file"])
def test_paths_outside_the_workspace_are_refused(ws: Path, tool: str) -> None:
    os.symlink(ws.parent / "outside.txt", ws / "link.txt")
    arguments = {"content": "x", "old_string": "secret", "new_string": "x", "new_path": "y.txt"}
    for path in ("../outside.txt", str(ws.parent / "outside.txt"), "link.txt"):
        editor = Editor()
        done = run(tool, {**arguments, "path": path}, ws, editor=editor)
        assert done.result.error is not None, (tool, path)
        assert done.result.error["code"] == "outside_workspace", (tool, path)
        assert editor.requests == []
    editor = Editor()
    escape = run("rename_file", {"path": "src/app.py", "new_path": "../../x.py"}, ws,
                 editor=editor)
    assert escape.result.error is not None
    assert escape.result.error["code"] == "outside_workspace" and editor.requests == []


def test_without_a_workspace_folder_file_tools_ask_for_one(ws: Path) -> None:
    for tool in ("write_file", "edit_file", "delete_file", "rename_file"):
        done = run(tool, {"path": str(ws / "src" / "app.py"), "content": "x"}, None)
        assert done.result.error is not None
        assert done.result.error["code"] == "no_workspace"
        assert "open a folder" in done.result.error["message"]


def test_without_an_editor_nothing_is_attempted(ws: Path) -> None:
    executor = ToolExecutor(TOOLS, {})
    call = ToolCall(id="c1", tool="write_file", arguments={"path": "a.txt", "content": "x"})
    done = asyncio.run(executor.execute(call, ToolContext(workspace_folders=(str(ws),))))
    assert done.result.error is not None and done.result.error["code"] == "unsupported"


def test_binary_files_are_not_edited(ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"\x00\x01abc")
    (ws / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    binary = run("edit_file", {"path": "blob.bin", "old_string": "abc", "new_string": "x"}, ws)
    latin = run("edit_file", {"path": "latin.txt", "old_string": "caf", "new_string": "x"}, ws)
    assert binary.result.error is not None and latin.result.error is not None
    assert "binary" in binary.result.error["message"]
    assert "not UTF-8" in latin.result.error["message"]
    assert binary.result.error["code"] == "unreadable"


# --------------------------------------------------------------------------- the applier says no


@pytest.mark.parametrize("code", ["declined", "timeout", "stale", "failed", "unsupported"])
def test_a_refusal_from_the_applier_is_a_failed_result(ws: Path, code: str) -> None:
    editor = Editor(EditOutcome(applied=False, code=code,
                                reason="The user declined the change. Nothing was written."))
    done = run("edit_file", {"path": "src/app.py", "old_string": "disk", "new_string": "d"},
               ws, editor=editor)
    assert not done.result.success and done.result.error is not None
    assert done.result.error["code"] == code
    assert done.content == ("Error: edit_file src/app.py: The user declined the change. "
                            "Nothing was written.")


# --------------------------------------------------------------------------- previews


def test_transcript_preview_is_a_diff_against_the_disk(ws: Path) -> None:
    executor = ToolExecutor(TOOLS, {"workspace_folders": [str(ws)]})
    call = ToolCall(id="c1", tool="edit_file",
                    arguments={"path": "src/app.py", "old_string": "disk", "new_string": "d"})
    preview = executor.preview(call)
    assert preview.startswith("--- a/src/app.py\n+++ b/src/app.py\n@@")
    assert "-    return 'disk'\n+    return 'd'" in preview


def test_transcript_preview_uses_the_buffer_once_known(ws: Path) -> None:
    target = ws / "src" / "app.py"
    executor = ToolExecutor(TOOLS, {"workspace_folders": [str(ws)]})
    lookup = Lookup({target: ("x = 'buffer'\n", 3)})
    run("edit_file", {"path": "src/app.py", "old_string": "x", "new_string": "y"}, ws,
        lookup=lookup, executor=executor)
    call = ToolCall(id="c2", tool="edit_file",
                    arguments={"path": "src/app.py", "old_string": "buffer", "new_string": "b"})
    assert "-x = 'buffer'\n+x = 'b'" in executor.preview(call)


def test_transcript_preview_falls_back_to_the_arguments(ws: Path) -> None:
    executor = ToolExecutor(TOOLS, {})
    edit = ToolCall(id="c1", tool="edit_file",
                    arguments={"path": "a.py", "old_string": "x = 1", "new_string": "x = 2"})
    assert executor.preview(edit) == "--- a/a.py\n+++ b/a.py\n@@ @@\n-x = 1\n+x = 2"
    rename = ToolCall(id="c2", tool="rename_file", arguments={"path": "a", "new_path": "b"})
    assert executor.preview(rename) == "rename a -> b"


def test_previews_are_bounded() -> None:
    old = "".join(f"line {i}\n" for i in range(1000))
    new = "".join(f"LINE {i}\n" for i in range(1000))
    preview = unified_preview("a.txt", "a.txt", old, new)
    assert len(preview.splitlines()) <= PREVIEW_MAX_LINES + 1
    assert "more lines of diff not shown" in preview
    assert unified_preview("a", "a", "x\n", "x\n") == "(no changes to a)"
