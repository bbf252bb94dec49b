"""What the server leaves on disk and in its answers, through the REAL
server (docs/security.md, "Files only you can read"):

- the state folder is 0700 and sessions.sqlite3 (with its -wal) 0600, also
  when an older agentls left them 0755/0644: they hold the text of secret
  files read with approval and their checkpoints;
- `--log-file` is 0600, and an existing log readable by others is
  tightened;
- MCP header and `env` values never reach the log, even when the server
  echoes them back in its error output;
- bad params of agentls/* methods get -32602 and no traceback (a turn of
  2**70 reached SQLite and came back as -32603 with a Python traceback).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.harness import LspProcess, scripted_settings, wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")

SECRET = "sk-live-" + "Q7w9" * 8
LITERAL_HEADER = "literal-header-value-" + "Z3" * 10


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    return root


def chat_once(lsp: LspProcess) -> dict[str, Any]:
    result = lsp.result("agentls/chat", {"prompt": "hello"}, timeout=60)
    assert result["status"] == "completed", result
    return result


@pytest.mark.parametrize("older", [False, True], ids=["new", "left-open-by-an-older-agentls"])
def test_the_state_folder_and_session_database_are_private(
        tmp_path: Path, workspace: Path, older: bool) -> None:
    state = tmp_path / "state"
    if older:
        state.mkdir(mode=0o755)
        os.chmod(state, 0o755)
        for name in ("sessions.sqlite3", "trust.json"):
            (state / name).touch()
            os.chmod(state / name, 0o644)
        (state / "trust.json").write_text("{}")
        (state / "sessions.sqlite3").unlink()  # SQLite makes it; an empty one is not a db
        (state / "sessions.sqlite3").touch(mode=0o644)
        os.chmod(state / "sessions.sqlite3", 0o644)
    settings, _ = scripted_settings(tmp_path, "hi", [{"text": "hello back"}])
    with LspProcess.start(state_dir=state, workspace=workspace, settings=settings) as lsp:
        chat_once(lsp)
        assert mode(state) == 0o700
        database = state / "sessions.sqlite3"
        assert mode(database) == 0o600
        for suffix in ("-wal", "-shm"):
            side = state / f"sessions.sqlite3{suffix}"
            if side.exists():
                assert mode(side) == 0o600, side


@pytest.mark.parametrize("existing", [False, True], ids=["new", "existing-0644"])
def test_the_log_file_is_private(tmp_path: Path, workspace: Path, existing: bool) -> None:
    log_file = tmp_path / "logs" / "agentls.log"
    if existing:
        log_file.parent.mkdir()
        log_file.write_text("old line\n")
        os.chmod(log_file, 0o644)
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          log_file=log_file) as lsp:
        lsp.result("agentls/status", {})
        assert mode(log_file) == 0o600
    if existing:
        assert log_file.read_text().startswith("old line\n")  # appended, not replaced


def test_a_log_file_planted_as_a_link_is_not_followed(tmp_path: Path, workspace: Path) -> None:
    # /tmp/agentls.log made by another user as a link to one of yours
    # (~/.bashrc): the server must not append its log lines to it.
    target = tmp_path / "bashrc"
    target.write_text("# mine\n")
    link = tmp_path / "agentls.log"
    link.symlink_to(target)
    stderr = tmp_path / "stderr.txt"
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace, log_file=link,
                          stderr_file=stderr) as lsp:
        lsp.result("agentls/status", {})
    assert target.read_text() == "# mine\n"
    assert "is a symbolic link" in stderr.read_text()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="giving a file to another user needs root")
def test_a_log_file_of_another_user_is_not_written(tmp_path: Path, workspace: Path) -> None:
    log_file = tmp_path / "agentls.log"
    log_file.write_text("")
    os.chmod(log_file, 0o666)
    os.chown(log_file, 54321, 54321)
    stderr = tmp_path / "stderr.txt"
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          log_file=log_file, stderr_file=stderr) as lsp:
        lsp.result("agentls/status", {})
    assert log_file.read_text() == ""
    assert "belongs to another user" in stderr.read_text()


ECHO_SERVER = (
    "import os, sys\n"
    "sys.stderr.write('env: ' + os.environ.get('MCP_SECRET', '') + '\\n')\n"
    "sys.stderr.write('argv: ' + ' '.join(sys.argv[1:]) + '\\n')\n"
    "sys.stderr.flush()\n"
    "sys.exit(3)\n"
)


def test_mcp_header_and_env_values_never_reach_the_log(tmp_path: Path, workspace: Path) -> None:
    echo = tmp_path / "echo_server.py"
    echo.write_text(ECHO_SERVER)
    log_file = tmp_path / "agentls.log"
    servers = {
        "echo": {"command": sys.executable, "args": [str(echo)],
                 "env": {"MCP_SECRET": "${env:MY_MCP_TOKEN}"}},
        "remote": {"url": "http://127.0.0.1:9/mcp",
                   "headers": {"Authorization": "Bearer ${env:MY_MCP_TOKEN}",
                               "X-Api-Key": LITERAL_HEADER}},
    }
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings={"mcpServers": servers}, log_file=log_file,
                          env={"MY_MCP_TOKEN": SECRET}) as lsp:
        def failed() -> bool:
            entries = {e["name"]: e for e in lsp.result("agentls/status", {}).get("mcp", [])}
            return all(entries.get(n, {}).get("state") == "failed" for n in servers)
        wait_until(failed, "both MCP servers to fail", 60)
    text = log_file.read_text()
    assert "echo" in text and "remote" in text  # the failures were logged...
    assert SECRET not in text  # ...without the values
    assert LITERAL_HEADER not in text


def test_bad_params_of_custom_methods_get_invalid_params_without_a_traceback(
        tmp_path: Path, workspace: Path) -> None:
    settings, _ = scripted_settings(tmp_path, "hi", [{"text": "hello back"}])
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings) as lsp:
        session_id = chat_once(lsp)["sessionId"]
        asked = [
            ("agentls/restoreCheckpoint", {"sessionId": session_id, "turn": 2**70}),
            ("agentls/restoreCheckpoint", {"sessionId": session_id, "turn": -(2**64)}),
            ("agentls/checkpoints", {"sessionId": session_id, "extra": [2**80]}),
            ("agentls/session", {"sessionId": session_id, "limit": 10**30}),
            ("agentls/chat", {"prompt": "hi", "context": {"line": 2**63}}),
        ]
        for method, params in asked:
            answer = lsp.request(method, params)
            error = answer.get("error")
            assert error is not None and error["code"] == -32602, (method, answer)
            text = json.dumps(error)
            assert "Traceback" not in text and "traceback" not in text and ".py" not in text
            assert "out of range" in error["message"], error
        assert lsp.alive()
        assert "result" in lsp.request("agentls/status", {})
