"""Inline completion in a real Neovim: ghost text from the server appears
while typing and the plugin's keys accept it (all of it, a word, a line) or
dismiss it. The server runs with the scripted provider (FIM answers from a
script)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.nvim.harness import Editor, scripted_settings, write_script

NS = "vim.api.nvim_get_namespaces()['nvim.lsp.inline_completion']"
GHOST = (f"(function() local ns = {NS}; if not ns then return nil end "
         "local marks = vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true }) "
         "local texts = {} for _, m in ipairs(marks) do "
         "for _, chunk in ipairs(m[4].virt_text or {}) do table.insert(texts, chunk[1]) end "
         "for _, vl in ipairs(m[4].virt_lines or {}) do for _, chunk in ipairs(vl) do "
         "table.insert(texts, chunk[1]) end end end "
         "return #texts > 0 and table.concat(texts, '|') or nil end)()")


def start(editor: Callable[..., Editor], tmp_path: Path, fim: list[dict[str, object]]) -> Editor:
    script = write_script(tmp_path / "script.json", fim=fim, loop=True)
    ed = editor("main.py")
    ed.setup_agentls(settings=scripted_settings(script, inlineCompletion={"debounceMs": 0}))
    ed.wait_attached()
    return ed


def type_at_line2(ed: Editor) -> None:
    ed.lua("vim.api.nvim_win_set_cursor(0, { 2, 4 })")
    ed.keys("A")
    ed.wait_for("vim.api.nvim_get_mode().mode == 'i'", message="insert mode")


def test_ghost_text_appears_and_tab_accepts_it(editor: Callable[..., Editor],
                                               tmp_path: Path) -> None:
    ed = start(editor, tmp_path, [{"text": "return 42"}])
    type_at_line2(ed)
    ghost = ed.wait_for(GHOST, message="inline ghost text", timeout=15)
    assert "return 42" in ghost
    assert ed.buffer_text().splitlines()[1] == "    "  # shown, not inserted

    ed.keys("<Tab>")
    ed.wait_for("vim.api.nvim_buf_get_lines(0, 1, 2, false)[1] == '    return 42'",
                message="the accepted completion in the buffer")
    assert ed.lua("return vim.api.nvim_win_get_cursor(0)") == [2, 13]
    ed.keys("<Esc>")
    # The accept command and didShowCompletion reached the server.
    counters = ed.wait_until(
        lambda: (c := ed.request("agentls/status")["completions"])["accepted"] == 1 and c,
        message="accepted == 1")
    assert counters["shown"] >= 1 and counters["served"] >= 1


def test_tab_without_a_suggestion_inserts_a_tab(editor: Callable[..., Editor],
                                                tmp_path: Path) -> None:
    ed = start(editor, tmp_path, [{"text": ""}])
    ed.cmd("setlocal noexpandtab softtabstop=0 tabstop=8")
    type_at_line2(ed)
    ed.keys("<Tab>x<Esc>")
    line = ed.wait_for("(function() local l = vim.api.nvim_buf_get_lines(0, 1, 2, false)[1] "
                       "return l:sub(-1) == 'x' and l end)()", message="typed text")
    assert line.strip(" ") == "\tx" and "\t" in line


def test_accept_word_line_and_dismiss(editor: Callable[..., Editor], tmp_path: Path) -> None:
    ed = start(editor, tmp_path, [{"text": "total = compute(1)\n    return total"}])
    type_at_line2(ed)
    ed.wait_for(GHOST, message="ghost text", timeout=15)

    ed.keys("<M-Right>")  # accept word
    ed.wait_for("vim.api.nvim_buf_get_lines(0, 1, 2, false)[1] == '    total'",
                message="one word accepted")
    # The rest comes back (the server's type-ahead cache) and <M-C-Right> takes the line.
    ed.wait_for(GHOST, message="the rest of the suggestion", timeout=15)
    ed.keys("<M-C-Right>")
    ed.wait_for("vim.api.nvim_buf_get_lines(0, 1, 2, false)[1] == '    total = compute(1)'",
                message="the rest of the line accepted")
    assert ed.buffer_text().splitlines()[2] == ""

    ed.wait_for(GHOST, message="the next line suggested", timeout=15)
    ed.keys("<C-]>")  # dismiss
    ed.wait_for(f"{GHOST} == nil", message="the suggestion dismissed")
    ed.keys("<Esc>")
    assert ed.buffer_text().splitlines()[1:3] == ["    total = compute(1)", ""]


def test_a_resting_cursor_is_told_and_a_local_model_warms_there(
        editor: Callable[..., Editor]) -> None:
    """Normal-mode cursor moves reach the server as agentls/didMoveCursor once
    the cursor rests; the embedded model (the Gemma fixture) evaluates the
    prompt there, which agentls/status counts."""
    local = pytest.importorskip("agentls.providers.local")
    if local.runtime_error() is not None or local.gemma3_chunk_paths() is None:
        pytest.skip(f"the local model runtime or Gemma is not installed: {local.INSTALL_COMMAND}")
    ed = editor("main.py")
    ed.setup_agentls(settings={"provider": "local",
                               "inlineCompletion": {"model": local.GEMMA3}})
    ed.wait_attached()
    ed.keys("j")
    warmed = ed.wait_until(
        lambda: ed.request("agentls/status")["completions"]["warmed"],
        timeout=180, message="the warm-up at the resting cursor")
    assert warmed == 1
    ed.keys("j")  # the next line: told again
    ed.wait_until(lambda: ed.request("agentls/status")["completions"]["warmed"] == 2,
                  timeout=120, message="the warm-up on the next line")
