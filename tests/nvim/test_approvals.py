"""Approvals in a real Neovim against the real server: the scripted agent
calls edit_file / run_command, the plugin asks with vim.ui.select (stubbed
to answer asynchronously, as picker plugins do) while a scratch split shows
the diff; approving changes the file buffer, denying leaves it unchanged.

Two server modes: `annotation` (the default with Neovim, which advertises
changeAnnotationSupport: workspace/applyEdit with needsConfirmation) and
`message` (window/showMessageRequest: Allow once / Allow for session / Deny).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.nvim.conftest import MAIN_PY
from tests.nvim.harness import Editor, scripted_settings, write_script

CHAT = "require('agentls.chat')"
EDIT = {"name": "edit_file", "id": "e1", "arguments": {
    "path": "main.py", "old_string": 'return "hi " + name', "new_string": 'return "hello " + name'}}
PREVIEW = ("(function() for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do "
           "local b = vim.api.nvim_win_get_buf(w) "
           "if vim.api.nvim_buf_get_name(b):find('agentls://preview/', 1, true) then "
           "return table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\\n') end end end)()")


def start(editor: Callable[..., Editor], tmp_path: Path, calls: list[dict[str, Any]],
          **settings: Any) -> Editor:
    script = write_script(tmp_path / "script.json", responses=[
        {"text": "I will change it.", "tool_calls": calls},
        {"text": "Finished."},
    ])
    ed = editor("main.py")
    ed.setup_agentls(settings=scripted_settings(script, **settings))
    ed.wait_attached()
    return ed


def main_lines(ed: Editor) -> list[str]:
    lines: list[str] = ed.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr('main.py'), "
                              "0, -1, false)")
    return lines


def wait_for_question(ed: Editor) -> dict[str, Any]:
    ed.wait_for("_G.picks.pending ~= nil", message="the approval question", timeout=20)
    call: dict[str, Any] = ed.lua("return _G.picks.calls[#_G.picks.calls]")
    assert call["kind"] == "agentls.approval"
    return call


def wait_turn_done(ed: Editor) -> str:
    ed.wait_for(f"{CHAT}.get() ~= nil and {CHAT}.get().busy == false and "
                f"table.concat(vim.api.nvim_buf_get_lines({CHAT}.get().buf, 0, -1, false), "
                "'\\n'):find('Finished.', 1, true) ~= nil",
                message="the turn to finish", timeout=20)
    return ed.buffer_text(ed.lua(f"return {CHAT}.get().buf"))


@pytest.mark.parametrize("mode", ["annotation", "message"])
def test_approved_edit_changes_the_buffer(editor: Callable[..., Editor], tmp_path: Path,
                                          mode: str) -> None:
    ed = start(editor, tmp_path, [EDIT], approval={"mode": mode})
    ed.cmd("AgentChat please say hello")
    question = wait_for_question(ed)
    if mode == "annotation":
        assert question["prompt"] == "agentls: edit_file main.py"
        assert question["items"] == ["Apply", "Reject"]
    else:
        assert question["prompt"] == "agentls: edit_file main.py: allow this change?"
        assert question["items"] == ["Allow once", "Allow for session", "Deny"]
    # The diff is shown in a scratch split while the question is open...
    preview = ed.wait_for(PREVIEW, message="the diff preview")
    assert '-    return "hi " + name' in preview
    assert '+    return "hello " + name' in preview
    # ...and Neovim keeps working: nothing is blocked waiting for the answer.
    assert main_lines(ed) == MAIN_PY.splitlines()
    ed.keys("<C-w>p")
    assert ed.lua("return 6 * 7") == 42

    ed.lua("_G.picks.answer(1)")  # Apply / Allow once
    ed.wait_for("vim.api.nvim_buf_get_lines(vim.fn.bufnr('main.py'), 5, 6, false)[1] == "
                "'    return \"hello \" + name'", message="the edited buffer")
    text = wait_turn_done(ed)
    assert "◀ edit_file ✓" in text
    assert ed.lua(f"return {PREVIEW}") is None  # the preview closed
    assert main_lines(ed)[0] == "def answer():"  # the rest is untouched
    # Applied to the buffer, not written behind the user's back.
    assert ed.lua("return vim.bo[vim.fn.bufnr('main.py')].modified") is True


@pytest.mark.parametrize("mode", ["annotation", "message"])
def test_denied_edit_leaves_the_buffer_unchanged(editor: Callable[..., Editor],
                                                 tmp_path: Path, mode: str) -> None:
    ed = start(editor, tmp_path, [EDIT], approval={"mode": mode})
    ed.cmd("AgentChat please say hello")
    question = wait_for_question(ed)
    ed.wait_for(PREVIEW, message="the diff preview")
    ed.lua("_G.picks.answer_title(...)", question["items"][-1])  # Reject / Deny
    text = wait_turn_done(ed)
    assert "◀ edit_file ✗" in text
    assert main_lines(ed) == MAIN_PY.splitlines()
    assert ed.lua("return vim.bo[vim.fn.bufnr('main.py')].modified") is False
    assert (tmp_path / "ws" / "main.py").read_text() == MAIN_PY


def test_new_file_is_previewed_and_created(editor: Callable[..., Editor],
                                            tmp_path: Path) -> None:
    write = {"name": "write_file", "id": "w1",
             "arguments": {"path": "pkg/util.py", "content": "def util():\n    return 1\n"}}
    ed = start(editor, tmp_path, [write])
    ed.cmd("AgentChat add a util module")
    wait_for_question(ed)
    preview = ed.wait_for(PREVIEW, message="the preview")
    assert "new file: pkg/util.py" in preview
    assert "+def util():" in preview
    ed.lua("_G.picks.answer(1)")
    wait_turn_done(ed)
    lines = ed.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr('pkg/util.py'), 0, -1, false)")
    assert lines == ["def util():", "    return 1"]
    ed.cmd("wall")
    assert (tmp_path / "ws" / "pkg" / "util.py").read_text() == "def util():\n    return 1\n"


def test_text_appended_at_the_end_is_saved_exactly(editor: Callable[..., Editor],
                                                   tmp_path: Path) -> None:
    append = {"name": "edit_file", "id": "a1", "arguments": {
        "path": "main.py", "old_string": 'return "hi " + name\n',
        "new_string": 'return "hi " + name\n\n\ndef bye():\n    return "bye"\n'}}
    ed = start(editor, tmp_path, [append], approval={"mode": "message"})
    ed.cmd("AgentChat add bye")
    wait_for_question(ed)
    ed.lua("_G.picks.answer(1)")
    wait_turn_done(ed)
    assert main_lines(ed)[-3:] == ["", "def bye():", '    return "bye"']
    ed.cmd("wall")
    assert (tmp_path / "ws" / "main.py").read_text() == (
        MAIN_PY + '\n\ndef bye():\n    return "bye"\n')


def test_run_command_is_asked_through_vim_ui_select(editor: Callable[..., Editor],
                                                    tmp_path: Path) -> None:
    run = {"name": "run_command", "id": "r1", "arguments": {"argv": ["touch", "ran.txt"]}}
    ed = start(editor, tmp_path, [run])
    ed.cmd("AgentChat run it")
    question = wait_for_question(ed)
    assert "touch" in question["prompt"] or "touch" in (ed.lua(f"return {PREVIEW}") or "")
    ed.lua("_G.picks.answer_title(...)", question["items"][-1])  # the deny option
    text = wait_turn_done(ed)
    assert "◀ run_command ✗" in text
    assert not (tmp_path / "ws" / "ran.txt").exists()
