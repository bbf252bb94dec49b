"""Fill-in-the-middle on OpenAI-compatible servers is decided by asking the
server (providers/fim/probe.py): the known-answer probe, the errors real
servers send for `suffix`, the override, against a loopback fake speaking
their wire formats (tests/fakes/http_backend.py; the engines' FIM quirks are
in tests/test_fim_engines.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentls.core.provider.contract import (
    CompletionOptions,
    FimRequest,
    FimUnsupported,
    ProviderConfig,
)
from agentls.core.types.errors import ModelError
from agentls.providers.fim import probe as fim_probe
from agentls.providers.fim.probe import rejection, says_fim_unsupported
from agentls.providers.openai.provider import OpenAIProvider
from tests.fakes.http_backend import (
    SSE_DONE,
    FakeBackend,
    Reply,
    error_reply,
    json_reply,
    openai_chunk,
    sse,
    sse_reply,
)

COMPLETIONS = "/v1/completions"
REQUEST = FimRequest(prefix="def f():\n    ", suffix="\n", options=CompletionOptions(max_tokens=8))


def make(backend: FakeBackend, model: str = "my-coder:latest", **options: Any) -> OpenAIProvider:
    return OpenAIProvider(ProviderConfig(
        name="openai", model=model, base_url=backend.url + "/v1", api_key_env="AGENTLS_NO_KEY",
        request_timeout=2.0, connect_timeout=1.0, options=options))


def text_stream() -> Reply:
    return sse_reply([sse(openai_chunk(text="return 1", finish_reason="stop")), SSE_DONE])


def probe_answer(text: str) -> Reply:
    """A non-streamed /completions answer (the known-answer probe)."""
    return json_reply({"choices": [{"index": 0, "text": text, "finish_reason": "stop"}]})


async def fim_text(provider: OpenAIProvider) -> str:
    return "".join([c.delta async for c in provider.stream_fim(REQUEST)])


async def test_a_server_filling_the_probe_by_the_suffix_gets_suffix_fim_whatever_the_name(
    fake_backend: FakeBackend,
) -> None:
    fake_backend.script("POST", COMPLETIONS, probe_answer("lantern_id"), text_stream())
    provider = make(fake_backend)
    assert await provider.fim_supported() is True
    assert await fim_text(provider) == "return 1"
    assert await fim_text(provider) == "return 1"
    await provider.aclose()
    assert provider.model_supports_fim() and "fim" in provider.get_info().capabilities
    assert provider.fim.probes == 1
    paths = [r.path for r in fake_backend.requests]
    assert paths[0] == "/props" and paths[-3:] == [COMPLETIONS] * 3
    assert fake_backend.requests_to(COMPLETIONS)[1].json["suffix"] == "\n"
    assert provider.status_report()["fim"]["models"]["my-coder:latest"]["form"] == "suffix"


@pytest.mark.parametrize(
    ("reply", "who"),
    [
        (error_reply(404, "This is a chat model and not supported in the v1/completions "
                     "endpoint. Did you mean to use v1/chat/completions?"), "api.openai.com"),
        (Reply(405, body="Method Not Allowed"), "no route"),
        (Reply(501, body="Not Implemented"), "no route"),
    ],
)
async def test_a_server_without_raw_completion_means_chat_after_one_probe(
    fake_backend: FakeBackend, reply: Reply, who: str
) -> None:
    fake_backend.script("POST", COMPLETIONS, reply)
    provider = make(fake_backend, model="qwen2.5-coder-7b")
    assert await provider.fim_supported() is False, who
    with pytest.raises(FimUnsupported):  # known now: no second request
        await fim_text(provider)
    await provider.aclose()
    assert len(fake_backend.requests_to(COMPLETIONS)) == 1, who
    assert provider.status_report()["fim"]["models"]["qwen2.5-coder-7b"]["form"] == "none"


@pytest.mark.parametrize(
    ("reply", "who"),
    [
        (error_reply(400, "suffix is not currently supported"), "vLLM"),
        (error_reply(400, "Unrecognized request argument supplied: suffix"), "older OpenAI"),
        (Reply(500, body={"error": {"code": 500, "message": "Unsupported param: suffix",
                                    "type": "server_error"}}), "llama.cpp without /props"),
        (json_reply({"error": {"message": "registry.ollama.ai/library/llama3:latest does not "
                               "support insert", "type": "api_error"}}, status=400), "ollama /v1"),
        (json_reply({"detail": [{"msg": "extra fields not permitted", "loc": ["suffix"]}]},
                    status=422), "FastAPI"),
    ],
)
async def test_a_server_refusing_suffix_gets_the_template_or_the_prefix(
    fake_backend: FakeBackend, reply: Reply, who: str
) -> None:
    fake_backend.script("POST", COMPLETIONS, reply)
    coder, other = make(fake_backend, model="qwen2.5-coder-7b"), make(fake_backend, model="m")
    assert (await coder.fim_plan()).form == "template", who
    assert (await other.fim_plan()).form == "continuation", who
    assert await coder.fim_supported() and await other.fim_supported()
    await coder.aclose()
    await other.aclose()
    assert len(fake_backend.requests_to(COMPLETIONS)) == 2, who  # one probe each


@pytest.mark.parametrize(
    "reply",
    [
        error_reply(401, "Incorrect API key provided", type="invalid_request_error"),
        error_reply(403, "forbidden", type="permission_error"),
        error_reply(429, "Rate limit reached", type="rate_limit_error"),
        Reply(503, body={"error": {"message": "Loading model", "type": "unavailable_error"}}),
        Reply(500, body={"error": {"message": "CUDA out of memory", "type": "server_error"}}),
        error_reply(400, "This model's maximum context length is 2048 tokens"),
    ],
)
async def test_probe_failures_that_say_nothing_about_fim_are_asked_again_later(
    fake_backend: FakeBackend, reply: Reply, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_backend.script("POST", COMPLETIONS, reply)
    provider = make(fake_backend)
    plan = await provider.fim_plan()
    assert plan.form == "continuation" and "asked again" in plan.why
    assert provider.fim.known("my-coder:latest") is not None  # for now
    monkeypatch.setattr(fim_probe, "RETRY_SECONDS", 0.0)
    provider.fim._plans.clear()
    await provider.fim_plan()
    assert provider.fim.known("my-coder:latest") is None  # due again at once
    await provider.fim_plan()
    await provider.aclose()
    # The probe is not retried within a request, and is asked again when due.
    assert len(fake_backend.requests_to(COMPLETIONS)) == 3


async def test_llama_cpp_props_means_no_probe(fake_backend: FakeBackend) -> None:
    fake_backend.script("GET", "/props", json_reply({
        "default_generation_settings": {"n_ctx": 4096, "params": {}}, "total_slots": 1,
        "model_path": "/models/qwen2.5-coder-1.5b-q8_0.gguf", "build_info": "b6000-abc"}))
    provider = make(fake_backend, model="qwen2.5-coder-1.5b")
    assert (await provider.fim_plan()).form == "template"  # by name: no /tokenize here
    assert (await provider.fim_plan("other")).form == "continuation"
    await provider.aclose()
    assert not fake_backend.requests_to(COMPLETIONS)
    assert len(fake_backend.requests_to("/props")) == 1


@pytest.mark.parametrize(("option", "expected"), [(True, True), (False, False)])
async def test_the_fim_option_overrides_without_asking(
    fake_backend: FakeBackend, option: bool, expected: bool
) -> None:
    fake_backend.script("POST", COMPLETIONS, error_reply(404, "no such route"))
    provider = make(fake_backend, fim=option)
    assert await provider.fim_supported() is expected
    if option:  # forced FIM on a server without it: an ordinary error, not a silent fallback
        with pytest.raises(ModelError) as info:
            await fim_text(provider)
        assert not isinstance(info.value, FimUnsupported)
    await provider.aclose()
    assert not fake_backend.requests_to("/props")


async def test_concurrent_first_requests_find_out_once(fake_backend: FakeBackend) -> None:
    fake_backend.script("POST", COMPLETIONS, probe_answer("lantern_id"))
    provider = make(fake_backend)
    answers = await asyncio.gather(*(provider.fim_supported() for _ in range(5)))
    await provider.aclose()
    assert answers == [True] * 5
    assert len(fake_backend.requests_to("/props")) == 1
    assert provider.fim.probes == 1


def test_says_fim_unsupported() -> None:
    assert says_fim_unsupported(404, "")
    assert says_fim_unsupported(400, "suffix is not currently supported")
    assert says_fim_unsupported(500, "Unsupported param: suffix")
    assert not says_fim_unsupported(500, "internal error")
    assert not says_fim_unsupported(400, "max_tokens must be at least 1")
    assert not says_fim_unsupported(400, "prompt is too long for the context window (suffix)")
    assert not says_fim_unsupported(401, "suffix")
    assert not says_fim_unsupported(429, "unsupported")
    assert rejection(404, "") == "no_completions"
    assert rejection(400, "This is a chat model") == "no_completions"
    assert rejection(400, "suffix is not currently supported") == "no_suffix"
    assert rejection(500, "Unsupported param: suffix") == "no_suffix"
