"""The ollama provider (native /api/chat, /api/generate, /api/tags) against a
loopback fake server speaking Ollama's NDJSON byte for byte, with the
provider's real httpx code (tests/fakes/http_backend.py).

Lines are written the way Ollama's Go server writes them: compact JSON
(json.Marshal, no spaces), one object per line, each flushed on its own.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable
from importlib.metadata import entry_points
from typing import Any, TypeVar

import pytest

from agentls.core.provider.contract import (
    CompletionOptions,
    FimChunk,
    FimRequest,
    FimUsage,
    ProviderConfig,
)
from agentls.core.types.conversation import Message
from agentls.core.types.errors import ModelError, ProviderRequestCancelled
from agentls.core.types.messages import StreamChunk, ToolCall
from agentls.providers.ollama import provider as ollama_module
from agentls.providers.ollama.provider import OllamaProvider
from tests.fakes.http_backend import (
    CLOSE,
    STALL,
    FakeBackend,
    RecordedRequest,
    Reply,
    error_reply,
    json_reply,
    ndjson_reply,
)

CHAT = "/api/chat"
GENERATE = "/api/generate"
TAGS = "/api/tags"
SHOW = "/api/show"
MODEL = "llama3.2"
KEY_ENV = "AGENTLS_TEST_OLLAMA_TOKEN"
SECRET = "ollama-proxy-PLANTED-0123456789"
HELLO = [Message(role="user", content="Say hello")]
CREATED = "2025-05-27T22:54:57.641643Z"
T = TypeVar("T")


# Templates as `ollama show --template` prints them: a FIM one uses .Suffix.
FIM_TEMPLATE = (
    "{{- if .Suffix }}<|fim_prefix|>{{ .Prompt }}<|fim_suffix|>{{ .Suffix }}<|fim_middle|>"
    "{{- else }}{{ .Prompt }}{{- end }}"
)
CHAT_TEMPLATE = "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>{{ end }}"


def show_body(capabilities: list[str] | None, template: str = CHAT_TEMPLATE) -> dict[str, Any]:
    """An /api/show answer shaped like Ollama's (capabilities: 0.6 and later)."""
    body: dict[str, Any] = {
        "license": "Apache License 2.0",
        "modelfile": "FROM /root/.ollama/models/blobs/sha256-60e05f2100...",
        "parameters": 'stop "<|im_end|>"',
        "template": template,
        "details": {"parent_model": "", "format": "gguf", "family": "qwen2",
                    "families": ["qwen2"], "parameter_size": "1.5B",
                    "quantization_level": "Q4_K_M"},
        "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
        "modified_at": "2025-05-04T17:37:44.706015396-07:00",
    }
    if capabilities is not None:
        body["capabilities"] = capabilities
    return body


def serve_show(backend: FakeBackend, models: dict[str, dict[str, Any]]) -> None:
    """POST /api/show answers per model; unknown models get Ollama's 404."""

    def answer(request: RecordedRequest) -> Reply:
        name = (request.json or {}).get("model")
        if name in models:
            return json_reply(models[name])
        return error_reply(404, f"model '{name}' not found")

    backend.respond("POST", SHOW, answer)


