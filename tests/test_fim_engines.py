"""Which FIM prompt form each serving engine gets (providers/fim/probe.py),
against loopback fakes that reproduce each engine's real quirk
(tests/fakes/fim_engines.py): the engine's own FIM only when a known-answer
probe shows it honours the suffix; else the model's FIM template in a raw
prompt with its stop tokens; else the prefix alone."""

from __future__ import annotations

from typing import Any

import pytest

from agentls.core.provider.contract import CompletionOptions, FimRequest, ProviderConfig
from agentls.providers.fim.templates import (
    PROBE_PREFIX,
    PROBE_SUFFIX,
    build_fim_prompt,
    family_by_name,
    family_in_text,
    probe_verdict,
)
from agentls.providers.ollama.provider import OllamaProvider
from agentls.providers.openai.provider import OpenAIProvider
from tests.fakes import fim_engines
from tests.fakes.fim_engines import QWEN, FimModel
from tests.fakes.http_backend import FakeBackend

PREFIX = ("class Box:\n    def __init__(self):\n        self.width = 3\n\n\n"
          "def size(box):\n    return box.")
SUFFIX = "\n\n\nclass Crate:\n    def __init__(self):\n        self.volume_l = 40\n"
REQUEST = FimRequest(prefix=PREFIX, suffix=SUFFIX, options=CompletionOptions(max_tokens=16))
COMPLETIONS = "/v1/completions"


def openai(backend: FakeBackend, model: str, **options: Any) -> OpenAIProvider:
    return OpenAIProvider(ProviderConfig(
        name="openai", model=model, base_url=backend.url + "/v1", api_key_env="AGENTLS_NO_KEY",
        request_timeout=5.0, connect_timeout=1.0, options=options))


def ollama_provider(backend: FakeBackend, model: str, **options: Any) -> OllamaProvider:
    return OllamaProvider(ProviderConfig(name="ollama", model=model, base_url=backend.url,
                                         request_timeout=5.0, connect_timeout=1.0,
                                         options=options))


async def fill(provider: OpenAIProvider | OllamaProvider) -> str:
    return "".join([c.delta async for c in provider.stream_fim(REQUEST)])


# --------------------------------------------------------------------------- the probe


@pytest.mark.parametrize(("answer", "honoured"), [
    ("lantern_id", True),
    ("lantern_id\n", True),
    (" lantern_id * 2", True),  # imperfect, but it read the suffix
    ("name", False),  # a guess without the suffix
    ("lantern_id\n\n\nclass Record:\n    def __init__(self):\n", False),  # wrote past the hole
    ("    def other(self):\n        return None\n", False),  # llama-cpp-python's padding
    ("", False),
    ("<pad><pad>", False),
])
def test_the_probe_passes_only_a_fill_that_used_the_suffix(answer: str, honoured: bool) -> None:
    assert probe_verdict(answer)[0] is honoured


