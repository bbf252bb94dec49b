"""MCP in a real Neovim against the real server: an MCP tool call
(mcp-server-time over stdio) approved through vim.ui.select, an MCP prompt
offered as a `/` template in the chat buffer, and a server that fails
shown in the statusline and in :checkhealth."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from tests.nvim.harness import Editor, scripted_settings, write_script
from tests.nvim.test_health_and_quickstart import checkhealth

CHAT = "require('agentls.chat')"
PREVIEW = ("(function() for _, b in ipairs(vim.api.nvim_list_bufs()) do "
           "if vim.api.nvim_buf_get_name(b):find('agentls://preview/', 1, true) then "
           "return table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\\n') end end "
           "return '' end)()")
TIME = {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
HTTP_PROMPT_SERVER = Path(__file__).resolve().parents[1] / "fakes" / "mcp_raw_server.py"


def test_mcp_tool_call_is_approved_in_neovim(editor: Callable[..., Editor],
                                             tmp_path: Path) -> None:
    call = {"name": "mcp__time__get_current_time", "id": "m1",
            "arguments": {"timezone": "Asia/Tokyo"}}
    script = write_script(tmp_path / "script.json", responses=[
        {"text": "Let me check.", "tool_calls": [call]}, {"text": "Finished."}])
    ed = editor("main.py")
    ed.setup_agentls(settings=scripted_settings(script, mcpServers={"time": TIME}))
    ed.wait_attached()
    ed.cmd("AgentChat what time is it in Tokyo?")
    ed.wait_for("_G.picks.pending ~= nil", message="the approval question", timeout=30)
    question = ed.lua("return _G.picks.calls[#_G.picks.calls]")
    assert question["kind"] == "agentls.approval"
    assert "get_current_time" in question["prompt"]
    # the whole question (arguments, claims) is in the preview split
    shown = ed.lua(f"return {PREVIEW}")
    assert "Asia/Tokyo" in shown and "read-only: yes" in shown
    assert question["items"] == ["Allow once", "Allow for session", "Deny"]
    ed.lua("_G.picks.answer_title('Allow once')")
    ed.wait_for(f"{CHAT}.get() ~= nil and {CHAT}.get().busy == false and "
                f"table.concat(vim.api.nvim_buf_get_lines({CHAT}.get().buf, 0, -1, false), "
                "'\\n'):find('Finished.', 1, true) ~= nil", message="the turn", timeout=30)
    text = ed.buffer_text(ed.lua(f"return {CHAT}.get().buf"))
    assert "◀ mcp__time__get_current_time ✓" in text
    assert "Asia/Tokyo" in text


def test_a_failing_mcp_server_shows_in_the_statusline_and_checkhealth(
        editor: Callable[..., Editor], tmp_path: Path) -> None:
    script = write_script(tmp_path / "script.json", responses=[{"text": "ok"}])
    broken = {"command": sys.executable, "args": [str(HTTP_PROMPT_SERVER)],
              "env": {"MCP_RAW_CRASH_AT_START": "1"}}
    ed = editor("main.py")
    ed.setup_agentls(settings=scripted_settings(script, mcpServers={"broken": broken}))
    ed.wait_attached()
    ed.lua("require('agentls.status').refresh(vim.lsp.get_clients({ name = 'agentls' })[1])")
    ed.wait_for("require('agentls').statusline():find('MCP failed: broken', 1, true) ~= nil",
                message="the statusline", timeout=30)
    report = "\n".join(checkhealth(ed))
    assert "MCP server broken failed" in report
    assert "missing configuration, giving up" in report  # its stderr tail


def test_an_mcp_prompt_completes_as_a_slash_template(editor: Callable[..., Editor],
                                                     tmp_path: Path) -> None:
    script = write_script(tmp_path / "script.json", responses=[{"text": "Noted."}])
    raw = {"command": sys.executable, "args": [str(HTTP_PROMPT_SERVER)]}
    ed = editor("main.py")
    ed.setup_agentls(settings=scripted_settings(script, mcpServers={"raw": raw}))
    ed.wait_attached()
    ed.lua("require('agentls.status').refresh(vim.lsp.get_clients({ name = 'agentls' })[1])")
    ed.wait_for("(function() for _, s in ipairs(require('agentls.status').state.mcp) do "
                "if s.name == 'raw' and s.state == 'ready' then return true end end "
                "return false end)()", message="the MCP server ready", timeout=30)
    ed.cmd("AgentChat")
    ed.wait_for(f"{CHAT}.get() ~= nil and vim.bo.filetype == 'agentls-chat'",
                message="the empty chat")
    ed.wait_for(f"#vim.lsp.get_clients({{ bufnr = {CHAT}.get().buf }}) == 1",
                message="the chat buffer attached")
    ed.keys("Go/mcp__raw__su")
    items = ed.wait_for(
        "(function() local info = vim.fn.complete_info({ 'items', 'pum_visible' }) "
        "local words = {} for _, it in ipairs(info.items or {}) do table.insert(words, it.word) "
        "end return info.pum_visible == 1 and #words > 0 and words end)()",
        message="the completion menu", timeout=15)
    assert items == ["/mcp__raw__summarize"], items  # a snippet item shows its label
    edit = ed.lua("local it = vim.fn.complete_info({ 'items' }).items[1] "
                  "local item = vim.tbl_get(it, 'user_data', 'nvim', 'lsp', 'completion_item') "
                  "return item and item.textEdit and item.textEdit.newText")
    assert edit == "Summarize ${1:topic} in three bullet points."
    # accepted, the whole prompt is inserted, its placeholder a tab stop
    ed.keys("<C-n><C-y>")
    ed.wait_for(f"vim.api.nvim_buf_get_lines({CHAT}.get().buf, -2, -1, false)[1] == "
                "'Summarize topic in three bullet points.'", message="the expansion")