def line(payload: dict[str, Any]) -> bytes:
    """One NDJSON line as Ollama writes it (Go's compact json.Marshal)."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def chat(
    content: str = "",
    *,
    thinking: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    model: str = MODEL,
) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if thinking is not None:
        message["thinking"] = thinking
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return line({"model": model, "created_at": CREATED, "message": message, "done": False})


def chat_done(
    reason: str = "stop", *, prompt: int | None = 26, output: int | None = 4, model: str = MODEL
) -> bytes:
    payload: dict[str, Any] = {
        "model": model,
        "created_at": CREATED,
        "message": {"role": "assistant", "content": ""},
        "done_reason": reason,
        "done": True,
        "total_duration": 4883583458,
        "load_duration": 1334875,
    }
    if prompt is not None:
        payload["prompt_eval_count"] = prompt
        payload["prompt_eval_duration"] = 342546000
    if output is not None:
        payload["eval_count"] = output
        payload["eval_duration"] = 4535599000
    return line(payload)


def generate(text: str, *, model: str = "qwen2.5-coder:1.5b") -> bytes:
    return line({"model": model, "created_at": CREATED, "response": text, "done": False})


def generate_done(prompt: int, output: int, *, model: str = "qwen2.5-coder:1.5b") -> bytes:
    return line(
        {
            "model": model,
            "created_at": CREATED,
            "response": "",
            "done": True,
            "done_reason": "stop",
            "context": [1, 2, 3],
            "total_duration": 10706818083,
            "prompt_eval_count": prompt,
            "eval_count": output,
        }
    )


def make_provider(backend: FakeBackend, **overrides: Any) -> OllamaProvider:
    settings: dict[str, Any] = {
        "name": "ollama",
        "model": MODEL,
        "base_url": backend.url,
        "request_timeout": 2.0,
        "connect_timeout": 1.0,
    }
    settings.update(overrides)
    return OllamaProvider(ProviderConfig(**settings))


@pytest.fixture
async def provider(fake_backend: FakeBackend) -> AsyncIterator[OllamaProvider]:
    instance = make_provider(fake_backend)
    yield instance
    await instance.aclose()


async def within(call: Awaitable[T], seconds: float = 5.0) -> T:
    """Every await on the provider is bounded: a hang fails the test, fast."""
    return await asyncio.wait_for(call, seconds)


async def collect(stream: AsyncIterator[StreamChunk]) -> list[StreamChunk]:
    return await within(_collect(stream))


async def _collect(stream: AsyncIterator[StreamChunk]) -> list[StreamChunk]:
    return [chunk async for chunk in stream]


async def failure(stream: AsyncIterator[StreamChunk]) -> ModelError:
    with pytest.raises(ModelError) as info:
        await collect(stream)
    return info.value


# --------------------------------------------------------------------------- streaming


async def test_streams_text_with_usage_and_stop(
    fake_backend: FakeBackend, provider: OllamaProvider
) -> None:
    # Byte for byte the lines of Ollama's API documentation (api.md, /api/chat).
    fake_backend.script(
        "POST",
        CHAT,
        ndjson_reply(
            [
                b'{"model":"llama3.2","created_at":"2023-08-04T08:52:19.385406455-07:00",'
                b'"message":{"role":"assistant","content":"Hel","images":null},"done":false}\n',
                b'{"model":"llama3.2","created_at":"2023-08-04T08:52:19.385406455-07:00",'
                b'"message":{"role":"assistant","content":"lo"},"done":false}\n',
                b'{"model":"llama3.2","created_at":"2023-08-04T19:22:45.499127Z",'
                b'"message":{"role":"assistant","content":""},"done_reason":"stop","done":true,'
                b'"total_duration":4883583458,"load_duration":1334875,"prompt_eval_count":26,'
                b'"prompt_eval_duration":342546000,"eval_count":282,"eval_duration":4535599000}\n',
            ]
        ),
    )
    chunks = await collect(provider.stream(HELLO))
    assert [c.delta for c in chunks if c.delta] == ["Hel", "lo"]
    assert [c.finish_reason for c in chunks if c.finish_reason] == ["stop"]
    assert chunks[-1].usage.model_dump() == {
        "input_tokens": 26,
        "output_tokens": 282,
        "total_tokens": 308,
    }

    response = await within(provider.complete(HELLO))
    assert (response.content, response.finish_reason) == ("Hello", "stop")
    assert response.usage.total_tokens == 308


async def test_lines_split_anywhere_and_utf8_split_across_writes(
    fake_backend: FakeBackend, provider: OllamaProvider
) -> None:
    body = chat("h\u00e9llo ") + chat("\U0001f642") + chat_done(prompt=10, output=3)
    pieces: list[bytes | str] = [body[i : i + 7] for i in range(0, len(body), 7)]
    fake_backend.script("POST", CHAT, ndjson_reply(pieces))
    response = await within(provider.complete(HELLO))
    assert response.content == "h\u00e9llo \U0001f642"
    assert response.usage.total_tokens == 13


async def test_two_tool_calls_in_one_line(
    fake_backend: FakeBackend, provider: OllamaProvider
) -> None:
    calls = [
        {"function": {"name": "read_file", "arguments": {"path": "src/main.py"}}},
        {"function": {"name": "search_text", "arguments": {"pattern": 'TODO"x', "glob": "*.py"}}},
    ]
    fake_backend.script(
        "POST",
        CHAT,
        ndjson_reply([chat("", tool_calls=calls), chat_done("stop", prompt=40, output=25)]),
    )
    chunks = await collect(provider.stream(HELLO, [{"name": "read_file", "parameters": {}}]))
    deltas = [d for c in chunks for d in c.tool_call_deltas]
    assert [(d.index, d.name) for d in deltas] == [(0, "read_file"), (1, "search_text")]
    assert json.loads(deltas[1].arguments) == {"pattern": 'TODO"x', "glob": "*.py"}
    ids = [d.id for d in deltas]
    assert all(ids) and len(set(ids)) == 2  # Ollama sends none: generated, distinct
    # Ollama says "stop" after tool calls; normalised.
    assert [c.finish_reason for c in chunks if c.finish_reason] == ["tool_calls"]

    response = await within(provider.complete(HELLO))
    assert response.finish_reason == "tool_calls"
    assert [(c.tool, c.arguments) for c in response.tool_calls] == [
        ("read_file", {"path": "src/main.py"}),
        ("search_text", {"pattern": 'TODO"x', "glob": "*.py"}),
    ]


async def test_tool_calls_across_lines_keep_their_own_index_and_ids(
    fake_backend: FakeBackend, provider: OllamaProvider
) -> None:
    fake_backend.script(
        "POST",
        CHAT,
        ndjson_reply(
            [
                chat("Let me look. "),
                chat(tool_calls=[{"id": "call_x1", "function": {"name": "a", "arguments": {}}}]),
                chat(tool_calls=[{"function": {"index": 0, "name": "b", "arguments": {"n": 1}}}]),
                chat_done(),
            ]
        ),
    )
    response = await within(provider.complete(HELLO))
    assert response.content == "Let me look. "
    assert response.tool_calls[0] == ToolCall(id="call_x1", tool="a", arguments={})
    assert (response.tool_calls[1].tool, response.tool_calls[1].arguments) == ("b", {"n": 1})


async def test_tool_call_on_the_done_line(
    fake_backend: FakeBackend, provider: OllamaProvider
) -> None:
    done = json.loads(chat_done("stop"))
    done["message"]["tool_calls"] = [{"function": {"name": "list_files", "arguments": {}}}]
    fake_backend.script("POST", CHAT, ndjson_reply([line(done)]))
    response = await within(provider.complete(HELLO))
    assert response.finish_reason == "tool_calls"
    assert [(c.tool, c.arguments) for c in response.tool_calls] == [("list_files", {})]
    assert response.usage.total_tokens == 30


async def test_thinking_is_streamed_as_reasoning(
    fake_backend: FakeBackend, provider: OllamaProvider
) -> None:
    fake_backend.script(
        "POST",
        CHAT,
        ndjson_reply(
            [
                chat(thinking="Think first,"),
                chat(thinking=" then answer."),
                chat("42"),
                chat_done(),
            ]
        ),
    )
    chunks = await collect(provider.stream(HELLO))
    assert "".join(c.reasoning for c in chunks) == "Think first, then answer."
    assert "".join(c.delta for c in chunks) == "42"
    response = await within(provider.complete(HELLO))
    assert response.reasoning_content == "Think first, then answer."


async def test_done_reason_length(fake_backend: FakeBackend, provider: OllamaProvider) -> None:
    fake_backend.script(
        "POST", CHAT, ndjson_reply([chat("truncat"), chat_done("length", prompt=5, output=8)])
    )
    response = await within(provider.complete(HELLO, options=CompletionOptions(max_tokens=8)))
    assert (response.finish_reason, response.usage.output_tokens) == ("length", 8)


async def test_usage_is_filled_when_ollama_omits_prompt_eval_count(
    fake_backend: FakeBackend, provider: OllamaProvider
) -> None:
    # Ollama leaves prompt_eval_count out when the whole prompt was cached.
    fake_backend.script("POST", CHAT, ndjson_reply([chat("hi"), chat_done(prompt=None, output=1)]))
    response = await within(provider.complete(HELLO))
    assert response.usage.output_tokens == 1
    assert response.usage.input_tokens > 0
    assert response.usage.total_tokens == response.usage.input_tokens + 1


async def test_request_body_and_message_conversion(
    fake_backend: FakeBackend, provider: OllamaProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)  # not configured: must not be sent
    fake_backend.script("POST", CHAT, ndjson_reply([chat("ok"), chat_done()]))
    messages = [
        Message(role="system", content="You are agentls."),
        Message(role="user", content="Read a.py and b.py"),
        Message(
            role="assistant",
            content="",
            metadata={
                "tool_calls": [
                    {"tool": "read_file", "arguments": {"path": "a.py"}, "id": "call_1"},
                    {"tool": "read_file", "arguments": '{"path": "b.py"}', "id": "call_2"},
                ]
            },
        ),
        Message(
            role="tool",
            content="print(1)",
            metadata={"tool_call_id": "call_1", "tool_name": "read_file"},
        ),
        # No tool_name: found through the call id.
        Message(
            role="tool",
            content=None,
            metadata={"tool_call_id": "call_2"},
            tool_result={"success": False, "error": {"message": "no such file"}},
        ),
    ]
    tool = {
        "name": "read_file",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    options = CompletionOptions(
        max_tokens=64,
        temperature=0.2,
        stop=("\n\n",),
        extra={"keep_alive": "10m", "num_ctx": 8192, "think": True},
    )
    await within(provider.complete(messages, [tool], options=options))

    request = fake_backend.requests_to(CHAT)[0]
    assert "authorization" not in request.headers
    body = request.json
    assert (body["model"], body["stream"], body["keep_alive"], body["think"]) == (
        MODEL,
        True,
        "10m",
        True,
    )
    assert body["options"] == {
        "num_predict": 64,
        "temperature": 0.2,
        "stop": ["\n\n"],
        "num_ctx": 8192,
    }
    assert body["tools"] == [{"type": "function", "function": tool}]
    assert body["messages"] == [
        {"role": "system", "content": "You are agentls."},
        {"role": "user", "content": "Read a.py and b.py"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"function": {"name": "read_file", "arguments": {"path": "a.py"}}},
                {"function": {"name": "read_file", "arguments": {"path": "b.py"}}},
            ],
        },
        {"role": "tool", "content": "print(1)", "tool_name": "read_file"},
        {
            "role": "tool",
            "content": '{"error": {"message": "no such file"}}',
            "tool_name": "read_file",
        },
    ]


async def test_plain_request_has_no_options_and_api_key_env_is_a_bearer_token(
    fake_backend: FakeBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    fake_backend.script("POST", CHAT, ndjson_reply([chat("ok"), chat_done()]))
    provider = make_provider(fake_backend, api_key_env=KEY_ENV)
    await within(provider.complete(HELLO))
    await provider.aclose()
    request = fake_backend.requests_to(CHAT)[0]
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.headers["accept"] == "application/x-ndjson"
    assert set(request.json) == {"model", "messages", "stream"}


# --------------------------------------------------------------------------- errors


async def test_429_then_503_then_success(fake_backend: FakeBackend) -> None:
    fake_backend.script(
        "POST",
        CHAT,
        Reply(429, body={"error": "too many requests"}, headers={"Retry-After": "0"}),
        Reply(503, body={"error": "server busy, please try again.  maximum pending requests"}),
        ndjson_reply([chat("late"), chat_done()]),
    )
    provider = make_provider(fake_backend, options={"max_attempts": 3})
    response = await within(provider.complete(HELLO))
    await provider.aclose()
    assert response.content == "late"
    assert len(fake_backend.requests_to(CHAT)) == 3


async def test_missing_model_is_not_found_with_the_pull_hint(
    fake_backend: FakeBackend, provider: OllamaProvider
) -> None:
    fake_backend.script(
        "POST",
        CHAT,
        Reply(404, body={"error": "model 'mistral-nope' not found, try pulling it first"}),
    )
    error = await failure(provider.stream(HELLO, options=CompletionOptions(model="mistral-nope")))
    assert error.code == "not_found" and error.model == "mistral-nope"
    assert "model 'mistral-nope' not found, try pulling it first" in error.message
    assert "run `ollama pull mistral-nope`" in error.message
    assert len(fake_backend.requests) == 1  # a 404 is not retried


async def test_error_line_inside_a_200_stream(
    fake_backend: FakeBackend, provider: OllamaProvider
) -> None:
    fake_backend.script(
        "POST",
        CHAT,
        ndjson_reply(
            [chat("a"), line({"error": "an error was encountered while running the model"})]
        ),
    )
    received: list[StreamChunk | FimChunk] = []

    async def consume() -> None:
        async for chunk in provider.stream(HELLO):
            received.append(chunk)

    with pytest.raises(ModelError) as info:
        await within(consume())
    assert [c.delta for c in received] == ["a"]
    assert info.value.code == "server_error"
    assert "an error was encountered while running the model" in info.value.message


async def test_connection_closed_mid_stream(
    fake_backend: FakeBackend, provider: OllamaProvider
) -> None:
    fake_backend.script("POST", CHAT, ndjson_reply([chat("Hel"), CLOSE]))
    started = time.monotonic()
    error = await failure(provider.stream(HELLO))
    assert time.monotonic() - started < 2.0
    assert error.code == "connection"
    assert len(fake_backend.requests) == 1  # bytes were handed out: never retried


async def test_stream_ending_without_done_is_an_error(
    fake_backend: FakeBackend, provider: OllamaProvider
) -> None:
    # A close-delimited body: the end looks clean at the HTTP level.
    fake_backend.script("POST", CHAT, ndjson_reply([chat("Hel")], chunked=False))
    error = await failure(provider.stream(HELLO))
    assert error.code == "connection" and "before it finished" in error.message


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        ([b'{"model":"llama3.2","message":{"role":"assistant","content":"a"\n'], "not JSON"),
        ([b'["not", "an", "object"]\n'], "not an object"),
        ([line({"message": {"tool_calls": [{"function": {"arguments": {}}}]}})], "function name"),
    ],
    ids=["malformed-json", "not-an-object", "tool-call-without-name"],
)
async def test_invalid_lines(
    fake_backend: FakeBackend, provider: OllamaProvider, chunks: list[bytes], expected: str
) -> None:
    fake_backend.script("POST", CHAT, ndjson_reply([chat("a"), *chunks, STALL]))
    error = await failure(provider.stream(HELLO))
    assert error.code == "invalid_response" and expected in error.message


# --------------------------------------------------------------------------- cancel, timeouts


@pytest.mark.parametrize("endpoint", ["chat", "fim"])
async def test_cancel_request_mid_stream_closes_the_connection(
    fake_backend: FakeBackend, provider: OllamaProvider, endpoint: str
) -> None:
    options = CompletionOptions(request_id="req-1")
    if endpoint == "chat":
        path = CHAT
        fake_backend.script("POST", path, ndjson_reply([chat("Hel"), STALL]))
        stream = provider.stream(HELLO, options=options)
    else:
        path = GENERATE
        fake_backend.script("POST", path, ndjson_reply([generate("Hel"), STALL]))
        stream = provider.stream_fim(FimRequest(prefix="a", suffix="b", options=options))
    received: list[StreamChunk | FimChunk] = []

    async def consume() -> None:
        async for chunk in stream:
            received.append(chunk)

    task = asyncio.create_task(consume())
    for _ in range(300):
        if received:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # the consumer is parked waiting for the next line
    assert provider.cancel_request("req-1")
    with pytest.raises(ProviderRequestCancelled):
        await asyncio.wait_for(task, 2)
    assert [c.delta for c in received] == ["Hel"]
    request = fake_backend.requests_to(path)[0]
    assert await asyncio.to_thread(fake_backend.wait_for_disconnect, request, 3)
    assert provider.active_requests == 0


@pytest.mark.parametrize("where", ["before-headers", "mid-stream"])
async def test_stalled_server_times_out(fake_backend: FakeBackend, where: str) -> None:
    if where == "before-headers":
        fake_backend.script("POST", CHAT, Reply(stall_before_headers=True))
    else:
        fake_backend.script("POST", CHAT, ndjson_reply([chat("Hel"), STALL]))
    provider = make_provider(fake_backend, request_timeout=0.5)
    started = time.monotonic()
    error = await failure(provider.stream(HELLO))
    elapsed = time.monotonic() - started
    await provider.aclose()
    assert error.code == "timeout" and "0.5 s" in error.message
    assert 0.4 <= elapsed < 2.0
    assert len(fake_backend.requests) == 1  # read timeouts are not retried


# --------------------------------------------------------------------------- FIM, models, info


def serve_generate(backend: FakeBackend, *stream: Reply) -> None:
    """/api/generate: the known-answer FIM probe (stream false) answered as
    a model that reads the suffix does; streamed requests get `stream`."""
    replies = list(stream)

    def answer(request: RecordedRequest) -> Reply:
        if (request.json or {}).get("stream") is False:
            return json_reply({"model": "m", "response": "lantern_id", "done": True})
        return replies.pop(0) if len(replies) > 1 else replies[0]

    backend.respond("POST", GENERATE, answer)


async def test_fim_uses_generate_with_suffix(fake_backend: FakeBackend) -> None:
    serve_generate(
        fake_backend,
        ndjson_reply([generate("return a"), generate(" + b"), generate_done(20, 4)]),
    )
    # A tag no name pattern recognises: the server's `insert` decides.
    serve_show(fake_backend, {"my-coder:latest": show_body(["completion", "insert"])})
    provider = make_provider(fake_backend, model="my-coder:latest")
    assert await within(provider.fim_supported())
    assert provider.supports_fim  # cached now, so the sync view agrees
    assert fake_backend.requests_to(SHOW)[0].json == {"model": "my-coder:latest"}
    request = FimRequest(
        prefix="def add(a, b):\n    ",
        suffix="\n\nprint(add(1, 2))\n",
        options=CompletionOptions(max_tokens=16, temperature=0.0, stop=("\n\n",)),
    )
    chunks = await collect(provider.stream_fim(request))
    await provider.aclose()
    assert "".join(c.delta for c in chunks) == "return a + b"
    assert [c.finish_reason for c in chunks if c.finish_reason] == ["stop"]
    assert chunks[-1].usage == FimUsage(input_tokens=20, output_tokens=4, total_tokens=24)
    probe, body = (r.json for r in fake_backend.requests_to(GENERATE))
    assert probe["suffix"] and probe["stream"] is False  # the known-answer probe
    assert body == {
        "model": "my-coder:latest",
        "prompt": "def add(a, b):\n    ",
        "suffix": "\n\nprint(add(1, 2))\n",
        "stream": True,
        "raw": False,
        "options": {"num_predict": 16, "temperature": 0.0, "stop": ["\n\n"]},
    }


async def test_fim_capability_comes_from_the_server_then_the_name(
    fake_backend: FakeBackend,
) -> None:
    # Before any FIM request, from /api/show alone: `insert`, or FIM tokens
    # in the template, or a code model's name (its template in a raw prompt).
    serve_show(fake_backend, {
        "my-coder:latest": show_body(["completion", "insert"]),
        # A coder *name* whose template takes no suffix (an instruct variant).
        "qwen2.5-coder:7b-instruct": show_body(["completion", "tools"]),
        # Servers before `capabilities`: the template says it.
        "old-fim:1b": show_body(None, FIM_TEMPLATE),
        "old-chat:1b": show_body(None, CHAT_TEMPLATE),
        "says-nothing": {"details": {}},
    })
    provider = make_provider(fake_backend)
    models = ("my-coder:latest", "qwen2.5-coder:7b-instruct", "old-fim:1b", "old-chat:1b",
              "says-nothing", "not-pulled:1b")
    for model in models:
        await within(provider.model_capabilities(model))
    answers = {model: provider.model_supports_fim(model) for model in models}
    assert answers == {
        "my-coder:latest": True, "qwen2.5-coder:7b-instruct": True, "old-fim:1b": True,
        "old-chat:1b": False, "says-nothing": False, "not-pulled:1b": False,
    }
    # Cached per model: asking again sends nothing (a failed ask is retried).
    asked = len(fake_backend.requests_to(SHOW))
    await within(provider.model_capabilities("my-coder:latest"))
    assert len(fake_backend.requests_to(SHOW)) == asked
    await provider.aclose()


async def test_fim_option_overrides_the_server(fake_backend: FakeBackend) -> None:
    serve_show(fake_backend, {"my-coder:latest": show_body(["completion", "insert"]),
                              "plain:1b": show_body(["completion"])})
    off = make_provider(fake_backend, model="my-coder:latest", options={"fim": False})
    on = make_provider(fake_backend, model="plain:1b", options={"fim": True})
    assert not await within(off.fim_supported()) and await within(on.fim_supported())
    assert "fim" not in off.get_info().capabilities and "fim" in on.get_info().capabilities
    assert fake_backend.requests_to(SHOW) == []  # the override needs no question
    await off.aclose()
    await on.aclose()


async def test_concurrent_first_requests_share_one_show_call(fake_backend: FakeBackend) -> None:
    serve_show(fake_backend, {"my-coder:latest": show_body(["completion", "insert"])})
    serve_generate(fake_backend, Reply(500))
    provider = make_provider(fake_backend, model="my-coder:latest")
    answers = await within(asyncio.gather(*(provider.fim_supported() for _ in range(8))))
    await provider.aclose()
    assert answers == [True] * 8
    assert len(fake_backend.requests_to(SHOW)) == 1
    assert len(fake_backend.requests_to(GENERATE)) == 1  # one probe
    assert provider.status_report()["fim"]["models"]["my-coder:latest"]["form"] == "suffix"


async def test_a_server_slow_to_show_means_no_fim_not_a_hang(
    fake_backend: FakeBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ollama_module, "SHOW_TIMEOUT", 0.3)
    fake_backend.script("POST", SHOW, Reply(stall_before_headers=True))
    provider = make_provider(fake_backend, model="my-coder:latest")
    assert await within(provider.fim_supported()) is False
    assert not provider.model_supports_fim()  # not cached: asked again next time
    await provider.aclose()


async def test_list_models_from_tags(fake_backend: FakeBackend) -> None:
    fake_backend.script(
        "GET",
        TAGS,
        json_reply(
            {
                "models": [
                    {
                        "name": "qwen2.5-coder:7b",
                        "model": "qwen2.5-coder:7b",
                        "modified_at": "2025-05-04T17:37:44.706015396-07:00",
                        "size": 4683087332,
                        "digest": "dae161e27b0e",
                        "details": {
                            "parent_model": "",
                            "format": "gguf",
                            "family": "qwen2",
                            "families": ["qwen2"],
                            "parameter_size": "7.6B",
                            "quantization_level": "Q4_K_M",
                        },
                    },
                    {"name": "llama3.2:latest", "model": "llama3.2:latest", "details": {}},
                    {"size": 1},  # no name: skipped
                ]
            }
        ),
    )
    serve_show(fake_backend, {"qwen2.5-coder:7b": show_body(["completion", "insert"]),
                              "llama3.2:latest": show_body(["completion", "tools"])})
    provider = make_provider(fake_backend, options={"numCtx": 16384})
    models = await within(provider.list_models())
    await provider.aclose()
    assert [(m.id, m.display_name, m.context_window) for m in models] == [
        ("llama3.2:latest", "llama3.2:latest", 16384),
        ("qwen2.5-coder:7b", "qwen2.5-coder:7b (7.6B)", 16384),
    ]
    assert models[1].defaults["family"] == "qwen2"
    assert "fim" in models[1].capabilities and "fim" not in models[0].capabilities
    assert fake_backend.requests_to(TAGS)[0].method == "GET"


async def test_list_models_default_context_and_bad_payload(
    fake_backend: FakeBackend, provider: OllamaProvider
) -> None:
    fake_backend.script(
        "GET",
        TAGS,
        json_reply({"models": [{"name": "phi3:mini"}]}),
        json_reply({"object": "list", "data": []}),  # an OpenAI /v1 answer
    )
    (model,) = await within(provider.list_models())
    assert (model.id, model.context_window, model.max_output_tokens) == ("phi3:mini", 4096, 2048)
    with pytest.raises(ModelError) as info:
        await within(provider.list_models())
    assert info.value.code == "invalid_response" and "without /v1" in info.value.message


def test_get_info_and_entry_point() -> None:
    info = OllamaProvider(ProviderConfig(name="ollama")).get_info()
    assert (info.id, info.display_name) == ("ollama", "Ollama")
    assert info.credential_env_vars == []
    assert info.defaults["base_url"] == "http://127.0.0.1:11434"
    assert {f.id for f in info.config_fields} >= {"baseUrl", "apiKeyEnv", "model"}
    proxied = OllamaProvider(ProviderConfig(name="ollama", api_key_env=KEY_ENV)).get_info()
    assert proxied.credential_env_vars == [KEY_ENV]
    (entry,) = entry_points(group="agentls.providers", name="ollama")
    assert entry.load() is OllamaProvider
