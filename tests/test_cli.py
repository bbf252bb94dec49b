"""The console script as a user runs it: --version, --help, check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agentls import __version__


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
        ) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLS_")}
    return subprocess.run([sys.executable, "-m", "agentls", *args], capture_output=True,
                          text=True, cwd=cwd, env={**base, **(env or {})}, timeout=60)


def test_version_and_help() -> None:
    assert run("--version").stdout.strip() == f"agentls {__version__}"
    helped = run("--help")
    assert helped.returncode == 0
    for flag in ("--stdio", "--tcp", "--host", "--port", "--log-file", "check"):
        assert flag in helped.stdout


def test_check_passes_with_scripted_provider(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "hi"}]))
    (tmp_path / "user.toml").write_text(
        f'provider = "scripted"\n[providerOptions]\nscript = "{script}"\n')
    result = run("check", cwd=tmp_path, env={"AGENTLS_CONFIG_FILE": str(tmp_path / "user.toml")})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "provider = 'scripted'" in result.stdout
    # the agent as build_agent makes it for the editor: its tools
    tools_line = next(line for line in result.stdout.splitlines()
                      if line.startswith("agent tools: "))
    assert {"read_file", "edit_file", "run_command"} <= set(tools_line[13:].split(", "))
    assert "result: OK" in result.stdout


def test_check_says_which_tools_file_blocks_keep_from_the_model(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "hi"}]))
    (tmp_path / "user.toml").write_text(
        f'provider = "scripted"\n[providerOptions]\nscript = "{script}"\n'
        '[session]\neditFormat = "file-blocks"\n')
    result = run("check", cwd=tmp_path, env={"AGENTLS_CONFIG_FILE": str(tmp_path / "user.toml")})
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    offered = next(line for line in lines if line.startswith("agent tools: "))[13:].split(", ")
    assert "read_file" in offered and "edit_file" not in offered and "write_file" not in offered
    assert "run_command" not in offered  # agentls runs the covering tests itself
    kept = next(line for line in lines if "file changes:" in line)
    assert "edit_file" in kept and "write_file" in kept and "file-blocks" in kept


def test_check_reports_bad_setting_with_accepted_values(tmp_path: Path) -> None:
    (tmp_path / "user.toml").write_text('provider = "scripted"\n[approval]\nmode = "yolo"\n')
    result = run("check", cwd=tmp_path, env={"AGENTLS_CONFIG_FILE": str(tmp_path / "user.toml")})
    assert result.returncode == 1
    assert "approval.mode" in result.stdout and "'message'" in result.stdout
    assert "FAILED" in result.stdout


def test_check_unknown_provider_says_what_to_do(tmp_path: Path) -> None:
    result = run("check", cwd=tmp_path, env={"AGENTLS_PROVIDER": "nosuchprovider",
                                              "AGENTLS_CONFIG_FILE": str(tmp_path / "none")})
    assert result.returncode == 1
    # an invalid value like any other: reported with the installed names
    assert "provider: 'nosuchprovider' is not valid" in result.stdout
    assert "no installed provider plugin has that name" in result.stdout
    assert "scripted" in result.stdout  # lists what is installed
