"""`agentls check` with provider ollama, as a user runs it (a subprocess),
against a loopback fake Ollama server and against a port nobody listens on."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.fakes.http_backend import FakeBackend, Reply, json_reply

TAGS = {
    "models": [
        {
            "name": "qwen2.5-coder:1.5b",
            "model": "qwen2.5-coder:1.5b",
            "size": 986061892,
            "details": {"family": "qwen2", "parameter_size": "1.5B"},
        },
        {"name": "llama3.2:latest", "model": "llama3.2:latest", "details": {}},
    ]
}


def check(tmp_path: Path, base_url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLS_")}
    env.update(
        AGENTLS_PROVIDER="ollama",
        AGENTLS_BASE_URL=base_url,
        AGENTLS_CONFIG_FILE=str(tmp_path / "no-user-config.toml"),
    )
    return subprocess.run(
        [sys.executable, "-m", "agentls", "check"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )


def test_check_against_a_fake_ollama_lists_its_models(tmp_path: Path) -> None:
    with FakeBackend() as backend:
        backend.script("GET", "/api/tags", json_reply(TAGS))
        result = check(tmp_path, backend.url)
        requests = backend.requests_to("/api/tags")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "provider = 'ollama'" in result.stdout
    assert "result: OK" in result.stdout
    assert "llama3.2:latest" in result.stdout and "qwen2.5-coder:1.5b" in result.stdout
    assert len(requests) == 1 and "authorization" not in requests[0].headers


def test_check_with_nothing_listening_says_cannot_reach_and_names_the_url(
    tmp_path: Path,
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}"
    result = check(tmp_path, base_url)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "cannot reach" in result.stdout
    assert f"{base_url}/api/tags" in result.stdout
    assert "ollama serve" in result.stdout  # what to do about it
    assert "FAILED" in result.stdout
    assert "Traceback" not in output


def test_check_with_a_v1_base_url_explains_the_root(tmp_path: Path) -> None:
    with FakeBackend() as backend:  # Ollama answers unknown paths with 404
        backend.script("GET", "/v1/api/tags", Reply(404, body="404 page not found"))
        result = check(tmp_path, backend.url + "/v1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "not_found" in result.stdout and "without /v1" in result.stdout
