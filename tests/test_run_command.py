"""run_command (features/tools/command.py): runs argv without a shell,
exit codes, timeouts that kill the whole process group, cancellation,
output caps, an environment without API keys, cwd confined to the
workspace, and no run without approval. Every test is bounded in time."""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentls.core.settings.schema import AgentlsSettings
from agentls.core.tools.contract import ToolContext, ToolRefused
from agentls.features.tools.command import (
    MAX_TIMEOUT_SECONDS,
    STREAM_CAP_BYTES,
    RunCommandTool,
)
from tests.fakes.processes import setsid_daemon

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX process groups")

PY = sys.executable


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (root / "link-out").symlink_to(tmp_path / "outside", target_is_directory=True)
    return root.resolve()


async def run(ws: Path, arguments: dict[str, Any], *,
              settings: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    """Run as the turn does once the approval gate cleared the call."""
    tool = RunCommandTool()
    wire = AgentlsSettings.model_validate(settings or {}).to_wire()
    state = tool.init({"settings": wire, "workspace_folders": [str(ws)]})
    context = ToolContext(workspace_folders=(str(ws),))
    result = await asyncio.wait_for(tool.run_tool("run_command", arguments, state, context), 30)
    return result, tool.format_tool_result(result, state)


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie waiting for a reaper."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


async def wait_gone(pid: int) -> bool:
    for _ in range(100):
        if not alive(pid):
            return True
        await asyncio.sleep(0.05)
    return False


# --------------------------------------------------------------------------- running


async def test_runs_and_reports_output(ws: Path) -> None:
    result, text = await run(ws, {"argv": [PY, "-c", "import sys; print('out'); "
                                                     "print('err', file=sys.stderr)"]})
    assert result["success"] is True
    output = result["output"]
    assert output["exit_code"] == 0 and output["timed_out"] is False
    assert output["stdout"] == "out\n" and output["stderr"] == "err\n"
    assert output["truncated"] is False and output["cwd"] == "."
    assert output["argv"][0] == PY
    assert set(output) >= {"argv", "cwd", "exit_code", "stdout", "stderr", "truncated",
                           "timed_out"}
    assert "Exit code: 0" in text and "out" in text and "err" in text


@pytest.mark.parametrize("code", [1, 3, 42])
async def test_exit_codes(ws: Path, code: int) -> None:
    result, text = await run(ws, {"argv": [PY, "-c", f"raise SystemExit({code})"]})
    assert result["success"] is False
    assert result["output"]["exit_code"] == code
    assert result["error"]["code"] == "exit_status"
    assert f"Exit code: {code}" in text


async def test_no_shell_argv_is_passed_literally(ws: Path) -> None:
    result, _ = await run(ws, {"argv": ["echo", "$HOME", "*", "a;b", "`id`", "$(id)"]})
    assert result["output"]["stdout"] == "$HOME * a;b `id` $(id)\n"


async def test_a_shell_only_when_argv_asks_for_one(ws: Path) -> None:
    result, _ = await run(ws, {"argv": ["bash", "-c", "echo $((6 * 7))"]})
    assert result["output"]["stdout"] == "42\n"


async def test_stdin_is_empty(ws: Path) -> None:
    result, _ = await run(ws, {"argv": [PY, "-c", "import sys; print(repr(sys.stdin.read()))"],
                               "timeout_seconds": 10})
    assert result["output"]["stdout"] == "''\n"


async def test_program_not_found(ws: Path) -> None:
    result, text = await run(ws, {"argv": ["definitely-not-a-program-xyz"]})
    assert result["success"] is False and result["error"]["code"] == "not_found"
    assert "definitely-not-a-program-xyz" in text


@pytest.mark.parametrize("arguments", [
    {}, {"argv": []}, {"argv": "ls -la"}, {"argv": ["ls", 1]}, {"argv": [""]},
    {"argv": ["ls"], "timeout_seconds": "5"}, {"argv": ["ls"], "timeout_seconds": 0},
    {"argv": ["ls"], "timeout_seconds": True}, {"argv": ["ls"], "cwd": 5},
])
async def test_bad_arguments(ws: Path, arguments: dict[str, Any]) -> None:
    result, _ = await run(ws, arguments)
    assert result["success"] is False and result["error"]["code"] == "invalid_arguments"


# --------------------------------------------------------------------------- approval


async def test_the_seed_entry_point_never_runs_a_command(ws: Path) -> None:
    # Only the turn's approval gate leads to run_tool; execute_tool_async
    # (what an agent_core-style caller would use) refuses whatever the context says.
    marker = ws / "ran.txt"
    tool = RunCommandTool()
    for context in ({"approval": "allow", "workspace_folders": [str(ws)]}, None):
        result = await tool.execute_tool_async(
            "run_command", {"argv": ["touch", str(marker)], "approval": "allow"},
            tool.init({}), context=context)
        assert result["success"] is False and result["error"]["code"] == "not_approved"
    assert not marker.exists()


def test_the_need_is_the_exact_command_line() -> None:
    tool = RunCommandTool()
    need = tool.tool_need("run_command", {"argv": ["bash", "-c", "echo $HOME && rm -rf b"],
                                          "cwd": "src", "timeout_seconds": 5}, {})
    assert (need.kind, need.command, need.cwd, need.timeout) == (
        "run", "bash -c 'echo $HOME && rm -rf b'", "src", 5.0)
    assert tool.tool_need("run_command", {"argv": ["ls"], "cwd": ""}, {}).cwd == "."
    for bad in ({}, {"argv": []}, {"argv": "ls -la"}, {"argv": ["ls", 3]}, {"argv": [""]},
                {"argv": ["ls", "a\0b"]}, {"argv": ["ls"], "cwd": 3}):
        with pytest.raises(ToolRefused):
            tool.tool_need("run_command", bad, {})


# --------------------------------------------------------------------------- cwd


async def test_cwd_defaults_to_the_workspace_and_accepts_subfolders(ws: Path) -> None:
    result, _ = await run(ws, {"argv": ["pwd"]})
    assert result["output"]["stdout"].strip() == str(ws)
    result, text = await run(ws, {"argv": ["pwd"], "cwd": "sub"})
    assert result["output"]["stdout"].strip() == str(ws / "sub")
    assert result["output"]["cwd"] == "sub" and "(in sub)" in text


@pytest.mark.parametrize("cwd", ["..", "../outside", "/tmp", "link-out", "sub/../.."])
async def test_cwd_outside_the_workspace_is_refused(ws: Path, cwd: str) -> None:
    marker = ws.parent / "outside" / "ran.txt"
    result, _ = await run(ws, {"argv": ["touch", "ran.txt"], "cwd": cwd})
    assert result["success"] is False and result["error"]["code"] == "outside_workspace"
    assert not marker.exists() and not (ws.parent / "ran.txt").exists()


async def test_cwd_must_be_a_folder(ws: Path) -> None:
    (ws / "file.txt").write_text("x")
    result, _ = await run(ws, {"argv": ["ls"], "cwd": "file.txt"})
    assert result["success"] is False and "not a folder" in result["error"]["message"]


async def test_no_workspace_folder_is_refused(tmp_path: Path) -> None:
    tool = RunCommandTool()
    state = tool.init({})
    result = await tool.run_tool("run_command", {"argv": ["ls"]}, state, ToolContext())
    assert result["success"] is False and result["error"]["code"] == "no_workspace"


# --------------------------------------------------------------------------- timeouts


async def test_timeout_kills_the_whole_process_group(ws: Path) -> None:
    pid_file = ws / "child.pid"
    script = f"sleep 60 & echo $! > {shlex.quote(str(pid_file))}; echo started; wait"
    started = time.monotonic()
    result, text = await run(ws, {"argv": ["bash", "-c", script], "timeout_seconds": 1})
    elapsed = time.monotonic() - started
    assert elapsed < 5
    output = result["output"]
    assert output["timed_out"] is True and output["exit_code"] is None
    assert output["stdout"] == "started\n"
    assert result["success"] is False and result["error"]["code"] == "timeout"
    assert "Timed out after 1s" in text
    child = int(pid_file.read_text())
    assert await wait_gone(child), "the sleep the command spawned survived the timeout"


async def test_background_children_do_not_outlive_the_command(ws: Path) -> None:
    pid_file = ws / "bg.pid"
    script = f"sleep 60 & echo $! > {shlex.quote(str(pid_file))}; echo done"
    started = time.monotonic()
    result, text = await run(ws, {"argv": ["bash", "-c", script], "timeout_seconds": 20})
    assert time.monotonic() - started < 5  # not held up by the child's open pipes
    assert result["success"] is True and result["output"]["stdout"] == "done\n"
    assert result["output"]["stopped_leftover_processes"] is True
    # Named by pid, not by "sleep": when bash has already exited, its forked
    # child may not have exec'd sleep yet, and is then (truthfully) reported
    # as "bash".
    child = int(pid_file.read_text())
    assert "left running in the background: " in text and f"(pid {child})" in text
    assert await wait_gone(child)


async def test_cancellation_kills_the_process_group(ws: Path) -> None:
    pid_file = ws / "c.pid"
    tool = RunCommandTool()
    state = tool.init({})
    context = ToolContext(workspace_folders=(str(ws),))
    script = f"sleep 60 & echo $! > {shlex.quote(str(pid_file))}; wait"
    task = asyncio.create_task(tool.run_tool(
        "run_command", {"argv": ["bash", "-c", script]}, state, context))
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    assert await wait_gone(int(pid_file.read_text()))


async def test_timeout_is_capped(ws: Path) -> None:
    result, text = await run(ws, {"argv": ["true"], "timeout_seconds": 10_000})
    assert result["output"]["timeout_seconds"] == MAX_TIMEOUT_SECONDS
    assert result["output"]["timeout_capped"] is True and "capped" in text


# --------------------------------------------------------------------------- output cap


async def test_output_is_capped_keeping_head_and_tail(ws: Path) -> None:
    code = ("import sys; sys.stdout.write('HEAD' + 'x' * 500_000 + 'TAIL'); "
            "sys.stderr.write('e' * 10)")
    result, text = await run(ws, {"argv": [PY, "-c", code]})
    output = result["output"]
    assert output["truncated"] is True
    assert output["stdout"].startswith("HEAD") and output["stdout"].endswith("TAIL")
    assert "bytes left out" in output["stdout"]
    assert len(output["stdout"].encode()) < STREAM_CAP_BYTES + 200
    assert output["stderr"] == "e" * 10
    assert "output cut" in text


# --------------------------------------------------------------------------- environment


async def test_only_allow_listed_variables_reach_the_command(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Why an allow-list: a deny-list of secret-looking names let all of these through.
    planted = {
        "OPENAI_API_KEY": "sk-planted-openai-0001",
        "ANTHROPIC_API_KEY": "sk-ant-planted-0002",
        "MY_PROVIDER_CRED": "planted-custom-0003",
        "GITHUB_TOKEN": "planted-token-0005",
        "DB_PASSWORD": "planted-password-0007",
        "AWS_SECRET_ACCESS_KEY": "planted-secret-0008",
        "AWS_ACCESS_KEY_ID": "AKIAPLANTED0009",
        "STRIPE_KEY": "sk_live_planted0010",
        "MY_SERVICE_KEY": "planted-0011",
        "GH_PAT": "ghp_planted0012",
        "DATABASE_URL": "postgres://user:hunter2@db/app",
        "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/planted",
        "SENTRY_DSN": "https://planted@sentry.io/1",
        "TWILIO_AUTH": "planted-0013",
        "SSH_AUTH_SOCK": "/tmp/ssh-planted/agent.1",
        "XDG_RUNTIME_DIR": "/run/user/planted",
        "HTTPS_PROXY": "http://user:pw@proxy:3128",
    }
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("MY_BUILD_FLAG", "visible")
    result, _ = await run(ws, {"argv": ["env"]}, settings={"apiKeyEnv": "MY_PROVIDER_CRED"})
    env_text = result["output"]["stdout"]
    for name, value in planted.items():
        assert name not in env_text and value not in env_text, name
    assert "MY_BUILD_FLAG" not in env_text
    assert "PATH=" in env_text and "LC_ALL=C.UTF-8" in env_text
    # what the user's settings add is passed
    passed, _ = await run(ws, {"argv": ["env"]},
                          settings={"runCommand": {"passEnv": ["MY_BUILD_FLAG"]}})
    assert "MY_BUILD_FLAG=visible" in passed["output"]["stdout"]
    assert "GH_PAT" not in passed["output"]["stdout"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreaper: Linux")
async def test_a_setsid_daemon_is_stopped_and_named(ws: Path) -> None:
    # Before the subreaper, fork -> setsid -> fork -> sleep survived the turn.
    pidfile = ws / "daemon.pid"
    script = setsid_daemon(pidfile, then="print('parent done')\n")
    result, text = await run(ws, {"argv": [sys.executable, "-c", script]})
    assert result["success"] is True, result
    daemon = int(pidfile.read_text())
    for _ in range(100):
        if not alive(daemon):
            break
        await asyncio.sleep(0.02)
    assert not alive(daemon)
    stopped = result["output"]["stopped_processes"]
    assert [p["pid"] for p in stopped] == [daemon]
    assert f"(pid {daemon})" in text


# --------------------------------------------------------------------------- previews


def test_preview_is_the_command_line() -> None:
    tool = RunCommandTool()
    state = tool.init({})
    argv = ["bash", "-c", "echo hi && rm -rf build"]
    assert tool.format_tool_call_preview("run_command", {"argv": argv}, state) == \
        shlex.join(argv)
    schema = tool.get_tool_schemas(state)[0]
    assert schema["name"] == "run_command"
    assert schema["parameters"]["required"] == ["argv"]
