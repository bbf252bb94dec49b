"""A workspace-trust question too long for a message, in a real Neovim
against the real server (a question is never cut): the server writes the whole
text to a file in the state directory and asks the editor to open it
(window/showDocument, Neovim's own handler); the question, asked with
vim.ui.select, names that file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.nvim.harness import Editor, scripted_settings, write_script

DOCUMENT = ("(function() for _, b in ipairs(vim.api.nvim_list_bufs()) do "
            "local name = vim.api.nvim_buf_get_name(b) "
            "if name:find('trust-questions/mcp-', 1, true) then "
            "return {name = name, text = table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), "
            "'\\n')} end end end)()")


def test_a_long_trust_question_opens_its_whole_text(editor: Callable[..., Editor],
                                                   tmp_path: Path, workspace: Path) -> None:
    servers = {f"helper{i:02d}": {"command": "npx", "args": ["-y", f"pkg{i}"]}
               for i in range(40)}
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    script = write_script(tmp_path / "script.json", responses=[{"text": "unused"}])
    ed = editor("main.py")
    ed.setup_agentls(settings=scripted_settings(script))
    ed.wait_attached()
    ed.wait_for("_G.picks.pending ~= nil", message="the .mcp.json question", timeout=30)
    question = ed.lua("return _G.picks.calls[#_G.picks.calls]")
    assert question["items"] == ["Allow", "Don't allow"]
    opened = ed.lua(f"return {DOCUMENT}")
    assert opened and "helper39" in opened["text"] and "npx -y pkg39" in opened["text"]
    shown = ed.lua("return table.concat(vim.tbl_map(function(b) return "
                   "table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\\n') end, "
                   "vim.api.nvim_list_bufs()), '\\n')")
    assert opened["name"] in shown  # the question (in its preview) names the file
    ed.lua("_G.picks.answer_title(\"Don't allow\")")
