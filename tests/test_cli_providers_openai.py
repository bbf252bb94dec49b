"""`agentls check` with provider openai, pointed at a loopback fake of an
OpenAI-compatible server: success, a wrong key and a wrong URL reported
actionably, the key never echoed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.fakes.http_backend import FakeBackend, error_reply, json_reply

PLANTED = "sk-proj-PLANTED-check-0123456789abcdef"


def check(base_url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTLS_", "OPENAI_"))}
    env = {
        **base,
        "AGENTLS_PROVIDER": "openai",
        "AGENTLS_BASE_URL": base_url,
        "AGENTLS_CONFIG_FILE": str(tmp_path / "none.toml"),
        "OPENAI_API_KEY": PLANTED,
    }
    return subprocess.run([sys.executable, "-m", "agentls", "check"], capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=60)


def test_check_passes_against_the_fake(fake_backend: FakeBackend, tmp_path: Path) -> None:
    fake_backend.script("GET", "/v1/models", json_reply({"object": "list", "data": [
        {"id": "qwen2.5-coder-7b", "object": "model", "created": 0, "owned_by": "me"}]}))
    result = check(fake_backend.url + "/v1", tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "OPENAI_API_KEY is set" in result.stdout
    assert "qwen2.5-coder-7b" in result.stdout and "result: OK" in result.stdout
    assert PLANTED not in output
    assert fake_backend.requests_to("/v1/models")[0].headers["authorization"] == (
        f"Bearer {PLANTED}")


def test_check_with_a_wrong_key_is_actionable(fake_backend: FakeBackend, tmp_path: Path) -> None:
    fake_backend.script("GET", "/v1/models", error_reply(
        401, f"Incorrect API key provided: {PLANTED}", type="invalid_request_error",
        code="invalid_api_key"))
    result = check(fake_backend.url + "/v1", tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "error [auth]" in result.stdout and "OPENAI_API_KEY" in result.stdout
    assert "FAILED" in result.stdout
    assert PLANTED not in output


def test_check_with_a_wrong_url_is_actionable(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = check(f"http://127.0.0.1:{port}/v1", tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "error [connection]" in result.stdout
    assert f"127.0.0.1:{port}" in result.stdout and "baseUrl" in result.stdout
