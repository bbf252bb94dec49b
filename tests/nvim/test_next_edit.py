"""Next edit suggestions in a real Neovim: after the user renames a
parameter (ciw + Esc), the plugin asks textDocument/copilotInlineEdit and
shows the matching edits at their lines (the replaced text highlighted, the
new text as virtual text, a sign); <Tab> jumps to the first, <Tab> again
applies them and runs the accept commands; <Esc> dismisses. The server
runs with the scripted provider, a base (FIM) model whose answer is the
region rewritten."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.nvim.harness import Editor, scripted_settings, write_script

SOURCE = "def scale(x, factor):\n    return x * factor\n\n\nprint(scale(2, factor=3))\n"
RENAMED = SOURCE.replace("factor", "ratio")
END = "<|editable_region_end|>"
MARKS = ("(function() local ns = require('agentls.next_edit').namespace "
         "return vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true }) end)()")


def start(editor: Callable[..., Editor], tmp_path: Path) -> Editor:
    (tmp_path / "ws" / "scale.py").write_text(SOURCE)
    script = write_script(tmp_path / "script.json", fim=[{"text": RENAMED + END}], loop=True)
    ed = editor("scale.py")
    ed.setup_agentls(
        settings=scripted_settings(script, inlineCompletion={"enabled": False},
                                   nextEdit={"debounceMs": 0}),
        inline_completion={"enabled": False}, next_edit={"debounce": 20})
    ed.wait_attached()
    return ed


def rename(ed: Editor) -> list[Any]:
    ed.lua("vim.api.nvim_win_set_cursor(0, { 1, 14 })")  # on `factor`
    ed.keys("ciwratio<Esc>")
    ed.wait_for("vim.api.nvim_get_mode().mode == 'n'", message="normal mode")
    marks: list[Any] = ed.wait_for(f"(function() local m = {MARKS} "
                                   "return #m > 0 and m or nil end)()",
                                   message="the next edit shown", timeout=20)
    return marks


def test_rename_shows_the_call_site_and_tab_applies_it(editor: Callable[..., Editor],
                                                       tmp_path: Path) -> None:
    ed = start(editor, tmp_path)
    marks = rename(ed)
    replaced = sorted((m[1], m[2], m[3]["end_row"], m[3]["end_col"]) for m in marks
                      if m[3].get("hl_group") == "AgentlsNextEditDelete")
    assert replaced == [(1, 15, 1, 21), (4, 15, 4, 21)]  # `factor` at its use and call
    inserted = [chunk[0] for m in marks for chunk in m[3].get("virt_text") or []]
    assert inserted.count("ratio") == 2
    assert any((m[3].get("sign_text") or "").strip() == "⇥" for m in marks)
    assert ed.buffer_text() + "\n" == SOURCE.replace("scale(x, factor)", "scale(x, ratio)")

    ed.keys("<Tab>")  # jump to the first edit
    ed.wait_for("vim.api.nvim_win_get_cursor(0)[1] == 2", message="cursor on the edit")
    assert ed.buffer_text() + "\n" != RENAMED
    ed.keys("<Tab>")  # apply
    ed.wait_for("table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n') == ...",
                RENAMED.rstrip("\n"), message="the edits applied")
    counters = ed.wait_until(
        lambda: (c := ed.request("agentls/status")["nextEdits"])["accepted"] == 2 and c,
        message="both edits counted as accepted")
    assert counters["served"] >= 1


def test_esc_dismisses_and_tab_is_tab_again(editor: Callable[..., Editor],
                                            tmp_path: Path) -> None:
    ed = start(editor, tmp_path)
    rename(ed)
    ed.keys("<Esc>")
    ed.wait_for(f"#{MARKS} == 0", message="the suggestion cleared")
    before = ed.buffer_text()
    ed.keys("<Tab>")  # nothing shown: <Tab> is Neovim's own (jump forward), not an apply
    assert ed.buffer_text() == before
    status = ed.request("agentls/status")
    assert status["nextEdits"]["accepted"] == 0


def test_an_edit_off_screen_is_announced_at_the_cursor(editor: Callable[..., Editor],
                                                       tmp_path: Path) -> None:
    ed = start(editor, tmp_path)
    # A window two lines high: the call site (line 5) is off screen.
    ed.cmd("aboveleft new")
    ed.cmd("wincmd j")
    ed.lua("vim.api.nvim_win_set_height(0, 2)")
    marks = rename(ed)
    hints = [chunk[0] for m in marks if m[1] == 0 for chunk in m[3].get("virt_text") or []]
    assert any("next edit at line 5 (Tab)" in hint for hint in hints), marks
