"""`agentls check` with provider anthropic, pointed at a loopback fake of
the Messages API: success, and a wrong key reported actionably without the key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fakes.http_backend import FakeBackend, Reply, json_reply

PLANTED = "sk-ant-api03-PLANTED-check-0123456789"


def check(backend: FakeBackend, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTLS_", "ANTHROPIC_"))}
    env = {
        **base,
        "AGENTLS_PROVIDER": "anthropic",
        "AGENTLS_BASE_URL": backend.url,
        "AGENTLS_CONFIG_FILE": str(tmp_path / "none.toml"),
        "ANTHROPIC_API_KEY": PLANTED,
    }
    return subprocess.run(
        [sys.executable, "-m", "agentls", "check"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )


def test_check_passes_against_the_fake(fake_backend: FakeBackend, tmp_path: Path) -> None:
    fake_backend.script(
        "GET",
        "/v1/models",
        json_reply(
            {
                "data": [
                    {
                        "type": "model",
                        "id": "claude-sonnet-4-5-20250929",
                        "display_name": "Claude Sonnet 4.5",
                        "created_at": "2025-09-29T00:00:00Z",
                    }
                ],
                "has_more": False,
                "first_id": "claude-sonnet-4-5-20250929",
                "last_id": "claude-sonnet-4-5-20250929",
            }
        ),
    )
    result = check(fake_backend, tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "provider = 'anthropic'" in result.stdout
    assert "ANTHROPIC_API_KEY is set" in result.stdout
    assert "claude-sonnet-4-5-20250929" in result.stdout
    assert "result: OK" in result.stdout
    assert PLANTED not in output
    request = fake_backend.requests_to("/v1/models")[0]
    assert request.headers["x-api-key"] == PLANTED
    assert request.headers["anthropic-version"] == "2023-06-01"


def test_check_with_a_wrong_key_is_actionable(fake_backend: FakeBackend, tmp_path: Path) -> None:
    body = {
        "type": "error",
        "error": {"type": "authentication_error", "message": f"invalid x-api-key {PLANTED}"},
    }
    fake_backend.script("GET", "/v1/models", Reply(status=401, body=body))
    result = check(fake_backend, tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "error [auth]" in result.stdout
    assert "invalid x-api-key" in result.stdout
    assert "Check the API key in the environment variable ANTHROPIC_API_KEY" in result.stdout
    assert "FAILED" in result.stdout
    assert PLANTED not in output
