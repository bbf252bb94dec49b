"""Checkpoints over real LSP: the server runs as a subprocess, the scripted
provider makes the file changes, and the test client plays the editor
(tests/e2e/test_edits.py's Editor: open buffers, applyEdit applied to them
or to the disk, didChange sent back).

Covered: write, edit, delete and rename across two turns, listed by
agentls/checkpoints; a restore of the first turn puts everything back
(created file removed, deleted file re-created, rename reversed, buffer
text restored) through one workspace/applyEdit with no approval question,
in both approval modes; restoring twice is a no-op; a file the user changed
since the agent wrote it is a conflict left alone unless `force`; declined
edits leave no checkpoint; bad input (unknown session, turn without a
checkpoint, bad params, a file that is now a folder or outside the
workspace) answers -32602 or a conflict and writes nothing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.e2e.helpers import plain
from tests.e2e.test_edits import (
    TIMEOUT,
    Editor,
    call,
    capabilities,
    chat,
    editor_session,
    scripted,
)


async def request(editor: Editor, method: str, params: dict[str, Any]) -> dict[str, Any]:
    result = await asyncio.wait_for(
        editor.client.protocol.send_request_async(method, params), TIMEOUT)
    answer: dict[str, Any] = plain(result)
    return answer


async def checkpoints(editor: Editor, session_id: str) -> list[dict[str, Any]]:
    answer = await request(editor, "agentls/checkpoints", {"sessionId": session_id})
    found: list[dict[str, Any]] = answer["checkpoints"]
    return found


async def restore(editor: Editor, session_id: str, turn: int, **extra: Any) -> dict[str, Any]:
    return await request(editor, "agentls/restoreCheckpoint",
                         {"sessionId": session_id, "turn": turn, **extra})


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    (root / "b.txt").write_text("bravo\n")
    (root / "c.txt").write_text("charlie\n")
    return root


TWO_TURNS = [
    # turn 1: create new.txt, edit the open buffer a.txt
    call("write_file", "t1a", path="new.txt", content="brand new\n"),
    call("edit_file", "t1b", path="a.txt", old_string="alpha", new_string="ALPHA"),
    {"text": "Turn one done."},
    # turn 2: delete b.txt, rename c.txt -> d.txt, edit a.txt again
    call("delete_file", "t2a", path="b.txt"),
    call("rename_file", "t2b", path="c.txt", new_path="sub/d.txt"),
    call("edit_file", "t2c", path="a.txt", old_string="ALPHA", new_string="ALPHA 2"),
    {"text": "Turn two done."},
]


def files_of(workspace: Path) -> dict[str, str]:
    return {p.relative_to(workspace).as_posix(): p.read_text()
            for p in sorted(workspace.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("mode", ["annotation", "message"])
async def test_restoring_the_first_turn_undoes_both_turns(
    tmp_path: Path, workspace: Path, mode: str
) -> None:
    settings, _ = scripted(tmp_path, "two", TWO_TURNS)
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=mode == "annotation")) as ed:
        ed.answer = "Allow for session"
        ed.open("a.txt", "alpha\n")
        first = await chat(ed, prompt="Turn one")
        assert first["status"] == "completed", first
        sid = first["sessionId"]
        second = await chat(ed, prompt="Turn two", sessionId=sid)
        assert second["status"] == "completed", second
        assert ed.text("a.txt") == "ALPHA 2\n"
        assert files_of(workspace) == {"a.txt": "alpha\n", "new.txt": "brand new\n",
                                       "sub/d.txt": "charlie\n"}

        listed = await checkpoints(ed, sid)
        assert [(c["turn"], c["messageIndex"], c["files"]) for c in listed] == [
            (1, 0, ["new.txt", "a.txt"]),
            (2, 6, ["b.txt", "c.txt", "sub/d.txt", "a.txt"]),
        ]
        assert all(c["createdAt"].endswith("Z") for c in listed)
        stored = await request(ed, "agentls/session", {"sessionId": sid})
        assert stored["messages"][6]["content"].startswith("Turn two")

        asked_before, sent_before = len(ed.asked), len(ed.edits)
        answer = await restore(ed, sid, 1)
        assert sorted(answer["restored"]) == ["a.txt", "b.txt", "c.txt", "new.txt", "sub/d.txt"]
        assert answer["conflicts"] == []
        assert "run_command" in answer["note"]
        # one applyEdit, no question, nothing to confirm
        assert len(ed.asked) == asked_before
        [sent] = ed.edits[sent_before:]
        assert sent.label == "agentls: restore checkpoint (before turn 1)"
        # the rename is undone by a rename (the buffer survives), not delete + create
        [rename] = [c for c in sent.edit.document_changes or [] if isinstance(c, types.RenameFile)]
        assert (rename.old_uri, rename.new_uri) == (ed.uri("sub/d.txt"), ed.uri("c.txt"))
        if mode == "annotation":
            annotation = (sent.edit.change_annotations or {})["agentls"]
            assert annotation.needs_confirmation is False
        assert ed.text("a.txt") == "alpha\n"  # the open buffer, not the disk
        assert files_of(workspace) == {"a.txt": "alpha\n", "b.txt": "bravo\n",
                                       "c.txt": "charlie\n"}

        # A second restore finds everything as it was: nothing sent.
        again = await restore(ed, sid, 1)
        assert sorted(again["restored"]) == sorted(answer["restored"])
        assert again["conflicts"] == [] and len(ed.edits) == sent_before + 1


async def test_restoring_the_second_turn_keeps_the_first(
    tmp_path: Path, workspace: Path
) -> None:
    settings, _ = scripted(tmp_path, "second", TWO_TURNS)
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        ed.open("a.txt", "alpha\n")
        sid = (await chat(ed, prompt="Turn one"))["sessionId"]
        await chat(ed, prompt="Turn two", sessionId=sid)
        answer = await restore(ed, sid, 2)
        assert sorted(answer["restored"]) == ["a.txt", "b.txt", "c.txt", "sub/d.txt"]
        assert ed.text("a.txt") == "ALPHA\n"
        assert files_of(workspace) == {"a.txt": "alpha\n", "b.txt": "bravo\n",
                                       "c.txt": "charlie\n", "new.txt": "brand new\n"}
        # then the first turn too, from there
        answer = await restore(ed, sid, 1)
        assert answer["conflicts"] == []
        assert ed.text("a.txt") == "alpha\n"
        assert not (workspace / "new.txt").exists()


async def test_a_file_changed_by_the_user_is_a_conflict_unless_forced(
    tmp_path: Path, workspace: Path
) -> None:
    settings, _ = scripted(tmp_path, "conflict", TWO_TURNS[:3])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        uri = ed.open("a.txt", "alpha\n")
        sid = (await chat(ed, prompt="Turn one"))["sessionId"]
        ed.change(uri, "ALPHA\ntyped by the user, unsaved\n")
        sent = len(ed.edits)
        answer = await restore(ed, sid, 1)
        assert answer["restored"] == ["new.txt"]
        [conflict] = answer["conflicts"]
        assert conflict["path"] == "a.txt"
        assert "changed by someone else since the agent last wrote it" in conflict["reason"]
        assert "force" in conflict["reason"]
        assert ed.text("a.txt") == "ALPHA\ntyped by the user, unsaved\n"  # not clobbered
        assert not (workspace / "new.txt").exists()
        [restore_edit] = ed.edits[sent:]
        assert all(getattr(c, "uri", None) != uri and
                   getattr(getattr(c, "text_document", None), "uri", None) != uri
                   for c in restore_edit.edit.document_changes or [])

        forced = await restore(ed, sid, 1, force=True)
        assert sorted(forced["restored"]) == ["a.txt", "new.txt"]
        assert forced["conflicts"] == []
        assert ed.text("a.txt") == "alpha\n"


async def test_declined_edits_leave_no_checkpoint(tmp_path: Path, workspace: Path) -> None:
    settings, _ = scripted(tmp_path, "declined", [
        call("edit_file", "x1", path="a.txt", old_string="alpha", new_string="A"),
        {"text": "ok"},
    ])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        ed.confirm = False
        result = await chat(ed, prompt="Try")
        assert result["status"] == "completed"
        assert await checkpoints(ed, result["sessionId"]) == []
        assert (workspace / "a.txt").read_text() == "alpha\n"


# --------------------------------------------------------------------------- bad input


async def test_bad_requests_answer_invalid_params(tmp_path: Path, workspace: Path) -> None:
    settings, _ = scripted(tmp_path, "bad", [
        call("write_file", "b1", path="new.txt", content="x\n"),
        {"text": "one"},
        call("read_file", "b2", path="new.txt"),
        {"text": "two"},
    ])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        sid = (await chat(ed, prompt="one"))["sessionId"]
        await chat(ed, prompt="two", sessionId=sid)  # changes nothing: no checkpoint
        sent = len(ed.edits)

        async def refused(method: str, params: Any, said: str) -> None:
            with pytest.raises(JsonRpcException) as error:
                await request(ed, method, params)
            assert error.value.code == -32602, error.value
            assert said in str(error.value), str(error.value)

        await refused("agentls/checkpoints", {"sessionId": "nope"}, "Unknown sessionId 'nope'")
        await refused("agentls/checkpoints", {}, "needs `sessionId`")
        await refused("agentls/restoreCheckpoint", {"sessionId": "nope", "turn": 1},
                      "Unknown sessionId 'nope'")
        await refused("agentls/restoreCheckpoint", {"sessionId": sid, "turn": 2},
                      "no checkpoint for turn 2 (turns with checkpoints: 1)")
        for bad in ({"sessionId": sid}, {"sessionId": sid, "turn": "1"},
                    {"sessionId": sid, "turn": 0}, {"sessionId": sid, "turn": True}):
            await refused("agentls/restoreCheckpoint", bad, "needs `turn`")
        await refused("agentls/restoreCheckpoint", {"sessionId": sid, "turn": 1, "force": "yes"},
                      "`force` must be true or false")
        assert len(ed.edits) == sent  # nothing was sent to the editor
        assert (workspace / "new.txt").read_text() == "x\n"


async def test_no_restore_while_a_turn_of_the_session_runs(tmp_path: Path, workspace: Path
                                                          ) -> None:
    settings, _ = scripted(tmp_path, "busy", [*TWO_TURNS[:3],
                                               {"chunks": ["thinking"], "stall": True}])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        sid = (await chat(ed, prompt="Turn one"))["sessionId"]
        running = asyncio.ensure_future(chat(ed, prompt="Turn two", sessionId=sid))
        for _ in range(200):  # until the second prompt is stored: the turn runs
            if sum(1 for kind, p in ed.events if kind == "message"
                   and p["message"]["role"] == "user") == 2:
                break
            await asyncio.sleep(0.05)
        with pytest.raises(JsonRpcException) as busy:
            await restore(ed, sid, 1)
        assert busy.value.code == -32602
        assert "has a turn running" in str(busy.value) and "cancel" in str(busy.value)
        await asyncio.wait_for(ed.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="agentls.cancel", arguments=[sid])), TIMEOUT)
        assert (await running)["status"] == "cancelled"
        answer = await restore(ed, sid, 1)  # the turn is over: now it restores
        assert sorted(answer["restored"]) == ["a.txt", "new.txt"]


async def test_a_file_that_is_now_a_folder_is_a_conflict(tmp_path: Path, workspace: Path
                                                        ) -> None:
    settings, _ = scripted(tmp_path, "folder", TWO_TURNS[:3])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        sid = (await chat(ed, prompt="Turn one"))["sessionId"]
        (workspace / "new.txt").unlink()
        (workspace / "new.txt").mkdir()
        (workspace / "new.txt" / "keep.txt").write_text("mine")
        answer = await restore(ed, sid, 1, force=True)
        assert answer["restored"] == ["a.txt"]
        [conflict] = answer["conflicts"]
        assert conflict == {"path": "new.txt", "reason": "new.txt is a folder now; left alone."}
        assert (workspace / "new.txt" / "keep.txt").read_text() == "mine"
        assert (workspace / "a.txt").read_text() == "alpha\n"


async def test_files_outside_the_workspace_now_are_conflicts(tmp_path: Path, workspace: Path
                                                            ) -> None:
    settings, _ = scripted(tmp_path, "outside", TWO_TURNS[:3])
    state = tmp_path / "state"
    async with editor_session(workspace, state, settings, capabilities(annotations=True)) as ed:
        sid = (await chat(ed, prompt="Turn one"))["sessionId"]
    other = tmp_path / "other"
    other.mkdir()
    # The session is resumed from a server whose workspace is another folder.
    async with editor_session(other, state, settings, capabilities(annotations=True)) as ed:
        answer = await restore(ed, sid, 1, force=True)
        assert answer["restored"] == []
        assert sorted(c["path"] for c in answer["conflicts"]) == sorted(
            [str((workspace / "new.txt").resolve()), str((workspace / "a.txt").resolve())])
        assert all("outside the workspace folders" in c["reason"] for c in answer["conflicts"])
        assert ed.edits == []
    assert (workspace / "new.txt").read_text() == "brand new\n"
    assert (workspace / "a.txt").read_text() == "ALPHA\n"


async def test_an_editor_refusing_the_restore_leaves_every_file_as_a_conflict(
    tmp_path: Path, workspace: Path
) -> None:
    settings, _ = scripted(tmp_path, "refused", TWO_TURNS[:3])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        sid = (await chat(ed, prompt="Turn one"))["sessionId"]
        ed.refuse = "Read-only file system"
        answer = await restore(ed, sid, 1)
        assert answer["restored"] == []
        assert sorted(c["path"] for c in answer["conflicts"]) == ["a.txt", "new.txt"]
        assert all("Read-only file system" in c["reason"] for c in answer["conflicts"])
        ed.refuse = None
        # the refused attempt did not count as the agent's write: it works now
        answer = await restore(ed, sid, 1)
        assert sorted(answer["restored"]) == ["a.txt", "new.txt"] and not answer["conflicts"]
        assert files_of(workspace) == {"a.txt": "alpha\n", "b.txt": "bravo\n",
                                       "c.txt": "charlie\n"}


async def test_deleting_a_session_deletes_its_checkpoints(tmp_path: Path, workspace: Path
                                                         ) -> None:
    settings, _ = scripted(tmp_path, "delete", TWO_TURNS[:3])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        sid = (await chat(ed, prompt="Turn one"))["sessionId"]
        assert len(await checkpoints(ed, sid)) == 1
        await request(ed, "agentls/deleteSession", {"sessionId": sid})
        with pytest.raises(JsonRpcException):
            await checkpoints(ed, sid)
    import sqlite3

    conn = sqlite3.connect(tmp_path / "state" / "sessions.sqlite3")
    try:
        assert conn.execute("SELECT COUNT(*) FROM checkpoint_files").fetchone()[0] == 0
    finally:
        conn.close()

