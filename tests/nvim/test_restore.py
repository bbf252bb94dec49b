""":AgentRestore in a real Neovim against the real server (scripted provider):
the agent edits main.py and creates pkg/util.py (approved with the stubbed
vim.ui.select); :AgentRestore with no turn asks which turn with a picker,
then the buffer is back as it was and the created file is gone, with no
approval question. A buffer the user changed after the agent is a conflict,
reported and left alone, until :AgentRestore! overwrites it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pynvim.api.common import NvimError

from tests.nvim.conftest import MAIN_PY
from tests.nvim.harness import Editor, scripted_settings, write_script

CHAT = "require('agentls.chat')"
RESTORE = "require('agentls.restore')"
CALLS = [
    {"name": "edit_file", "id": "e1", "arguments": {
        "path": "main.py", "old_string": 'return "hi " + name',
        "new_string": 'return "hello " + name'}},
    {"name": "write_file", "id": "w1",
     "arguments": {"path": "pkg/util.py", "content": "def util():\n    return 1\n"}},
]


def main_lines(ed: Editor) -> list[str]:
    lines: list[str] = ed.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr('main.py'), "
                              "0, -1, false)")
    return lines


def run_turn(editor: Callable[..., Editor], tmp_path: Path) -> Editor:
    script = write_script(tmp_path / "script.json", responses=[
        {"text": "I will change it.", "tool_calls": CALLS},
        {"text": "Finished."},
    ])
    ed = editor("main.py")
    ed.setup_agentls(settings=scripted_settings(script))
    ed.wait_attached()
    ed.cmd("AgentChat change things")
    for _ in CALLS:  # annotation mode: Apply / Reject for each edit
        ed.wait_for("_G.picks.pending ~= nil", message="the approval question")
        ed.lua("_G.picks.answer(1)")
    ed.wait_for(f"{CHAT}.get() ~= nil and {CHAT}.get().busy == false and "
                f"table.concat(vim.api.nvim_buf_get_lines({CHAT}.get().buf, 0, -1, false), "
                "'\\n'):find('Finished.', 1, true) ~= nil",
                message="the turn to finish", timeout=20)
    assert main_lines(ed)[-1] == '    return "hello " + name'
    assert ed.lua("return vim.fn.bufnr('pkg/util.py') ~= -1") is True
    return ed


def last_report(ed: Editor) -> dict[str, Any]:
    ed.wait_for(f"{RESTORE}.last ~= nil", message="the restore answer")
    report: dict[str, Any] = ed.lua(f"local r = {RESTORE}.last; {RESTORE}.last = nil; return r")
    return report


def test_agent_restore_picks_a_turn_and_puts_the_files_back(
    editor: Callable[..., Editor], tmp_path: Path
) -> None:
    ed = run_turn(editor, tmp_path)
    asked = ed.lua("return #_G.picks.calls")
    ed.cmd("AgentRestore")
    ed.wait_for("_G.picks.pending ~= nil", message="the turn picker")
    picker = ed.lua("return _G.picks.calls[#_G.picks.calls]")
    assert picker["kind"] == "agentls.checkpoint"
    assert picker["prompt"] == "agentls: restore files to before which turn?"
    [item] = picker["items"]
    assert item.startswith("Turn 1 · ") and item.endswith("main.py, pkg/util.py")
    ed.lua("_G.picks.answer(1)")

    report = last_report(ed)
    assert report["turn"] == 1
    assert sorted(report["result"]["restored"]) == ["main.py", "pkg/util.py"]
    assert report["result"]["conflicts"] == []
    assert main_lines(ed) == MAIN_PY.splitlines()
    ed.wait_for("vim.fn.bufnr('pkg/util.py') == -1 or "
                "not vim.api.nvim_buf_is_loaded(vim.fn.bufnr('pkg/util.py'))",
                message="the created file's buffer to go")
    assert not (tmp_path / "ws" / "pkg" / "util.py").exists()
    assert ed.lua("return #_G.picks.calls") == asked + 1  # the picker only: no approval
    chat = ed.buffer_text(ed.lua(f"return {CHAT}.get().buf"))
    assert "restored 2 files to before turn 1" in chat
    assert "run_command" in chat


def test_agent_restore_leaves_the_users_change_alone_unless_banged(
    editor: Callable[..., Editor], tmp_path: Path
) -> None:
    ed = run_turn(editor, tmp_path)
    ed.lua("vim.api.nvim_buf_set_lines(vim.fn.bufnr('main.py'), 0, 1, false, "
           "{'def answer():  # mine'})")
    ed.cmd("AgentRestore 1")
    report = last_report(ed)
    assert report["result"]["restored"] == ["pkg/util.py"]
    [conflict] = report["result"]["conflicts"]
    assert conflict["path"] == "main.py"
    assert "changed by someone else" in conflict["reason"]
    assert main_lines(ed)[0] == "def answer():  # mine"  # left alone
    assert main_lines(ed)[-1] == '    return "hello " + name'
    chat = ed.buffer_text(ed.lua(f"return {CHAT}.get().buf"))
    assert ":AgentRestore! 1" in chat

    ed.cmd("AgentRestore! 1")
    report = last_report(ed)
    assert sorted(report["result"]["restored"]) == ["main.py", "pkg/util.py"]
    assert main_lines(ed) == MAIN_PY.splitlines()

    # A bad turn is an error message (vim.notify ERROR), and nothing is sent.
    with pytest.raises(NvimError, match="takes a turn number"):
        ed.cmd("AgentRestore x")
    assert ed.lua(f"return {RESTORE}.last") is None