def test_the_family_table() -> None:
    for name, family in [("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "qwen2.5-coder"),
                         ("Qwen/Qwen2.5-Coder-1.5B", "qwen2.5-coder"),
                         ("codegemma:2b", "codegemma"), ("bigcode/starcoder2-3b", "starcoder"),
                         ("deepseek-coder-1.3b-base", "deepseek-coder"),
                         ("codellama:7b-code", "codellama"), ("codestral:22b", "codestral")]:
        tokens = family_by_name(name)
        assert tokens is not None and tokens.family == family, name
    for name in ("qwen2.5-7b-instruct", "gemma-3-270m-it", "llama3.1:8b", "gpt-4o-mini"):
        assert family_by_name(name) is None, name
    codestral = family_by_name("codestral")
    assert codestral is not None and build_fim_prompt(codestral, "p", "s") == "[SUFFIX]s[PREFIX]p"
    template = ("{{- if .Suffix }}<|fim_prefix|>{{ .Prompt }}<|fim_suffix|>{{ .Suffix }}"
                "<|fim_middle|>")
    found = family_in_text(template)
    assert found is not None and found.family == "qwen2.5-coder"


# --------------------------------------------------------------------------- engines


async def test_llama_cpp_python_accepts_suffix_but_fails_the_probe_so_gets_the_template(
    fake_backend: FakeBackend,
) -> None:
    fim_engines.llama_cpp_python(fake_backend, FimModel())
    provider = openai(fake_backend, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    plan = await provider.fim_plan()
    assert plan.form == "template" and plan.family == "qwen2.5-coder", plan
    assert "accepts `suffix` but does not fill by it" in plan.why
    assert "/extras/tokenize" in plan.why
    assert await fill(provider) == "volume_l"
    await provider.aclose()
    probe, sent = fake_backend.requests_to(COMPLETIONS)
    assert probe.json["suffix"] == PROBE_SUFFIX and probe.json["prompt"] == PROBE_PREFIX
    assert "suffix" not in sent.json
    assert sent.json["prompt"] == build_fim_prompt(QWEN, PREFIX, SUFFIX)
    assert "<|endoftext|>" in sent.json["stop"] and "<|fim_pad|>" in sent.json["stop"]
    assert provider.status_report()["fim"]["models"][
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"]["form"] == "template"


async def test_lm_studio_ignores_suffix_and_the_name_gives_the_template(
    fake_backend: FakeBackend,
) -> None:
    fim_engines.lm_studio(fake_backend, FimModel(), "qwen2.5-coder-7b-instruct")
    provider = openai(fake_backend, "qwen2.5-coder-7b-instruct")
    plan = await provider.fim_plan()
    assert plan.form == "template" and "model's name" in plan.why, plan
    assert await fill(provider) == "volume_l"
    await provider.aclose()


async def test_lm_studio_with_a_model_of_no_known_family_continues_the_prefix(
    fake_backend: FakeBackend,
) -> None:
    fim_engines.lm_studio(fake_backend, FimModel(), "my-model")
    provider = openai(fake_backend, "my-model")
    plan = await provider.fim_plan()
    assert plan.form == "continuation", plan
    assert await provider.fim_supported()  # raw completion, not chat
    await fill(provider)
    await provider.aclose()
    sent = fake_backend.requests_to(COMPLETIONS)[-1].json
    assert sent["prompt"] == PREFIX and "suffix" not in sent


async def test_llama_cpp_server_is_not_probed_and_its_tokenizer_names_the_family(
    fake_backend: FakeBackend,
) -> None:
    fim_engines.llama_cpp_server(fake_backend, FimModel())
    provider = openai(fake_backend, "model.gguf")  # a name that says nothing
    plan = await provider.fim_plan()
    assert plan.form == "template" and plan.family == "qwen2.5-coder", plan
    assert "/tokenize" in plan.why and "/props" in plan.why
    assert await fill(provider) == "volume_l"
    await provider.aclose()
    assert provider.fim.probes == 0
    (sent,) = fake_backend.requests_to(COMPLETIONS)
    assert "suffix" not in sent.json


async def test_llama_cpp_server_with_a_model_without_fim_tokens_continues(
    fake_backend: FakeBackend,
) -> None:
    gemma = FimModel(family=family_by_name("codestral") or QWEN)  # any other vocabulary ...
    gemma.vocabulary = lambda: {"<bos>", "<eos>"}  # type: ignore[method-assign]
    fim_engines.llama_cpp_server(fake_backend, gemma, "gemma-3-270m-it-Q4_K_M.gguf")
    provider = openai(fake_backend, "qwen2.5-coder-named-wrongly.gguf")
    plan = await provider.fim_plan()
    # The tokenizer has the last word over the name.
    assert plan.form == "continuation" and "has no FIM tokens" in plan.why, plan
    await provider.aclose()


async def test_vllm_refuses_suffix_and_its_tokenizer_names_the_family(
    fake_backend: FakeBackend,
) -> None:
    starcoder = family_by_name("starcoder2")
    assert starcoder is not None
    fim_engines.vllm(fake_backend, FimModel(family=starcoder), "bigcode/starcoder2-3b")
    provider = openai(fake_backend, "bigcode/starcoder2-3b")
    plan = await provider.fim_plan()
    assert plan.form == "template" and plan.family == "starcoder", plan
    assert "refuses `suffix`" in plan.why
    assert await fill(provider) == "volume_l"
    await provider.aclose()
    sent = fake_backend.requests_to(COMPLETIONS)[-1].json
    assert sent["prompt"].startswith("<fim_prefix>")
    assert sent["prompt"].endswith("<fim_middle>return box.")  # the line's code, last


async def test_a_server_whose_suffix_fim_works_keeps_it(fake_backend: FakeBackend) -> None:
    model = FimModel()

    def honest(request: Any) -> Any:
        body = request.json or {}
        return fim_engines._openai_text(
            request, model.answer_fim(str(body.get("prompt")), str(body.get("suffix") or "")))

    fake_backend.respond("POST", COMPLETIONS, honest)
    provider = openai(fake_backend, "my-coder:latest")
    plan = await provider.fim_plan()
    assert plan.form == "suffix" and "known-answer probe" in plan.why, plan
    assert await fill(provider) == "volume_l"
    await provider.aclose()
    assert fake_backend.requests_to(COMPLETIONS)[-1].json["suffix"] == SUFFIX
    assert provider.fim.probes == 1


@pytest.mark.parametrize("honoured", [True, False])
async def test_ollama_insert_is_probed_and_the_template_is_the_fallback(
    fake_backend: FakeBackend, honoured: bool,
) -> None:
    template = ("{{- if .Suffix }}<|fim_prefix|>{{ .Prompt }}<|fim_suffix|>{{ .Suffix }}"
                "<|fim_middle|>{{- else }}{{ .Prompt }}{{- end }}")
    fim_engines.ollama(fake_backend, {"my-coder:latest": (FimModel(), template,
                                                          ["completion", "insert"])},
                       suffix_honoured=honoured)
    provider = ollama_provider(fake_backend, "my-coder:latest")
    plan = await provider.fim_plan()
    assert plan.form == ("suffix" if honoured else "template"), plan
    if not honoured:
        assert "the model's template (/api/show)" in plan.why
    assert await fill(provider) == "volume_l"
    await provider.aclose()
    sent = fake_backend.requests_to("/api/generate")[-1].json
    assert sent["raw"] is (not honoured)
    assert ("suffix" in sent) is honoured


async def test_ollama_without_insert_gets_the_template_by_name_or_continues(
    fake_backend: FakeBackend,
) -> None:
    fim_engines.ollama(fake_backend, {
        "qwen2.5-coder:7b-instruct": (FimModel(), "{{ .Prompt }}", ["completion", "tools"]),
        "llama3.1:8b": (FimModel(), "{{ .Prompt }}", ["completion", "tools"])})
    coder = ollama_provider(fake_backend, "qwen2.5-coder:7b-instruct")
    assert (await coder.fim_plan()).form == "template"
    assert await fill(coder) == "volume_l"
    chat = ollama_provider(fake_backend, "llama3.1:8b")
    assert (await chat.fim_plan()).form == "continuation"
    await coder.aclose()
    await chat.aclose()
    assert coder.fim.probes == 0  # no `insert`: nothing to probe


@pytest.mark.parametrize(("option", "form"), [(True, "suffix"), ("template", "template"),
                                              ("continuation", "continuation"), (False, "none")])
async def test_the_fim_option_overrides(fake_backend: FakeBackend, option: Any, form: str) -> None:
    fim_engines.lm_studio(fake_backend, FimModel(), "qwen2.5-coder-7b")
    provider = openai(fake_backend, "qwen2.5-coder-7b", fim=option)
    assert (await provider.fim_plan()).form == form
    await provider.aclose()
    assert provider.fim.probes == 0
