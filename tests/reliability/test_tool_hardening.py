"""Tool hardening through the REAL server (docs/security.md): the
scripted provider plays a steered model; its record file shows what the
model was sent.

- list_files / search_text skip secret files and what any .gitignore in the
  tree names; the model is told how many secret files were left out.
- run_command's child gets an allow-listed environment, and a daemon that
  left the process group with setsid is stopped and named.
- A catastrophic regular expression does not freeze the server: status and
  other requests are answered while it runs, and it stops with a message.
- A FIFO in the workspace neither hangs a turn nor the server's exit.
- Files over the search size limit are named, not silently skipped.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.processes import setsid_daemon
from tests.reliability.harness import LspProcess, scripted_settings, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux")

ENV_SECRET = "ENV-FILE-SECRET-5d1e"
IGNORED_SECRET = "IGNORED-SECRET-77aa"


def turn(tmp_path: Path, name: str, calls: list[dict[str, Any]], **extra: Any
         ) -> tuple[dict[str, Any], Path]:
    responses = [{"tool_calls": [{"id": f"c{i}", "name": tool, "arguments": args}]}
                 for i, (tool, args) in enumerate((c["tool"], c["args"]) for c in calls)]
    settings, record = scripted_settings(tmp_path, name, [*responses, {"text": "done"}])
    settings.update(extra)
    return settings, record


def tools(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in result["messages"] if m["role"] == "tool"]


def test_search_and_list_skip_secrets_and_nested_gitignore(
    tmp_path: Path, workspace: Path
) -> None:
    (workspace / ".env").write_text(f"TOKEN={ENV_SECRET}\n")
    (workspace / "src" / ".gitignore").write_text("private-notes.txt\n")
    (workspace / "src" / "private-notes.txt").write_text(f"TOKEN={IGNORED_SECRET}\n")
    (workspace / "src" / "config.py").write_text("TOKEN = read_from_env()\n")
    settings, record = turn(tmp_path, "skip", [
        {"tool": "search_text", "args": {"pattern": "TOKEN"}},
        {"tool": "list_files", "args": {}}])
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings) as lsp:
        result = lsp.result("agentls/chat", {"prompt": "find tokens"}, timeout=60)
    assert result["status"] == "completed", result
    search, listing = tools(result)
    found = [m["path"] for m in search["toolResult"]["output"]["matches"]]
    assert found == ["src/config.py"]
    assert ".env" in search["toolResult"]["output"]["skipped_secret"]
    files = listing["toolResult"]["output"]["files"]
    assert ".env" not in files and "src/private-notes.txt" not in files
    sent = record.read_text()
    assert ENV_SECRET not in sent and IGNORED_SECRET not in sent
    assert "may hold secrets" in sent  # the model is told what was left out


def test_run_command_environment_is_an_allow_list_and_daemons_are_stopped(
    tmp_path: Path, workspace: Path
) -> None:
    planted = {"AWS_ACCESS_KEY_ID": "AKIAPLANTED01", "STRIPE_KEY": "sk_live_planted02",
               "GH_PAT": "ghp_planted03", "DATABASE_URL": "postgres://u:hunter2@db/x",
               "SLACK_WEBHOOK_URL": "https://hooks.example/planted04",
               "SENTRY_DSN": "https://planted05@sentry.example/1",
               "TWILIO_AUTH": "planted06", "SSH_AUTH_SOCK": "/tmp/ssh-planted07/agent"}
    pidfile = workspace / "daemon.pid"
    daemon = setsid_daemon(pidfile)
    settings, _ = turn(tmp_path, "cmd", [
        {"tool": "run_command", "args": {"argv": ["env"]}},
        {"tool": "run_command", "args": {"argv": [sys.executable, "-c", daemon]}}],
        approval={"rules": [{"tool": "run_command", "command": "(?s).*", "action": "allow"}]})
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings, env=planted) as lsp:
        result = lsp.result("agentls/chat", {"prompt": "run"}, timeout=60)
    assert result["status"] == "completed", result
    env_run, daemon_run = tools(result)
    child_env = env_run["toolResult"]["output"]["stdout"]
    assert "PATH=" in child_env
    for name, value in planted.items():
        assert name not in child_env and value not in child_env, name
    pid = int(pidfile.read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    assert f"(pid {pid})" in daemon_run["content"]


def test_a_catastrophic_regex_does_not_freeze_the_server(
    tmp_path: Path, workspace: Path
) -> None:
    # The (a+)+$ froze Python's re for minutes; the `regex` engine
    # answers it at once, and (a|aa)+$ is catastrophic for it too.
    (workspace / "evil.txt").write_text("a" * 40 + "!\n")
    settings, record = turn(tmp_path, "redos", [
        {"tool": "search_text", "args": {"pattern": "(a+)+$"}},
        {"tool": "search_text", "args": {"pattern": "(a|aa)+$"}}])
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings) as lsp:
        chat = lsp.request_async("agentls/chat", {"prompt": "search",
                                                  "workDoneToken": "redos"})
        # The turn reports each tool as it starts it ($/progress): the second
        # "Running search_text" is the catastrophic pattern's search.
        wait_until(lambda: sum(
            (p.get("value") or {}).get("message") == "Running search_text"
            for p in lsp.notifications_of("$/progress")) == 2, "the second search starting")
        status = lsp.request("agentls/status", {}, timeout=20)
        # Stored so far: prompt, call c0, its result, call c1. A server that
        # froze in the search would answer only after storing c1's result.
        [session] = status["result"]["sessions"]
        assert session["total_messages"] == 4, "status was answered only after the search"
        assert not chat.done()
        result = lsp.wait(chat, 60, "chat")["result"]
    assert result["status"] == "completed", result
    plain, search = tools(result)
    assert plain["toolResult"]["success"] is True
    assert plain["toolResult"]["output"]["matches"] == []
    assert search["toolResult"]["success"] is False
    assert search["toolResult"]["error"]["code"] == "pattern_timeout"
    assert "simpler pattern" in record.read_text()


def test_a_fifo_neither_hangs_the_turn_nor_the_exit(tmp_path: Path, workspace: Path) -> None:
    (workspace / "logs").mkdir()
    os.mkfifo(workspace / "logs" / "app.pipe")
    (workspace / "logs" / "app.log").write_text("x marks the spot\n")
    settings, _ = turn(tmp_path, "fifo", [
        {"tool": "search_text", "args": {"pattern": "x"}},
        {"tool": "read_file", "args": {"path": "logs/app.pipe"}},
        {"tool": "list_files", "args": {"path": "logs"}}])
    lsp = LspProcess.spawn(state_dir=tmp_path / "state")
    try:
        lsp.initialize(workspace=workspace, settings=settings)
        result = lsp.result("agentls/chat", {"prompt": "look"}, timeout=60)
        assert result["status"] == "completed", result
        search, read, listing = tools(result)
        assert [m["path"] for m in search["toolResult"]["output"]["matches"]] == ["logs/app.log"]
        assert "logs/app.pipe" in search["toolResult"]["output"]["skipped_special"]
        assert read["toolResult"]["success"] is False
        assert "not a regular file" in read["toolResult"]["error"]["message"]
        assert listing["toolResult"]["output"]["files"] == ["logs/app.log"]
    finally:
        code = lsp.close(timeout=15)
    assert code == 0


def test_files_over_the_search_limit_are_named(tmp_path: Path, workspace: Path) -> None:
    big = workspace / "big.log"
    big.write_text(("filler line\n" * 300_000) + "NEEDLE here\n")
    settings, record = turn(tmp_path, "large", [
        {"tool": "search_text", "args": {"pattern": "NEEDLE"}}])
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings) as lsp:
        result = lsp.result("agentls/chat", {"prompt": "find it"}, timeout=60)
    [search] = tools(result)
    output = search["toolResult"]["output"]
    assert output["matches"] == []
    assert output["skipped_large"] == [{"path": "big.log", "bytes": big.stat().st_size}]
    last = json.dumps(record.read_text())
    assert "big.log" in last and "MB limit" in last
