"""The openai provider and the shared HTTP plumbing, against a loopback fake
server with the provider's real httpx code (tests/fakes/http_backend.py)."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import AsyncIterator
from importlib.metadata import entry_points
from typing import Any

import pytest

from agentls.core.provider.contract import CompletionOptions, FimRequest, ProviderConfig
from agentls.core.types.conversation import Message
from agentls.core.types.errors import ModelError, ProviderRequestCancelled
from agentls.core.types.messages import StreamChunk, ToolCall
from agentls.providers.http.client import HttpClient
from agentls.providers.http.errors import (
    classify_status,
    extract_error_message,
    parse_retry_after,
    redact,
)
from agentls.providers.http.framing import LineSplitter, ResponseFormatError, SSEDecoder
from agentls.providers.openai.provider import OpenAIProvider
from tests.fakes.http_backend import (
    CLOSE,
    SSE_DONE,
    STALL,
    FakeBackend,
    Reply,
    error_reply,
    json_reply,
    ndjson,
    ndjson_reply,
    openai_chunk,
    openai_usage_chunk,
    sse,
    sse_reply,
)

CHAT = "/v1/chat/completions"
KEY_ENV = "AGENTLS_TEST_OPENAI_KEY"
SECRET = "sk-test-PLANTED-0123456789abcdef"
HELLO = [Message(role="user", content="Say hello")]


def make_provider(backend: FakeBackend, **overrides: Any) -> OpenAIProvider:
    settings: dict[str, Any] = {
        "name": "openai",
        "model": "test-model",
        "base_url": backend.url + "/v1",
        "api_key_env": KEY_ENV,
        "request_timeout": 2.0,
        "connect_timeout": 1.0,
    }
    settings.update(overrides)
    return OpenAIProvider(ProviderConfig(**settings))


@pytest.fixture
async def provider(fake_backend: FakeBackend) -> AsyncIterator[OpenAIProvider]:
    instance = make_provider(fake_backend)
    yield instance
    await instance.aclose()


async def collect(stream: AsyncIterator[StreamChunk]) -> list[StreamChunk]:
    return [chunk async for chunk in stream]


async def failure(stream: AsyncIterator[StreamChunk]) -> ModelError:
    with pytest.raises(ModelError) as info:
        await asyncio.wait_for(collect(stream), 5)
    return info.value


# --------------------------------------------------------------------------- streaming


async def test_streams_text_with_usage_only_final_chunk(
    fake_backend: FakeBackend, provider: OpenAIProvider
) -> None:
    fake_backend.script(
        "POST",
        CHAT,
        sse_reply(
            [
                sse(openai_chunk("Hel")),
                sse(openai_chunk("lo")),
                sse(openai_chunk(finish_reason="stop")),
                sse(openai_usage_chunk(12, 2)),
                SSE_DONE,
            ]
        ),
    )
    chunks = await collect(provider.stream(HELLO))
    assert "".join(c.delta for c in chunks) == "Hello"
    assert [c.finish_reason for c in chunks if c.finish_reason] == ["stop"]
    assert chunks[-1].usage.model_dump() == {
        "input_tokens": 12,
        "output_tokens": 2,
        "total_tokens": 14,
    }

    response = await provider.complete(HELLO)
    assert (response.content, response.finish_reason) == ("Hello", "stop")
    assert response.usage.total_tokens == 14


async def test_framing_split_anywhere_and_utf8_split_across_writes(
    fake_backend: FakeBackend, provider: OpenAIProvider
) -> None:
    body = (
        b": keep-alive comment\n\n"
        + sse(openai_chunk("h\u00e9llo \U0001f642"))
        + sse(openai_chunk(finish_reason="stop")).replace(b"\n", b"\r\n")
        + SSE_DONE
    )
    pieces: list[bytes | str] = [body[i : i + 5] for i in range(0, len(body), 5)]
    fake_backend.script("POST", CHAT, sse_reply(pieces))
    response = await provider.complete(HELLO)
    assert response.content == "h\u00e9llo \U0001f642"
    assert response.usage.output_tokens > 0  # no usage sent: estimated


async def test_parallel_tool_calls_split_across_chunks(
    fake_backend: FakeBackend, provider: OpenAIProvider
) -> None:
    def call(index: int, args: str, id: str | None = None, name: str | None = None) -> Any:
        function: dict[str, Any] = {"arguments": args}
        if name:
            function["name"] = name
        fragment: dict[str, Any] = {"index": index, "function": function}
        if id:
            fragment.update(id=id, type="function")
        return sse(openai_chunk(tool_calls=[fragment]))

    fake_backend.script(
        "POST",
        CHAT,
        sse_reply(
            [
                call(0, "", id="call_a", name="read_file"),
                call(0, '{"pa'),
                call(1, "", id="call_b", name="search_text"),
                call(0, 'th": "src/ma'),
                call(1, '{"pattern": "TO'),
                call(0, 'in.py"}'),
                call(1, 'DO\\"x"}'),
                sse(openai_chunk(finish_reason="tool_calls")),
                sse(openai_usage_chunk(30, 20)),
                SSE_DONE,
            ]
        ),
    )
    response = await provider.complete(HELLO, [{"name": "read_file", "parameters": {}}])
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == [
        ToolCall(id="call_a", tool="read_file", arguments={"path": "src/main.py"}),
        ToolCall(id="call_b", tool="search_text", arguments={"pattern": 'TODO"x'}),
    ]


async def test_reasoning_content_is_streamed_separately(
    fake_backend: FakeBackend, provider: OpenAIProvider
) -> None:
    reasoning_field = openai_chunk()
    reasoning_field["choices"][0]["delta"] = {"reasoning": " then answer."}
    fake_backend.script(
        "POST",
        CHAT,
        sse_reply(
            [
                sse(openai_chunk(reasoning="Think first,")),
                sse(reasoning_field),
                sse(openai_chunk("42", finish_reason="stop")),
                SSE_DONE,
            ]
        ),
    )
    chunks = await collect(provider.stream(HELLO))
    assert "".join(c.reasoning for c in chunks) == "Think first, then answer."
    assert "".join(c.delta for c in chunks) == "42"


async def test_request_body_and_message_conversion(
    fake_backend: FakeBackend, provider: OpenAIProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    fake_backend.script("POST", CHAT, sse_reply([sse(openai_chunk("ok", finish_reason="stop"))]))
    messages = [
        Message(role="system", content="You are agentls."),
        Message(role="user", content="Read a.py"),
        Message(
            role="assistant",
            content="",
            metadata={
                "tool_calls": [{"tool": "read_file", "arguments": {"path": "a.py"}, "id": "call_1"}]
            },
        ),
        Message(
            role="tool",
            content="print(1)",
            metadata={"tool_call_id": "call_1", "tool_name": "read_file"},
        ),
    ]
    tool = {
        "name": "read_file",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    options = CompletionOptions(
        max_tokens=64, temperature=0.2, stop=("\n\n",), extra={"seed": 7, "stream_options": None}
    )
    await provider.complete(messages, [tool], options=options)

    request = fake_backend.requests_to(CHAT)[0]
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    body = request.json
    assert body["model"] == "test-model" and body["stream"] is True
    assert "stream_options" not in body  # removed through extra={"stream_options": None}
    assert (body["max_tokens"], body["temperature"], body["stop"], body["seed"]) == (
        64,
        0.2,
        ["\n\n"],
        7,
    )
    assert body["tools"] == [{"type": "function", "function": tool}]
    assert body["messages"] == [
        {"role": "system", "content": "You are agentls."},
        {"role": "user", "content": "Read a.py"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "print(1)"},
    ]


async def test_no_key_means_no_authorization_header_and_usage_requested(
    fake_backend: FakeBackend, provider: OpenAIProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    fake_backend.script("POST", CHAT, sse_reply([sse(openai_chunk("ok", finish_reason="stop"))]))
    await provider.complete(HELLO)
    request = fake_backend.requests_to(CHAT)[0]
    assert "authorization" not in request.headers
    assert request.json["stream_options"] == {"include_usage": True}
    assert "tools" not in request.json


# --------------------------------------------------------------------------- errors


async def test_429_retry_after_is_honoured_then_success(
    fake_backend: FakeBackend, provider: OpenAIProvider
) -> None:
    fake_backend.script(
        "POST",
        CHAT,
        error_reply(429, "Rate limit reached", type="requests", headers={"Retry-After": "1"}),
        sse_reply([sse(openai_chunk("late", finish_reason="stop")), SSE_DONE]),
    )
    response = await provider.complete(HELLO)
    assert response.content == "late"
    first, second = fake_backend.requests_to(CHAT)
    assert second.received_at - first.received_at >= 0.9


async def test_401_is_auth_and_never_leaks_the_key(
    fake_backend: FakeBackend, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(KEY_ENV, SECRET)
    echo = f"Incorrect API key provided: {SECRET}."
    fake_backend.script(
        "POST",
        CHAT,
        error_reply(500, echo, type="server_error"),
        error_reply(401, echo, type="invalid_request_error", code="invalid_api_key"),
    )
    provider = make_provider(fake_backend, options={"max_attempts": 2})
    error = await failure(provider.stream(HELLO))
    await provider.aclose()
    assert error.code == "auth"
    assert "Incorrect API key provided" in error.message and KEY_ENV in error.message
    for text in (error.message, repr(error), str(error), caplog.text, repr(provider)):
        assert SECRET not in text
    assert len(fake_backend.requests) == 2  # the 500 was retried, the 401 not


async def test_401_without_a_key_says_the_variable_is_unset(
    fake_backend: FakeBackend, provider: OpenAIProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    fake_backend.script("POST", CHAT, error_reply(401, "You didn't provide an API key."))
    error = await failure(provider.stream(HELLO))
    assert error.code == "auth" and f"{KEY_ENV} is not set" in error.message


async def test_context_length_error(fake_backend: FakeBackend, provider: OpenAIProvider) -> None:
    message = (
        "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 130000 tokens. Please reduce the length of the messages."
    )
    fake_backend.script(
        "POST",
        CHAT,
        Reply(
            400,
            body={
                "error": {
                    "message": message,
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            },
        ),
    )
    error = await failure(provider.stream(HELLO))
    assert error.code == "context_length"
    assert "maximum context length is 128000" in error.message
    assert len(fake_backend.requests) == 1


async def test_missing_model_is_not_found_with_a_hint(
    fake_backend: FakeBackend, provider: OpenAIProvider
) -> None:
    fake_backend.script(
        "POST",
        CHAT,
        error_reply(404, "The model `nope` does not exist", code="model_not_found"),
    )
    error = await failure(provider.stream(HELLO, options=CompletionOptions(model="nope")))
    assert error.code == "not_found" and error.model == "nope"
    assert "'nope'" in error.message and "agentls/models" in error.message


async def test_server_errors_give_up_after_max_attempts(fake_backend: FakeBackend) -> None:
    fake_backend.script("POST", CHAT, Reply(503, body="upstream overloaded"))
    provider = make_provider(fake_backend, options={"max_attempts": 2})
    error = await failure(provider.stream(HELLO))
    await provider.aclose()
    assert error.code == "server_error" and "upstream overloaded" in error.message
    assert len(fake_backend.requests) == 2


async def test_connection_refused_names_the_url() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = OpenAIProvider(
        ProviderConfig(
            name="openai", base_url=f"http://127.0.0.1:{port}/v1", options={"max_attempts": 1}
        )
    )
    error = await failure(provider.stream(HELLO))
    assert error.code == "connection"
    assert f"127.0.0.1:{port}/v1/chat/completions" in error.message and "baseUrl" in error.message


async def test_connection_closed_mid_stream(
    fake_backend: FakeBackend, provider: OpenAIProvider
) -> None:
    fake_backend.script("POST", CHAT, sse_reply([sse(openai_chunk("Hel")), CLOSE]))
    error = await failure(provider.stream(HELLO))
    assert error.code == "connection"
    assert len(fake_backend.requests) == 1  # bytes were handed out: never retried


async def test_stream_ending_without_done_is_an_error(
    fake_backend: FakeBackend, provider: OpenAIProvider
) -> None:
    # A close-delimited body: the end looks clean at the HTTP level.
    fake_backend.script("POST", CHAT, sse_reply([sse(openai_chunk("Hel"))], chunked=False))
    error = await failure(provider.stream(HELLO))
    assert error.code == "connection" and "before it finished" in error.message


@pytest.mark.parametrize(
    ("chunks", "options", "expected"),
    [
        ([b"data: {not json\n\n"], {}, "not JSON"),
        ([b'data: {"choices": [\xff\xfe]}\n\n'], {}, "invalid UTF-8"),
        ([b"data: " + b"x" * 5000], {"max_line_bytes": 1000}, "max_line_bytes"),
        ([sse(openai_chunk("y" * 400))] * 10, {"max_response_bytes": 2000}, "max_response_bytes"),
    ],
    ids=["malformed-json", "invalid-utf8", "line-too-long", "response-too-large"],
)
async def test_invalid_responses(
    fake_backend: FakeBackend, chunks: list[bytes], options: dict[str, int], expected: str
) -> None:
    fake_backend.script("POST", CHAT, sse_reply([*chunks, STALL]))
    provider = make_provider(fake_backend, options=options)
    error = await failure(provider.stream(HELLO))
    await provider.aclose()
    assert error.code == "invalid_response" and expected in error.message


async def test_error_event_inside_a_200_stream(
    fake_backend: FakeBackend, provider: OpenAIProvider
) -> None:
    fake_backend.script(
        "POST",
        CHAT,
        sse_reply([sse(openai_chunk("a")), sse({"error": {"message": "engine died"}})]),
    )
    error = await failure(provider.stream(HELLO))
    assert error.code == "server_error" and "engine died" in error.message


async def test_json_instead_of_an_event_stream(
    fake_backend: FakeBackend, provider: OpenAIProvider
) -> None:
    fake_backend.script("POST", CHAT, json_reply({"id": "x", "choices": []}))
    error = await failure(provider.stream(HELLO))
    assert error.code == "invalid_response" and "expected an event stream" in error.message


# --------------------------------------------------------------------------- cancel, timeouts


@pytest.mark.parametrize("where", ["before-headers", "mid-stream"])
async def test_cancel_request_closes_the_connection(
    fake_backend: FakeBackend, provider: OpenAIProvider, where: str
) -> None:
    if where == "before-headers":
        fake_backend.script("POST", CHAT, Reply(stall_before_headers=True))
    else:
        fake_backend.script("POST", CHAT, sse_reply([sse(openai_chunk("Hel")), STALL]))
    stream = provider.stream(HELLO, options=CompletionOptions(request_id="req-1"))
    received: list[StreamChunk] = []

    async def consume() -> None:
        async for chunk in stream:
            received.append(chunk)

    task = asyncio.create_task(consume())
    await asyncio.to_thread(fake_backend.wait_for_requests, 1)
    for _ in range(200):
        if received or where == "before-headers":
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # the consumer is parked waiting for the next chunk
    assert provider.cancel_request("req-1")
    with pytest.raises(ProviderRequestCancelled):
        await asyncio.wait_for(task, 2)
    assert [c.delta for c in received] == ([] if where == "before-headers" else ["Hel"])
    request = fake_backend.requests_to(CHAT)[0]
    assert await asyncio.to_thread(fake_backend.wait_for_disconnect, request, 3)
    assert provider.active_requests == 0


@pytest.mark.parametrize("where", ["before-headers", "mid-stream"])
async def test_stalled_server_times_out(fake_backend: FakeBackend, where: str) -> None:
    if where == "before-headers":
        fake_backend.script("POST", CHAT, Reply(stall_before_headers=True))
    else:
        fake_backend.script("POST", CHAT, sse_reply([sse(openai_chunk("Hel")), STALL]))
    provider = make_provider(fake_backend, request_timeout=0.5)
    started = time.monotonic()
    error = await failure(provider.stream(HELLO))
    elapsed = time.monotonic() - started
    await provider.aclose()
    assert error.code == "timeout" and "0.5 s" in error.message
    assert 0.4 <= elapsed < 2.0
    assert len(fake_backend.requests) == 1  # read timeouts are not retried


# --------------------------------------------------------------------------- FIM, models, info


async def test_fim_uses_completions_with_suffix(fake_backend: FakeBackend) -> None:
    fake_backend.script(
        "POST",
        "/v1/completions",
        sse_reply(
            [
                sse(openai_chunk(text="return a")),
                sse(openai_chunk(text=" + b", finish_reason="stop")),
                sse(openai_usage_chunk(20, 4)),
                SSE_DONE,
            ]
        ),
    )
    provider = make_provider(fake_backend, model="qwen2.5-coder-1.5b-instruct",
                             options={"fim": True})
    assert provider.supports_fim
    request = FimRequest(
        prefix="def add(a, b):\n    ", suffix="\n", options=CompletionOptions(max_tokens=16)
    )
    chunks = await collect(provider.stream_fim(request))
    await provider.aclose()
    assert "".join(c.delta for c in chunks) == "return a + b"
    assert chunks[-1].usage.total_tokens == 24
    body = fake_backend.requests_to("/v1/completions")[0].json
    assert body["prompt"] == "def add(a, b):\n    " and body["suffix"] == "\n"
    assert body["stream"] is True and body["max_tokens"] == 16


def test_fim_capability_is_the_option_until_the_server_said() -> None:
    def info(model: str, **options: Any) -> list[str]:
        config = ProviderConfig(name="openai", model=model, options=options)
        return OpenAIProvider(config).get_info().capabilities

    # No guessing from names: before the server was asked, only the option counts.
    assert info("gpt-4o-mini") == ["streaming", "tools"]
    assert "fim" not in info("codestral-latest")
    assert "fim" in info("my-finetune", fim=True)
    assert "fim" not in info("starcoder2-3b", fim=False)


async def test_list_models(fake_backend: FakeBackend, provider: OpenAIProvider) -> None:
    fake_backend.script(
        "GET",
        "/v1/models",
        json_reply(
            {
                "object": "list",
                "data": [
                    {"id": "qwen2.5-coder-7b", "object": "model", "max_model_len": 32768},
                    {"id": "gpt-4o-mini", "object": "model", "owned_by": "system"},
                ],
            }
        ),
    )
    models = await provider.list_models()
    assert [(m.id, m.context_window) for m in models] == [
        ("gpt-4o-mini", 8192),
        ("qwen2.5-coder-7b", 32768),
    ]
    # Nothing known about FIM yet (fim_probe.py finds out at the first inline request).
    assert "fim" not in models[1].capabilities and "fim" not in models[0].capabilities


def test_get_info_and_entry_point() -> None:
    info = OpenAIProvider(ProviderConfig(name="openai")).get_info()
    assert (info.id, info.display_name) == ("openai", "OpenAI-compatible")
    assert info.credential_env_vars == ["OPENAI_API_KEY"]
    assert info.defaults["base_url"] == "https://api.openai.com/v1"
    assert {f.id for f in info.config_fields} >= {"baseUrl", "apiKeyEnv", "model"}
    (entry,) = entry_points(group="agentls.providers", name="openai")
    assert entry.load() is OpenAIProvider


# --------------------------------------------------------------------------- http helpers


async def test_http_client_ndjson_stream(fake_backend: FakeBackend) -> None:
    """The NDJSON reader Ollama uses: lines split across writes, a last line
    without its newline, then a line that is not JSON."""
    fake_backend.script(
        "POST",
        "/api/chat",
        ndjson_reply([b'{"a": 1}\n{"b"', b': 2}\n\n{"c": 3}']),
        ndjson_reply([ndjson({"a": 1}), b"oops\n"]),
    )
    config = ProviderConfig(name="ollama", base_url=fake_backend.url, request_timeout=2.0)
    http = HttpClient(config, provider="ollama", default_base_url="http://unused")
    async with http.stream_ndjson("POST", "/api/chat", model="m", body={"x": 1}) as values:
        assert [value async for value in values] == [{"a": 1}, {"b": 2}, {"c": 3}]
    got: list[Any] = []
    with pytest.raises(ModelError) as info:
        async with http.stream_ndjson("POST", "/api/chat", model="m") as values:
            async for value in values:
                got.append(value)
    await http.aclose()
    assert got == [{"a": 1}]
    assert info.value.code == "invalid_response" and "not JSON" in info.value.message
    assert fake_backend.requests[0].headers["accept"] == "application/x-ndjson"


def test_http_helpers() -> None:
    assert redact(f"key={SECRET}!", [None, SECRET]) == "key=[redacted]!"
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    date = "Wed, 21 Oct 2015 07:28:00 GMT"
    assert parse_retry_after({"retry-after": date}, now=1445412480 - 10) == 10.0
    assert parse_retry_after({}) is None
    assert extract_error_message(b'{"error": "model \'x\' not found"}') == (
        "model 'x' not found",
        "",
    )
    assert extract_error_message(
        b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'
    ) == ("Overloaded", "overloaded_error")
    assert extract_error_message(b"<html>Bad  Gateway</html>") == ("<html>Bad Gateway</html>", "")
    assert classify_status(400, "prompt is too long: 210000 tokens") == "context_length"
    assert classify_status(400, "bad field") == "bad_request"
    assert classify_status(403) == "auth" and classify_status(502) == "server_error"


def test_line_splitter_and_sse_decoder() -> None:
    splitter = LineSplitter(max_line_bytes=64, max_total_bytes=1000)
    lines = splitter.feed(b"event: ping\r\ndata: a\ndata: ") + splitter.feed(b"b\n\n: c\n\n")
    decoder = SSEDecoder()
    events = [e for e in map(decoder.feed, lines) if e is not None]
    assert [(e.event, e.data) for e in events] == [("ping", "a\nb")]
    with pytest.raises(ResponseFormatError):
        splitter.feed(b"z" * 65)


def test_a_server_on_this_machine_is_sent_the_own_engine_budgets_a_remote_the_settings() -> None:
    """providers/fim/budget.py: on a CPU the prompt is the first key's wait."""
    own = OpenAIProvider(ProviderConfig(name="openai", base_url="http://127.0.0.1:8080/v1"))
    assert (own.preferred_prefix_chars, own.preferred_suffix_chars) == (2000, 600)
    raised = OpenAIProvider(ProviderConfig(
        name="openai", base_url="http://localhost:8080/v1",
        options={"completion_prefix_chars": 8000, "completionSuffixChars": 3000}))
    assert (raised.preferred_prefix_chars, raised.preferred_suffix_chars) == (8000, 3000)
    hosted = OpenAIProvider(ProviderConfig(name="openai"))
    assert not hasattr(hosted, "preferred_prefix_chars")  # the settings' budgets apply
    with pytest.raises(ModelError, match=r"providerOptions.completion_suffix_chars must be a "
                                         r"whole number of characters, 1 or more .*'lots'"):
        OpenAIProvider(ProviderConfig(name="openai", base_url="http://127.0.0.1:8080/v1",
                                      options={"completion_suffix_chars": "lots"}))
