"""`agentls pull` as a user runs it: a subprocess downloading from the
loopback fake hub (HF_ENDPOINT), printing progress, and leaving the file in
the HF cache where the server finds it without network."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.helpers import server_env
from tests.fakes.hf_hub import FakeHub

pytest.importorskip("huggingface_hub", reason="huggingface_hub (agentls[local]) not installed")

from agentls.providers.local.models import hub
from agentls.providers.local.models.recommended import recommended_for

REPO = "test-org/tiny-GGUF"


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + os.urandom(300_000))
    return path


def pull(tmp_path: Path, fake: FakeHub, *args: str) -> subprocess.CompletedProcess[str]:
    env = server_env(HF_ENDPOINT=fake.url, HF_HOME=str(tmp_path / "hf"))
    env.pop("HF_TOKEN", None)
    return subprocess.run([sys.executable, "-m", "agentls", "pull", *args], env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_pull_downloads_with_progress_into_the_hf_cache(tmp_path: Path, gguf: Path) -> None:
    with FakeHub() as fake:
        fake.add(REPO, "tiny.Q4_K_M.gguf", gguf)
        done = pull(tmp_path, fake, f"hf:{REPO}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tiny.Q4_K_M.gguf: 0%" in done.stdout and "tiny.Q4_K_M.gguf: 100%" in done.stdout
    ready = next(line for line in done.stdout.splitlines() if line.startswith("ready: "))
    path = Path(ready.removeprefix("ready: "))
    assert path.read_bytes() == gguf.read_bytes()
    assert f'model = "hf:{REPO}"' in done.stdout  # how to use it
    ref = hub.parse_hf_reference(f"hf:{REPO}")
    assert hub.cached_path(ref, tmp_path / "hf" / "hub") == path  # found offline


def test_pull_errors_name_the_model_and_exit_1(tmp_path: Path, gguf: Path) -> None:
    with FakeHub() as fake:
        fake.add(REPO, "tiny.Q4_K_M.gguf", gguf)
        missing = pull(tmp_path, fake, "hf:nobody/none-GGUF")
        nothing = pull(tmp_path, fake)
    assert missing.returncode == 1 and "no repository 'nobody/none-GGUF'" in missing.stdout
    assert nothing.returncode == 2 and "--recommended" in nothing.stdout
    # With nothing named, it offers the packaged models too, with how to install them.
    from agentls.providers.local import CATALOG, DEFAULT_CHAT_MODEL

    assert f"  {DEFAULT_CHAT_MODEL}: " in nothing.stdout and "default for chat" in nothing.stdout
    assert all(f"  {model}: " in nothing.stdout for model in CATALOG)


def test_pull_recommended_picks_by_memory(tmp_path: Path, gguf: Path) -> None:
    picks = recommended_for(hub.total_memory())
    with FakeHub() as fake:
        for entry in picks.values():
            ref = hub.parse_hf_reference(entry.ref)
            fake.add(ref.repo_id, f"model-{ref.selector or 'Q8_0'}.gguf", gguf)
        done = pull(tmp_path, fake, "--recommended")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "recommended for this machine" in done.stdout
    assert done.stdout.count("ready: ") == 2
    assert f'inlineCompletion.model = "{picks["completion"].ref}"' in done.stdout
    assert f'model = "{picks["chat"].ref}"' in done.stdout


def test_check_says_whether_the_configured_model_is_downloaded(tmp_path: Path, gguf: Path) -> None:
    from agentls.providers.local import runtime_error

    if runtime_error() is not None:
        pytest.skip("llama-cpp-python not installed: `agentls check` cannot probe `local`")
    with FakeHub() as fake:
        fake.add(REPO, "tiny.Q4_K_M.gguf", gguf)
        env = server_env(HF_ENDPOINT=fake.url, HF_HOME=str(tmp_path / "hf"),
                         AGENTLS_PROVIDER="local", AGENTLS_INLINE_COMPLETION__MODEL=f"hf:{REPO}",
                         AGENTLS_STATE_DIR=str(tmp_path / "state"))

        def check() -> str:
            done = subprocess.run([sys.executable, "-m", "agentls", "check"], env=env,
                                  capture_output=True, text=True, timeout=120,
                                  stdin=subprocess.DEVNULL, cwd=tmp_path)
            return done.stdout

        before = check()
        assert pull(tmp_path, fake, f"hf:{REPO}").returncode == 0
        after = check()
    assert f"model hf:{REPO}: not downloaded yet; run `agentls pull hf:{REPO}`" in before
    assert f"model hf:{REPO}: downloaded (" in after
    from agentls.providers.local import DEFAULT_CHAT_MODEL, installed_parts

    if installed_parts(DEFAULT_CHAT_MODEL) is not None:  # the packaged Qwen2.5-Coder 1.5B
        assert f"tools: {DEFAULT_CHAT_MODEL} calls tools natively (hermes format)" in after
