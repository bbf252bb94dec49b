"""Checkpoint restore goes through the approval gate (docs/security.md),
through the REAL server: the scripted provider edits a file in a folder,
then the folder is replaced by a symlink into `.git` (another process, after
the checkpoint). `agentls/restoreCheckpoint` must not write `.git/config`
without the protected question (Allow once / Deny, no "for session"); a Deny
leaves it untouched. A path that now leads outside the workspace is a
conflict, a hard-linked file is refused, and a plain restore still asks
nothing (the user asked for it).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.test_checkpoints import restore
from tests.e2e.test_edits import call, capabilities, chat, editor_session, scripted

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX links")

GIT_CONFIG = "[core]\n\trepositoryformatversion = 0\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text(GIT_CONFIG)
    (root / "conf").mkdir()
    (root / "conf" / "config").write_text("plain setting\n")
    (root / "a.txt").write_text("alpha\n")
    return root


EDIT_CONF = [
    call("edit_file", "e1", path="conf/config", old_string="plain setting",
         new_string="agent setting"),
    {"text": "done"},
]
ALLOW_WRITES = {"mode": "message", "rules": [{"tool": "edit_file", "action": "allow"}]}


def swap_for_link_into_git(workspace: Path) -> None:
    shutil.rmtree(workspace / "conf")
    (workspace / "conf").symlink_to(workspace / ".git", target_is_directory=True)


@pytest.mark.parametrize("mode", ["message", "annotation"])
async def test_a_folder_swapped_for_a_link_into_git_asks_before_restoring(
    tmp_path: Path, workspace: Path, mode: str
) -> None:
    settings, _ = scripted(tmp_path, "swap", EDIT_CONF, approval={**ALLOW_WRITES, "mode": mode})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=mode == "annotation")) as ed:
        result = await chat(ed, prompt="Change the setting")
        assert result["status"] == "completed", result
        assert (workspace / "conf" / "config").read_text() == "agent setting\n"
        sid = result["sessionId"]
        swap_for_link_into_git(workspace)
        asked, sent = len(ed.asked), len(ed.edits)
        ed.answer, ed.confirm = "Deny", False
        answer = await restore(ed, sid, 1, force=True)
        assert (workspace / ".git" / "config").read_text() == GIT_CONFIG
        assert answer["restored"] == [] and answer["conflicts"], answer
        if mode == "message":  # the protected question, without "for session"
            [question] = ed.asked[asked:]
            assert "protected file" in question.message and "hooks run commands" in question.message
            assert [a.title for a in question.actions or []] == ["Allow once", "Deny"]
            assert ed.edits[sent:] == []
        else:  # the editor's review UI asks: the change needs confirmation
            assert ed.asked[asked:] == []
            [edit] = ed.edits[sent:]
            annotation = (edit.edit.change_annotations or {})["agentls"]
            assert annotation.needs_confirmation is True

        # Yes to that question: now it is written (the user saw where).
        ed.answer, ed.confirm = "Allow once", True
        again = await restore(ed, sid, 1, force=True)
        assert again["restored"] in (["conf/config"], [".git/config"]), again
        assert (workspace / ".git" / "config").read_text() == "plain setting\n"


async def test_a_plain_restore_asks_nothing(tmp_path: Path, workspace: Path) -> None:
    settings, _ = scripted(tmp_path, "plain", EDIT_CONF, approval=ALLOW_WRITES)
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        sid = (await chat(ed, prompt="Change the setting"))["sessionId"]
        asked = len(ed.asked)
        answer = await restore(ed, sid, 1)
        assert answer["restored"] == ["conf/config"] and answer["conflicts"] == []
        assert len(ed.asked) == asked
        assert (workspace / "conf" / "config").read_text() == "plain setting\n"


async def test_a_folder_swapped_for_a_link_outside_is_a_conflict(
    tmp_path: Path, workspace: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config").write_text("theirs\n")
    settings, _ = scripted(tmp_path, "out", EDIT_CONF, approval=ALLOW_WRITES)
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        sid = (await chat(ed, prompt="Change the setting"))["sessionId"]
        shutil.rmtree(workspace / "conf")
        (workspace / "conf").symlink_to(outside, target_is_directory=True)
        sent = len(ed.edits)
        answer = await restore(ed, sid, 1, force=True)
        assert answer["restored"] == [] and answer["conflicts"]
        assert ed.edits[sent:] == []
        assert (outside / "config").read_text() == "theirs\n"


async def test_a_hard_linked_file_is_not_restored(tmp_path: Path, workspace: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    settings, _ = scripted(tmp_path, "hl", [
        call("edit_file", "e1", path="a.txt", old_string="alpha", new_string="ALPHA"),
        {"text": "done"}], approval=ALLOW_WRITES)
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        sid = (await chat(ed, prompt="Edit"))["sessionId"]
        # a.txt is replaced by a hard link to a file outside, same text
        (outside / "target.txt").write_text("ALPHA\n")
        os.unlink(workspace / "a.txt")
        os.link(outside / "target.txt", workspace / "a.txt")
        sent = len(ed.edits)
        answer = await restore(ed, sid, 1, force=True)
        assert answer["restored"] == []
        assert any("hard link" in c["reason"] for c in answer["conflicts"]), answer
        assert ed.edits[sent:] == []
        assert (outside / "target.txt").read_text() == "ALPHA\n"


async def test_a_huge_turn_number_is_invalid_params_without_a_traceback(
    tmp_path: Path, workspace: Path
) -> None:
    # Bad params get -32602: turn = 2**70 answered -32603 with a Python traceback.
    settings, _ = scripted(tmp_path, "huge", EDIT_CONF, approval=ALLOW_WRITES)
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        sid = (await chat(ed, prompt="Change the setting"))["sessionId"]
        for turn in (2**70, 2**63):
            with pytest.raises(JsonRpcException) as error:
                await restore(ed, sid, turn)
            assert error.value.code == -32602, error.value
            assert "Traceback" not in str(error.value) and "turn" in str(error.value)
        # the server still answers
        assert (await restore(ed, sid, 1))["restored"] == ["conf/config"]
