"""`agentls check` says which prompt form inline completion sends the
configured model, and why (providers/fim/probe.py), against loopback fakes
of the engines (tests/fakes/fim_engines.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fakes import fim_engines
from tests.fakes.fim_engines import FimModel
from tests.fakes.http_backend import FakeBackend


def check(base_url: str, model: str, tmp_path: Path) -> str:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTLS_", "OPENAI_"))}
    env = {**base, "AGENTLS_PROVIDER": "openai", "AGENTLS_BASE_URL": base_url,
           "AGENTLS_MODEL": model, "AGENTLS_CONFIG_FILE": str(tmp_path / "none.toml")}
    result = subprocess.run([sys.executable, "-m", "agentls", "check"], capture_output=True,
                            text=True, cwd=tmp_path, env=env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_check_shows_the_template_for_llama_cpp_python(
    fake_backend: FakeBackend, tmp_path: Path
) -> None:
    model = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    fim_engines.llama_cpp_python(fake_backend, FimModel(), model)
    out = check(fake_backend.url + "/v1", model, tmp_path)
    line = next(li for li in out.splitlines() if "inline completion prompts" in li)
    assert "template (qwen2.5-coder)" in line and "does not fill by it" in line, out


def test_check_shows_the_suffix_fim_a_server_does_right(
    fake_backend: FakeBackend, tmp_path: Path
) -> None:
    fim_engines.fim_server(fake_backend, FimModel(), "my-coder")
    out = check(fake_backend.url + "/v1", "my-coder", tmp_path)
    assert "inline completion prompts: suffix: the server's own FIM" in out, out


async def test_the_embedded_model_plans_from_its_gguf(tmp_path: Path) -> None:
    from agentls.core.provider.contract import ProviderConfig
    from agentls.providers.local import LocalProvider
    from tests.test_local_fim import qwen_like, write_gguf

    coder = write_gguf(tmp_path / "coder.gguf", qwen_like(**{
        "tokenizer.ggml.fim_pre_token_id": 4, "tokenizer.ggml.fim_suf_token_id": 5,
        "tokenizer.ggml.fim_mid_token_id": 6}))
    plain = write_gguf(tmp_path / "plain.gguf", qwen_like(**{
        "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "def"]}))
    for path, form in ((coder, "template"), (plain, "continuation")):
        provider = LocalProvider(ProviderConfig(name="local", options={"model_path": str(path)}))
        plan = await provider.fim_plan()
        assert plan.form == form, plan
        assert ("qwen2.5-coder" in plan.why) is (form == "template")
        await provider.aclose()
