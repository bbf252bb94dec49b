"""The real copilot.lua (zbirenbaum/copilot.lua) on agentls in headless
Neovim, configured as docs/copilot-plugins.md says (`server = { type =
"binary", custom_server_filepath = <agentls> }`), agentls's settings in the
user config file (the scripted provider's FIM answers). Its code is not
ours to vendor: it is loaded from the checkout named by AGENTLS_COPILOT_LUA
(the folder holding lua/copilot/init.lua), and the test is skipped when
that is unset."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.nvim.harness import Editor, agentls_binary, clean_env, require_nvim, write_script

ENV = "AGENTLS_COPILOT_LUA"
CALC = "def add(a, b):\n    return \n"


def copilot_lua() -> Path:
    where = os.environ.get(ENV)
    if not where:
        pytest.skip(f"{ENV} is unset: set it to a copilot.lua checkout (the folder with "
                    "lua/copilot/init.lua) to run copilot.lua against agentls")
    path = Path(where).expanduser()
    if not (path / "lua" / "copilot" / "init.lua").is_file():
        pytest.fail(f"{ENV}={where} holds no lua/copilot/init.lua")
    return path


@pytest.fixture
def copilot_editor(tmp_path: Path) -> Iterator[Editor]:
    plugin = copilot_lua()
    require_nvim()
    workspace = tmp_path / "project"
    workspace.mkdir()
    (workspace / "calc.py").write_text(CALC)
    script = write_script(tmp_path / "script.json", fim=[{"text": "a + b"}], loop=True)
    home = tmp_path / "home"
    home.mkdir()
    config = home / "agentls.toml"
    config.write_text(f'provider = "scripted"\n[providerOptions]\n'
                      f"script = {json.dumps(str(script))}\n"
                      "[inlineCompletion]\ndebounceMs = 0\n")
    ed = Editor.start(workspace, home, env=clean_env(home, AGENTLS_CONFIG_FILE=str(config)),
                      args=("--cmd", f"set rtp^={plugin}", "calc.py"))
    try:
        yield ed
    finally:
        ed.close()


SETUP = """
require("copilot").setup({
  server = { type = "binary", custom_server_filepath = ... },
  suggestion = { auto_trigger = true, debounce = 10 },
  panel = { enabled = true },
  logger = { file_log_level = vim.log.levels.OFF, print_log_level = vim.log.levels.WARN },
})
"""
CLIENT = ("(function() local c = vim.lsp.get_clients({ name = 'copilot' })[1] "
          "return c and c.initialized and c.id end)()")


def request(ed: Editor, method: str, params: object = None) -> object:
    reply = ed.lua(
        "local method, params = ...\n"
        "local c = vim.lsp.get_clients({ name = 'copilot' })[1]\n"
        "local r = c:request_sync(method, params or vim.empty_dict(), 20000)\n"
        "return r and { result = r.result, error = r.err and r.err.message } or 'timeout'",
        method, params)
    assert isinstance(reply, dict) and not reply.get("error"), reply
    return reply.get("result")


def test_copilot_lua_shows_agentls_suggestion_and_accepting_it_is_counted(
    copilot_editor: Editor,
) -> None:
    ed = copilot_editor
    ed.lua(SETUP, agentls_binary())
    ed.wait_for(CLIENT, message="copilot.lua's client (agentls) to initialize", timeout=30)
    # signed in: `:Copilot auth` ends at "Authenticated as GitHub user: <user>"
    ed.lua("require('copilot.auth').signin()")
    said = ed.wait_until(lambda: "Authenticated as GitHub user: agentls (scripted" in
                         (m := ed.messages()) and m, message="the sign-in probe's answer")
    assert "unknown setting" not in said
    # copilot.lua's status (statusNotification): ready, naming the model
    status = ed.wait_for("require('copilot.status').data.status == 'Normal' and "
                         "require('copilot.status').data.message", message="the status")
    assert status.startswith("agentls: ready")
    ed.lua("vim.api.nvim_win_set_cursor(0, { 2, 10 })")
    ed.keys("A")
    ed.wait_for("vim.api.nvim_get_mode().mode == 'i'", message="insert mode")
    ed.wait_for("require('copilot.suggestion').is_visible()", timeout=30,
                message="copilot.lua's ghost text from agentls")
    ed.lua("require('copilot.suggestion').accept()")
    ed.wait_for("vim.api.nvim_buf_get_lines(0, 1, 2, false)[1] == '    return a + b'",
                message="the accepted suggestion in the buffer")
    ed.keys("<Esc>")
    counters = ed.wait_until(
        lambda: (c := request(ed, "agentls/status")["completions"])["accepted"] == 1 and c,
        message="notifyAccepted counted")
    assert counters["shown"] >= 1 and counters["served"] >= 1
    assert "unknown setting" not in ed.messages()


def test_copilot_lua_panel_lists_agentls_solution(copilot_editor: Editor) -> None:
    ed = copilot_editor
    ed.lua(SETUP, agentls_binary())
    ed.wait_for(CLIENT, message="copilot.lua's client (agentls) to initialize", timeout=30)
    ed.lua("vim.api.nvim_win_set_cursor(0, { 2, 10 })")
    ed.lua("require('copilot.panel').open({})")
    text = ed.wait_for(
        "(function() for _, b in ipairs(vim.api.nvim_list_bufs()) do "
        "if vim.api.nvim_buf_get_name(b):match('^copilot:///') then "
        "local t = table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\\n') "
        "if t:find('a + b', 1, true) then return t end end end end)()",
        timeout=30, message="the panel with agentls's solution")
    assert "a + b" in text
