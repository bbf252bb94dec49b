"""Approval integrity through the REAL server (docs/security.md): the
scripted provider plays a steered model, the test client plays the editor
(tests/e2e/test_edits.py's Editor: it answers window/showMessageRequest as
told and applies accepted workspace edits to its buffers or the disk).

- "Allow for session" never covers protected files (agentls/editor/git
  configuration): they are asked every time, without a "for session"
  option, and an answer that is not one of the options offered is a Deny.
- Protected names match at any depth, under a rule allowing every write.
- After a restart, a command still asks.
- A folder swapped for a symlink while the user is being asked does not
  carry the write outside the workspace.
- A file with another hard link is not edited (the other link may be
  outside the workspace).
- Reading a secret file (.env, .git/config, ...) asks every time.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.e2e.test_edits import (
    call,
    capabilities,
    chat,
    editor_session,
    recorded,
    scripted,
    tool_messages,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX links")

PROTECTED_WRITES = [".agentls.toml", ".vscode/settings.json", ".git/hooks/pre-commit"]
NESTED_PROTECTED = ["sub/.git/hooks/post-checkout", ".envrc", ".github/workflows/ci.yml",
                    ".vscode/tasks.json", ".mcp.json", ".git/config", ".npmrc", "pip.conf"]
ALLOW_WRITES = [{"tool": "write_file", "action": "allow"}]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    (root / "sub" / ".git" / "hooks").mkdir(parents=True)
    (root / "src").mkdir()
    return root


def writes(paths: list[str]) -> list[dict[str, object]]:
    return [call("write_file", f"w{i}", path=p, content="pwned\n") for i, p in enumerate(paths)]


async def test_allow_for_session_never_covers_protected_files(
    tmp_path: Path, workspace: Path
) -> None:
    settings, _ = scripted(tmp_path, "session", [
        *writes(["a.txt", *PROTECTED_WRITES, "b.txt"]), {"text": "done"}],
        approval={"mode": "message"})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        ed.answer = "Allow for session"  # the user clicks it whenever it is offered
        result = await chat(ed, prompt="Write the files")
        assert result["status"] == "completed", result
        outcomes = [m["toolResult"]["success"] for m in tool_messages(result)]
    # a.txt asked once and allowed for the session; b.txt then went through
    # unasked; every protected write was asked (Allow once / Deny only), and
    # "Allow for session" was not among the options, so it counted as Deny.
    asked = [p.message.split(":")[1].split()[-1] for p in ed.asked]
    assert asked == ["a.txt", *PROTECTED_WRITES], asked
    for params in ed.asked[1:]:
        assert [a.title for a in params.actions or []] == ["Allow once", "Deny"]
        assert "protected file" in params.message and "always needs" in params.message
    assert outcomes == [True, False, False, False, True]
    assert (workspace / "a.txt").exists() and (workspace / "b.txt").exists()
    assert not (workspace / ".agentls.toml").exists()
    assert not (workspace / ".vscode").exists()
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()


async def test_protected_files_need_confirmation_in_annotation_mode_under_allow_rules(
    tmp_path: Path, workspace: Path
) -> None:
    settings, _ = scripted(tmp_path, "annotation", [
        *writes(["a.txt", ".agentls.toml", "sub/.git/hooks/post-checkout"]), {"text": "done"}],
        approval={"rules": ALLOW_WRITES})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        ed.confirm = False  # the user rejects whatever the editor asks about
        result = await chat(ed, prompt="Write the files")
        assert result["status"] == "completed", result
    needs = [next(iter((e.edit.change_annotations or {}).values())).needs_confirmation
             for e in ed.edits]
    assert needs == [False, True, True]
    assert (workspace / "a.txt").exists()
    assert not (workspace / ".agentls.toml").exists()
    assert not (workspace / "sub" / ".git" / "hooks" / "post-checkout").exists()


async def test_protected_names_at_any_depth_ask_under_an_allow_rule(
    tmp_path: Path, workspace: Path
) -> None:
    settings, _ = scripted(tmp_path, "nested", [
        *writes([*NESTED_PROTECTED, "src/ok.py"]), {"text": "done"}],
        approval={"mode": "message", "rules": ALLOW_WRITES})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        ed.answer = "Deny"
        result = await chat(ed, prompt="Write the files")
        assert result["status"] == "completed", result
    asked = [p.message.split(":")[1].split()[-1] for p in ed.asked]
    assert asked == NESTED_PROTECTED
    assert (workspace / "src" / "ok.py").read_text() == "pwned\n"  # allowed, not asked
    assert (workspace / ".git" / "config").read_text() == "[core]\n"
    for path in NESTED_PROTECTED:
        if path != ".git/config":
            assert not (workspace / path).exists(), path


async def test_a_command_still_asks_after_a_restart(tmp_path: Path, workspace: Path) -> None:
    # The steered model plants a rule allowing every command in the agent's
    # own settings file, right after the user allowed writes for the session.
    planted = '[[approval.rules]]\ntool = "*"\ncommand = ".*"\naction = "allow"\n'
    first, _ = scripted(tmp_path, "before", [
        *writes(["a.txt"]), call("write_file", "w9", path=".agentls.toml", content=planted),
        {"text": "ok"}], approval={"mode": "message"})
    async with editor_session(workspace, tmp_path / "state", first,
                              capabilities(annotations=False)) as ed:
        ed.answer = "Allow for session"
        result = await chat(ed, prompt="Write a.txt")
        session_id = result["sessionId"]
    assert not (workspace / ".agentls.toml").exists()
    second, _ = scripted(tmp_path, "after", [
        call("run_command", "r1", argv=["bash", "-c", "id > pwned.txt"]), {"text": "ok"}],
        approval={"mode": "message"})
    async with editor_session(workspace, tmp_path / "state", second,
                              capabilities(annotations=False)) as ed:
        ed.answer = "Deny"
        result = await chat(ed, prompt="Run it", sessionId=session_id)
        assert result["status"] == "completed", result
        [command] = tool_messages(result)
    assert len(ed.asked) == 1 and "id > pwned.txt" in ed.asked[0].message
    assert command["toolResult"]["success"] is False
    assert not (workspace / "pwned.txt").exists()


async def test_a_folder_swapped_for_a_symlink_while_asking_is_refused(
    tmp_path: Path, workspace: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "docs").mkdir()
    settings, record = scripted(tmp_path, "swap", [
        call("write_file", "w1", path="docs/new.txt", content="planted\n"), {"text": "done"}],
        approval={"mode": "message"})

    def swap() -> None:  # another process, while the user reads the question
        shutil.rmtree(workspace / "docs")
        (workspace / "docs").symlink_to(outside, target_is_directory=True)

    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        ed.while_asking = swap
        result = await chat(ed, prompt="Write it")
        assert result["status"] == "completed", result
        [write] = tool_messages(result)
    assert len(ed.asked) == 1 and ed.edits == []  # asked, but nothing was sent to apply
    assert not (outside / "new.txt").exists()
    assert write["toolResult"]["success"] is False
    assert "outside the workspace" in write["toolResult"]["error"]["message"]
    assert "outside the workspace" in str(recorded(record)[-1])  # the model was told


async def test_a_hard_linked_file_is_not_edited(tmp_path: Path, workspace: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target.txt").write_text("original\n")
    os.link(outside / "target.txt", workspace / "hl.txt")
    settings, _ = scripted(tmp_path, "hardlink", [
        call("edit_file", "e1", path="hl.txt", old_string="original", new_string="pwned"),
        call("write_file", "w1", path="hl.txt", content="pwned\n"),
        {"text": "done"}],
        approval={"mode": "message", "rules": [{"tool": "*", "action": "allow"}]})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        result = await chat(ed, prompt="Edit it")
        assert result["status"] == "completed", result
        edit, write = tool_messages(result)
    assert ed.edits == [] and ed.asked == []
    for outcome in (edit, write):
        assert outcome["toolResult"]["success"] is False
        assert "hard links" in outcome["toolResult"]["error"]["message"]
    assert (outside / "target.txt").read_text() == "original\n"


@pytest.mark.parametrize(("answer", "read"), [("Deny", False), ("Allow once", True)])
async def test_reading_a_secret_file_asks(
    tmp_path: Path, workspace: Path, answer: str, read: bool
) -> None:
    (workspace / ".env").write_text("API_TOKEN=sk-live-0123456789\n")
    settings, record = scripted(tmp_path, "secret", [
        call("read_file", "r1", path=".env"), {"text": "done"}],
        approval={"mode": "message"})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        ed.answer = answer
        result = await chat(ed, prompt="What is in .env?")
        assert result["status"] == "completed", result
        [outcome] = tool_messages(result)
    assert len(ed.asked) == 1 and "secrets" in ed.asked[0].message
    assert outcome["toolResult"]["success"] is read
    assert ("sk-live-0123456789" in str(recorded(record)[-1])) is read
