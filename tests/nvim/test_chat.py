"""The chat buffer in a real Neovim against the real server (scripted
provider): streaming, folded tool calls, sessions, cancel, the selection as
context, @file: completion, the statusline."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.nvim.harness import Editor, scripted_settings, write_script

CHAT = "require('agentls.chat')"
# Every state of every chat buffer, recorded from the first line written.
RECORD_SNAPSHOTS = r"""
_G.snapshots = {}
vim.api.nvim_create_autocmd('FileType', { pattern = 'agentls-chat', callback = function(ev)
  vim.api.nvim_buf_attach(ev.buf, false, { on_lines = function(_, buf)
    vim.schedule(function()
      if vim.api.nvim_buf_is_valid(buf) then
        local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
        table.insert(_G.snapshots, table.concat(lines, '\n'))
      end
    end)
  end })
end })
"""


def start(editor: Callable[..., Editor], tmp_path: Path, responses: list[dict[str, Any]],
          *args: str, **extra: Any) -> Editor:
    script = write_script(tmp_path / "script.json", responses=responses,
                          record=str(tmp_path / "calls.jsonl"), **extra)
    ed = editor(*(args or ("main.py",)))
    ed.lua(RECORD_SNAPSHOTS)
    ed.setup_agentls(settings=scripted_settings(script))
    ed.wait_attached()
    return ed


def chat_text(ed: Editor) -> str:
    return ed.buffer_text(ed.lua(f"return {CHAT}.get().buf"))


def wait_turn_done(ed: Editor, timeout: float = 20.0) -> str:
    ed.wait_for(f"{CHAT}.get() ~= nil and {CHAT}.get().busy == false "
                f"and #vim.api.nvim_buf_get_lines({CHAT}.get().buf, 0, -1, false) > 1",
                timeout=timeout, message="the chat turn to finish")
    return chat_text(ed)


def recorded_calls(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_chat_turn_streams_into_the_chat_buffer(editor: Callable[..., Editor],
                                                 tmp_path: Path) -> None:
    reply = "Hello from agentls, streamed in pieces."
    chunks = ["Hello ", "from ", "agentls, ", "streamed ", "in ", "pieces."]
    ed = start(editor, tmp_path, [{"chunks": chunks, "delay": 0.15,
                                   "usage": {"input_tokens": 30, "output_tokens": 7}}])
    ed.cmd("AgentChat say hello")

    # The buffer is agentls://chat/<sessionId>, a split next to the file.
    name = ed.wait_for("vim.fn.bufname(vim.fn.bufnr('agentls://chat/'))",
                       message="the chat buffer")
    session_id = name.removeprefix("agentls://chat/")
    assert len(session_id) == 32
    assert ed.lua("return #vim.api.nvim_tabpage_list_wins(0)") == 2
    assert ed.lua("return vim.bo.filetype") == "agentls-chat"

    text = wait_turn_done(ed)
    assert text.splitlines()[:5] == ["## You", "say hello", "", "## agentls", reply]
    # Intermediate states showed partial text before the reply was complete.
    snapshots: list[str] = ed.lua("return _G.snapshots")
    partial = [s for s in snapshots if "Hello from" in s and reply not in s]
    assert partial, snapshots
    assert any("## agentls\nHello " in s and "agentls, " not in s.split("## agentls")[1]
               for s in snapshots)
    # The chat buffer is an agentls-chat document on the server.
    attached = f"return #vim.lsp.get_clients({{ bufnr = {CHAT}.get().buf, name = 'agentls' }})"
    assert ed.lua(attached) == 1

    # The statusline component: provider, model, idle, the session's tokens.
    line = ed.wait_for("(function() local s = require('agentls').statusline() "
                       "return s:find('tok') and s end)()", message="tokens in the statusline")
    assert line == "agentls: Scripted (tests and demos) · scripted-1 · idle · 37 tok"


def test_follow_up_from_the_input_area(editor: Callable[..., Editor], tmp_path: Path) -> None:
    ed = start(editor, tmp_path, [{"text": "First answer."}, {"text": "Second answer."}])
    ed.cmd("AgentChat first question")
    wait_turn_done(ed)
    # Type below the separator and press <CR> in normal mode.
    ed.keys("Gothe second question<Esc>")
    ed.wait_for(f"vim.api.nvim_buf_get_lines({CHAT}.get().buf, -2, -1, false)[1] "
                "== 'the second question'", message="typed prompt")
    ed.keys("<CR>")
    ed.wait_for(f"table.concat(vim.api.nvim_buf_get_lines({CHAT}.get().buf, 0, -1, false), "
                "'\\n'):find('Second answer.', 1, true) ~= nil", message="second reply")
    text = wait_turn_done(ed)
    assert "## You\nthe second question\n\n## agentls\nSecond answer." in text
    assert text.endswith("Second answer.\n\n")  # the input area is empty again
    calls = recorded_calls(tmp_path)
    assert [m["content"] for m in calls[1]["messages"] if m["role"] == "user"] == [
        "first question", "the second question"]


def test_tool_calls_and_results_are_folded(editor: Callable[..., Editor],
                                            tmp_path: Path) -> None:
    ed = start(editor, tmp_path, [
        {"text": "Let me look.", "tool_calls": [
            {"name": "read_file", "arguments": {"path": "main.py"}, "id": "c1"}]},
        {"text": "It defines answer and greet."},
    ])
    ed.cmd("AgentChat what is in main.py?")
    text = wait_turn_done(ed)
    lines = text.splitlines()
    call = lines.index("▶ tool call: read_file main.py")
    assert lines[call + 1].startswith("    {") and '"path":"main.py"' in lines[call + 1]
    result = lines.index("◀ read_file ✓")
    assert lines[result + 1] == "    def answer():"
    assert "It defines answer and greet." in lines
    folds = ed.lua(
        f"local a, b, c = ... local win = vim.fn.bufwinid({CHAT}.get().buf) "
        "return vim.api.nvim_win_call(win, function() return { vim.fn.foldclosed(a), "
        "vim.fn.foldclosedend(a), vim.fn.foldclosed(b), vim.fn.foldclosed(c) } end)",
        call + 1, result + 1, 1)
    assert folds[0] == call + 1 and folds[1] == call + 2  # header + arguments, closed
    assert folds[2] == result + 1  # the result, closed
    assert folds[3] == -1  # the prompt is not folded


def test_sessions_lists_and_resumes_a_transcript(editor: Callable[..., Editor],
                                                  tmp_path: Path) -> None:
    ed = start(editor, tmp_path, [{"text": "Stored reply."}])
    ed.cmd("AgentChat remember me")
    wait_turn_done(ed)
    session_id = ed.lua(f"return {CHAT}.get().session_id")
    ed.cmd(f"bwipeout! {ed.lua(f'return {CHAT}.get().buf')}")
    assert ed.lua("return vim.fn.bufnr('agentls://chat/')") == -1

    ed.cmd("AgentSessions")
    ed.wait_for("_G.picks.pending ~= nil", message="the session picker")
    call = ed.lua("return _G.picks.calls[#_G.picks.calls]")
    assert call["prompt"] == "agentls sessions"
    assert call["items"][0].startswith("remember me  [")
    assert session_id[:8] in call["items"][0]
    ed.lua("_G.picks.answer(1)")

    ed.wait_for(f"vim.fn.bufnr('agentls://chat/{session_id}') ~= -1", message="resumed buffer")
    text = ed.buffer_text(f"agentls://chat/{session_id}")
    assert text.splitlines()[:5] == ["## You", "remember me", "", "## agentls", "Stored reply."]
    assert ed.lua("return vim.api.nvim_buf_get_name(0)").endswith(session_id)


def test_cancel_and_new_session(editor: Callable[..., Editor], tmp_path: Path) -> None:
    ed = start(editor, tmp_path, [{"chunks": ["Thinking "], "stall": True}, {"text": "Fresh."}])
    ed.cmd("AgentChat take your time")
    ed.wait_for(f"{CHAT}.get() and table.concat(vim.api.nvim_buf_get_lines({CHAT}.get().buf, "
                "0, -1, false), '\\n'):find('Thinking', 1, true)", message="the stalled turn")
    assert ed.lua(f"return {CHAT}.get().busy") is True
    assert "⟳" in ed.lua("return require('agentls').statusline()")
    first = ed.lua(f"return {CHAT}.get().session_id")
    ed.cmd("AgentCancel")
    text = wait_turn_done(ed)
    assert "⏹ cancelled" in text

    ed.cmd("AgentNew")
    ed.wait_for(f"{CHAT}.get().session_id ~= '{first}'", message="a new session")
    ed.cmd("AgentChat again")
    text = wait_turn_done(ed)
    assert text.splitlines()[:5] == ["## You", "again", "", "## agentls", "Fresh."]
    assert ed.lua("return #vim.api.nvim_tabpage_list_wins(0)") == 2  # the same chat window


def test_visual_selection_is_sent_as_context(editor: Callable[..., Editor],
                                              tmp_path: Path) -> None:
    ed = start(editor, tmp_path, [{"text": "It greets."}])
    ed.keys("5GVj:AgentChat explain this<CR>")
    text = wait_turn_done(ed)
    assert "↳ selection: main.py:5-6" in text
    user = [m for m in recorded_calls(tmp_path)[0]["messages"] if m["role"] == "user"][-1]
    assert '<selection file="main.py" lines="5-6">' in user["content"]
    assert 'def greet(name):\n    return "hi " + name' in user["content"]


def test_file_mentions_complete_in_the_chat_buffer(editor: Callable[..., Editor],
                                                    tmp_path: Path) -> None:
    ed = start(editor, tmp_path, [{"text": "Noted."}])
    ed.cmd("AgentChat")
    ed.wait_for(f"{CHAT}.get() ~= nil and vim.bo.filetype == 'agentls-chat'",
                message="the empty chat")
    ed.wait_for(f"#vim.lsp.get_clients({{ bufnr = {CHAT}.get().buf }}) == 1",
                message="the chat buffer attached")
    ed.keys("Goread @file:no")
    items = ed.wait_for(
        "(function() local info = vim.fn.complete_info({ 'items', 'pum_visible' }) "
        "local words = {} for _, it in ipairs(info.items or {}) do table.insert(words, it.word) "
        "end return info.pum_visible == 1 and #words > 0 and words end)()",
        message="the completion menu", timeout=15)
    assert "@file:notes.md" in items
    ed.keys("<C-n><C-y><C-s>")
    text = wait_turn_done(ed)
    assert "## You\nread @file:notes.md\n↳ attached: notes.md" in text
    user = [m for m in recorded_calls(tmp_path)[0]["messages"] if m["role"] == "user"][-1]
    assert "# Notes" in user["content"]


def test_characterwise_selection_is_sent_exactly(editor: Callable[..., Editor],
                                                 tmp_path: Path) -> None:
    ed = start(editor, tmp_path, [{"text": "A function."}])
    ed.keys("5G0wvt(:AgentChat what is this?<CR>")  # selects "greet"
    text = wait_turn_done(ed)
    assert "↳ selection: main.py:5-5" in text
    user = [m for m in recorded_calls(tmp_path)[0]["messages"] if m["role"] == "user"][-1]
    assert '<selection file="main.py" lines="5-5">\ngreet\n</selection>' in user["content"]


def test_instruction_files_and_a_compaction_show_in_the_chat_buffer(
        editor: Callable[..., Editor], tmp_path: Path, workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("Use tabs.\n")
    (workspace / "pkg").mkdir()
    (workspace / "pkg" / "mod.py").write_text("x = 1\n")
    (workspace / "pkg" / "AGENTS.md").write_text("In pkg, no globals.\n")
    ed = start(editor, tmp_path, [
        {"tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "pkg/mod.py"}}]},
        {"text": "It sets x."},
        {"text": "Summary: pkg/mod.py sets x."},
    ])
    ed.cmd("AgentChat what does pkg/mod.py do?")
    text = wait_turn_done(ed)
    # The file the prompt names is attached (named-files) and listed.
    assert ("## You\nwhat does pkg/mod.py do?\n↳ attached: pkg/mod.py\n"
            "↳ instructions: AGENTS.md\n") in text
    assert "## agentls\n↳ instructions: pkg/AGENTS.md\nIt sets x." in text
    assert text.count("↳ instructions:") == 2  # the root file is named once
    system = recorded_calls(tmp_path)[1]["messages"][0]["content"]
    assert "Use tabs." in system and "In pkg, no globals." in system

    ed.cmd("AgentCompact")
    header = "\N{INFORMATION SOURCE} compacted: earlier turns summarised for the model"
    text = ed.wait_for(
        f"(function() local t = table.concat(vim.api.nvim_buf_get_lines({CHAT}.get().buf, 0, -1,"
        " false), '\\n') return t:find('compacted: earlier', 1, true) and t end)()",
        message="the compaction summary in the chat buffer")
    assert header + "\n    Summary: pkg/mod.py sets x." in text
    # Folded like tool results: the summary's body is inside a closed fold.
    row = text.splitlines().index(header) + 1
    assert ed.lua(f"return vim.api.nvim_buf_call({CHAT}.get().buf, function() "
                  f"return {CHAT}.foldexpr({row}) end)") == ">1"
