"""core/edit_paths: the last check before an edit is written, shared by the
LSP and ACP appliers (their messages are tested through each front)."""

from __future__ import annotations

import os
from pathlib import Path

from agentls.core.editor.edit_paths import UnsafeEditPath, edit_uris, unsafe_edit_path


def to_path(uri: str) -> str | None:
    return uri.removeprefix("file://") if uri.startswith("file://") else None


def text_edit(path: Path) -> dict:
    return {"documentChanges": [{"textDocument": {"uri": path.as_uri(), "version": None},
                                 "edits": []}]}


def test_every_uri_of_an_edit_is_checked(tmp_path: Path) -> None:
    edit = {"changes": {"file:///a": []}, "documentChanges": [
        {"kind": "rename", "oldUri": "file:///b", "newUri": "file:///c"},
        {"kind": "delete", "uri": "file:///d"}, "not a change"]}
    assert edit_uris(edit) == ["file:///a", "file:///b", "file:///c", "file:///d"]


def test_a_path_through_a_swapped_folder_leads_outside(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (workspace / "ok.txt").write_text("x")
    assert unsafe_edit_path(text_edit(workspace / "ok.txt"), [workspace], to_path) is None
    (workspace / "sub").symlink_to(outside)
    found = unsafe_edit_path(text_edit(workspace / "sub" / "f.txt"), [workspace], to_path)
    assert found == UnsafeEditPath(str(workspace / "sub" / "f.txt"))
    # without folders only the hard-link rule applies
    assert unsafe_edit_path(text_edit(workspace / "sub" / "f.txt"), [], to_path) is None


def test_a_file_with_another_hard_link_is_not_written(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x")
    os.link(tmp_path / "a.txt", tmp_path / "b.txt")
    found = unsafe_edit_path(text_edit(tmp_path / "a.txt"), [tmp_path], to_path)
    assert found == UnsafeEditPath(str(tmp_path / "a.txt"), 2)
