"""The anthropic provider against a loopback fake server speaking the
Messages API's SSE framing byte for byte (`event: <name>\\ndata: <json>\\n\\n`),
with the provider's real httpx code (tests/fakes/http_backend.py)."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from collections.abc import AsyncIterator
from importlib.metadata import entry_points
from typing import Any

import pytest

from agentls.core.provider.contract import CompletionOptions, ProviderConfig
from agentls.core.types.conversation import Message
from agentls.core.types.errors import ModelError, ProviderRequestCancelled
from agentls.core.types.messages import StreamChunk, ToolCall
from agentls.providers.anthropic.messages import to_anthropic_messages
from agentls.providers.anthropic.provider import AnthropicProvider, model_limits
from tests.fakes.http_backend import (
    CLOSE,
    STALL,
    FakeBackend,
    Reply,
    json_reply,
    sse_event,
    sse_reply,
)

MESSAGES = "/v1/messages"
KEY_ENV = "ANTHROPIC_API_KEY"
SECRET = "sk-ant-api03-PLANTED-0123456789abcdef"
HELLO = [Message(role="user", content="Say hello")]


# --------------------------------------------------------------------------- frames


def event(name: str, **payload: Any) -> bytes:
    """One Anthropic event: `event: <name>\\ndata: {"type": <name>, ...}\\n\\n`."""
    return sse_event(name, {"type": name, **payload})


def message_start(input_tokens: int = 25, *, cache_read: int = 0) -> bytes:
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": 1}
    if cache_read:
        usage["cache_read_input_tokens"] = cache_read
    return event(
        "message_start",
        message={
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        },
    )


def block_start(index: int, block: dict[str, Any]) -> bytes:
    return event("content_block_start", index=index, content_block=block)


def text_start(index: int) -> bytes:
    return block_start(index, {"type": "text", "text": ""})


def tool_start(index: int, id: str, name: str) -> bytes:
    return block_start(index, {"type": "tool_use", "id": id, "name": name, "input": {}})


def delta(index: int, **body: Any) -> bytes:
    return event("content_block_delta", index=index, delta=body)


def text_delta(index: int, text: str) -> bytes:
    return delta(index, type="text_delta", text=text)


def json_delta(index: int, partial: str) -> bytes:
    return delta(index, type="input_json_delta", partial_json=partial)


def block_stop(index: int) -> bytes:
    return event("content_block_stop", index=index)


def message_delta(stop_reason: str, output_tokens: int) -> bytes:
    return event(
        "message_delta",
        delta={"stop_reason": stop_reason, "stop_sequence": None},
        usage={"output_tokens": output_tokens},
    )


PING = event("ping")
MESSAGE_STOP = event("message_stop")


def text_stream(*parts: str, stop: str = "end_turn", usage: tuple[int, int] = (25, 3)) -> Reply:
    return sse_reply(
        [
            message_start(usage[0]),
            text_start(0),
            *(text_delta(0, part) for part in parts),
            block_stop(0),
            message_delta(stop, usage[1]),
            MESSAGE_STOP,
        ]
    )


def anthropic_error(status: int, kind: str, message: str, **kwargs: Any) -> Reply:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Reply(status=status, body=body, **kwargs)


# --------------------------------------------------------------------------- helpers


def make_provider(backend: FakeBackend, **overrides: Any) -> AnthropicProvider:
    settings: dict[str, Any] = {
        "name": "anthropic",
        "model": "claude-test",
        "base_url": backend.url,
        "request_timeout": 2.0,
        "connect_timeout": 1.0,
    }
    settings.update(overrides)
    return AnthropicProvider(ProviderConfig(**settings))


@pytest.fixture
async def provider(
    fake_backend: FakeBackend, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[AnthropicProvider]:
    monkeypatch.delenv(KEY_ENV, raising=False)
    instance = make_provider(fake_backend)
    yield instance
    await instance.aclose()


async def collect(stream: AsyncIterator[StreamChunk]) -> list[StreamChunk]:
    async def run() -> list[StreamChunk]:
        return [chunk async for chunk in stream]

    return await asyncio.wait_for(run(), 5)


async def failure(stream: AsyncIterator[StreamChunk]) -> ModelError:
    with pytest.raises(ModelError) as info:
        await collect(stream)
    return info.value


# --------------------------------------------------------------------------- streaming


async def test_streams_text_with_usage_and_ignores_pings(
    fake_backend: FakeBackend, provider: AnthropicProvider
) -> None:
    fake_backend.script(
        "POST",
        MESSAGES,
        sse_reply(
            [
                message_start(25, cache_read=100),
                PING,
                text_start(0),
                text_delta(0, "Hel"),
                PING,
                text_delta(0, "lo"),
                block_stop(0),
                message_delta("end_turn", 7),
                MESSAGE_STOP,
            ]
        ),
    )
    chunks = await collect(provider.stream(HELLO))
    assert "".join(c.delta for c in chunks) == "Hello"
    assert [c.finish_reason for c in chunks if c.finish_reason] == ["stop"]
    assert chunks[-1].usage.model_dump() == {
        "input_tokens": 125,  # input_tokens + cache_read_input_tokens
        "output_tokens": 7,
        "total_tokens": 132,
    }
    assert not any(c.reasoning or c.tool_call_deltas for c in chunks)


async def test_framing_split_anywhere_and_utf8_split_across_writes(
    fake_backend: FakeBackend, provider: AnthropicProvider
) -> None:
    body = b"".join(
        [
            message_start(),
            text_start(0),
            text_delta(0, "h\u00e9llo \U0001f642"),
            block_stop(0),
            message_delta("end_turn", 4).replace(b"\n", b"\r\n"),
            MESSAGE_STOP,
        ]
    )
    pieces: list[bytes | str] = [body[i : i + 7] for i in range(0, len(body), 7)]
    fake_backend.script("POST", MESSAGES, sse_reply(pieces))
    response = await asyncio.wait_for(provider.complete(HELLO), 5)
    assert response.content == "h\u00e9llo \U0001f642"
    assert (response.finish_reason, response.usage.total_tokens) == ("stop", 29)


async def test_parallel_tool_calls_split_across_chunks(
    fake_backend: FakeBackend, provider: AnthropicProvider
) -> None:
    fake_backend.script(
        "POST",
        MESSAGES,
        sse_reply(
            [
                message_start(40),
                text_start(0),
                text_delta(0, "Let me look."),
                block_stop(0),
                tool_start(1, "toolu_a", "read_file"),
                json_delta(1, ""),
                json_delta(1, '{"pa'),
                json_delta(1, 'th": "src/ma'),
                PING,
                json_delta(1, 'in.py"}'),
                block_stop(1),
                tool_start(2, "toolu_b", "search_text"),
                json_delta(2, '{"pattern": "TO'),
                json_delta(2, 'DO\\"x", "max'),
                json_delta(2, '": 3}'),
                block_stop(2),
                message_delta("tool_use", 61),
                MESSAGE_STOP,
            ]
        ),
    )
    chunks = await collect(provider.stream(HELLO, [{"name": "read_file", "parameters": {}}]))
    # Content-block indices 1 and 2 become tool-call indices 0 and 1.
    indices = {d.index for c in chunks for d in c.tool_call_deltas}
    assert indices == {0, 1}
    starts = [(d.index, d.id, d.name) for c in chunks for d in c.tool_call_deltas if d.name]
    assert starts == [(0, "toolu_a", "read_file"), (1, "toolu_b", "search_text")]

    # The last scripted reply repeats: the same stream again, folded.
    response = await asyncio.wait_for(provider.complete(HELLO), 5)
    assert response.content == "Let me look."
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == [
        ToolCall(id="toolu_a", tool="read_file", arguments={"path": "src/main.py"}),
        ToolCall(id="toolu_b", tool="search_text", arguments={"pattern": 'TODO"x', "max": 3}),
    ]
    assert response.usage.model_dump() == {
        "input_tokens": 40,
        "output_tokens": 61,
        "total_tokens": 101,
    }


async def test_thinking_is_streamed_as_reasoning(
    fake_backend: FakeBackend, provider: AnthropicProvider
) -> None:
    fake_backend.script(
        "POST",
        MESSAGES,
        sse_reply(
            [
                message_start(),
                block_start(0, {"type": "thinking", "thinking": ""}),
                delta(0, type="thinking_delta", thinking="Think first,"),
                delta(0, type="thinking_delta", thinking=" then answer."),
                delta(0, type="signature_delta", signature="EqQBCgIYAhIM1gbcDa9GJwZA2b3h"),
                block_stop(0),
                text_start(1),
                text_delta(1, "42"),
                block_stop(1),
                message_delta("end_turn", 12),
                MESSAGE_STOP,
            ]
        ),
    )
    chunks = await collect(provider.stream(HELLO))
    assert "".join(c.reasoning for c in chunks) == "Think first, then answer."
    assert "".join(c.delta for c in chunks) == "42"
    assert not any("EqQB" in c.delta + c.reasoning for c in chunks)


@pytest.mark.parametrize(
    ("stop_reason", "expected"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("something_new", "stop"),
    ],
)
async def test_finish_reasons_are_normalised(
    fake_backend: FakeBackend, provider: AnthropicProvider, stop_reason: str, expected: str
) -> None:
    fake_backend.script("POST", MESSAGES, text_stream("x", stop=stop_reason))
    response = await asyncio.wait_for(provider.complete(HELLO), 5)
    assert response.finish_reason == expected


# --------------------------------------------------------------------------- requests


async def test_request_body_headers_and_message_conversion(
    fake_backend: FakeBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    fake_backend.script("POST", MESSAGES, text_stream("ok"))
    provider = make_provider(fake_backend)
    hook = {"source": "hook", "hook_name": "lint", "event": "tool:post"}
    messages = [
        Message(role="system", content="You are agentls."),
        Message(role="user", content="Fix a.py and b.py"),
        Message(
            role="assistant",
            content="",
            metadata={
                "tool_calls": [
                    {"tool": "read_file", "arguments": {"path": "a.py"}, "id": "toolu_1"},
                    {"tool": "read_file", "arguments": '{"path": "b.py"}', "id": "toolu_2"},
                ]
            },
        ),
        Message(
            role="tool",
            content="print(1)",
            metadata={"tool_call_id": "toolu_1", "tool_name": "read_file"},
            tool_result={"success": True, "output": "print(1)", "error": None},
        ),
        Message(
            role="tool",
            content="",
            metadata={"tool_call_id": "toolu_2", "tool_name": "read_file"},
            tool_result={"success": False, "output": None, "error": {"message": "no b.py"}},
        ),
        Message(role="system", content="Lint: a.py has 2 warnings.", metadata=hook),
        Message(role="assistant", content="Done."),
        Message(role="user", content="Thanks"),
    ]
    tool = {
        "name": "read_file",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    options = CompletionOptions(
        max_tokens=64, temperature=0.2, stop=("\n\nHuman:",), extra={"top_k": 5}
    )
    await asyncio.wait_for(provider.complete(messages, [tool], options=options), 5)
    await provider.aclose()

    request = fake_backend.requests_to(MESSAGES)[0]
    assert request.headers["x-api-key"] == SECRET
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    assert request.headers["accept"] == "text/event-stream"
    body = request.json
    assert (body["model"], body["stream"], body["max_tokens"]) == ("claude-test", True, 64)
    assert (body["temperature"], body["stop_sequences"], body["top_k"]) == (
        0.2,
        ["\n\nHuman:"],
        5,
    )
    assert body["system"] == "You are agentls."
    assert body["tools"] == [
        {"name": "read_file", "description": "Read a file", "input_schema": tool["parameters"]}
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Fix a.py and b.py"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "read_file",
                    "input": {"path": "a.py"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "read_file",
                    "input": {"path": "b.py"},
                },
            ],
        },
        {
            # Both results and the hook's injection share one user message.
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print(1)"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": '{"error": {"message": "no b.py"}}',
                    "is_error": True,
                },
                {
                    "type": "text",
                    "text": "<system-reminder>\nLint: a.py has 2 warnings.\n</system-reminder>",
                },
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
    ]
    # Roles alternate, as the API requires.
    roles = [m["role"] for m in body["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles))


async def test_a_history_with_tool_calls_and_no_tools_offered_declares_them_and_allows_none(
    fake_backend: FakeBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Messages API refuses tool_use/tool_result blocks in a request that
    defines no tools ("Requests which include tool_use or tool_result blocks
    must define tools"); a turn with files attached offers none."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    fake_backend.script("POST", MESSAGES, text_stream("ok"))
    provider = make_provider(fake_backend)
    messages = [
        Message(role="user", content="Fix a.py"),
        Message(role="assistant", content="", metadata={"tool_calls": [
            {"tool": "write_file", "arguments": {"path": "a.py", "content": "x = 1\n"},
             "id": "toolu_1"}]}),
        Message(role="tool", content="Replaced a.py.",
                metadata={"tool_call_id": "toolu_1", "tool_name": "write_file"},
                tool_result={"success": True, "output": "Replaced a.py.", "error": None}),
        Message(role="user", content="Now b.py"),
    ]
    await asyncio.wait_for(provider.complete(messages, None), 5)
    await asyncio.wait_for(provider.complete(messages[:1], None), 5)
    await provider.aclose()
    with_history, without = (r.json for r in fake_backend.requests_to(MESSAGES))
    assert [t["name"] for t in with_history["tools"]] == ["write_file"]
    assert with_history["tool_choice"] == {"type": "none"}
    assert "tools" not in without and "tool_choice" not in without


async def test_no_key_no_header_default_max_tokens_and_v1_suffix_tolerated(
    fake_backend: FakeBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    fake_backend.script("POST", MESSAGES, text_stream("ok"))
    provider = make_provider(fake_backend, base_url=fake_backend.url + "/v1", model=None)
    await asyncio.wait_for(provider.complete(HELLO), 5)
    await provider.aclose()
    request = fake_backend.requests_to(MESSAGES)[0]
    assert "x-api-key" not in request.headers and "authorization" not in request.headers
    body = request.json
    assert body["model"] == "claude-sonnet-4-5" and body["max_tokens"] == 8192
    assert "system" not in body and "tools" not in body


def test_message_conversion_edge_cases() -> None:
    image = "data:image/png;base64,iVBORw0KGgo="
    system, turns = to_anthropic_messages(
        [
            Message(role="system", content="Rules."),
            Message(role="system", content="Workspace: /w."),
            Message(
                role="user",
                content="see",
                multipart_content=[
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": image}},
                ],
            ),
            Message(role="assistant", content=""),  # empty: omitted
            Message(role="user", content="  "),  # blank: omitted
            Message(role="user", content="Hello?"),
            Message(role="assistant", content="It is "),  # prefill: no trailing space
        ]
    )
    assert system == "Rules.\n\nWorkspace: /w."
    assert turns == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                },
                {"type": "text", "text": "Hello?"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "It is"}]},
    ]
    hook = {"source": "hook", "hook_name": "h", "event": "session:start"}
    system, turns = to_anthropic_messages(
        [
            Message(role="system", content="Rules."),
            Message(role="system", content="Remember X.", metadata=hook),
            Message(role="user", content="Go"),
        ]
    )
    assert system == "Rules."
    assert turns == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>\nRemember X.\n</system-reminder>"},
                {"type": "text", "text": "Go"},
            ],
        }
    ]
    with pytest.raises(ModelError) as info:
        to_anthropic_messages([Message(role="tool", content="x")])
    assert info.value.code == "bad_request" and "tool_call_id" in info.value.message


# --------------------------------------------------------------------------- HTTP errors


async def test_429_retry_after_is_honoured_then_success(
    fake_backend: FakeBackend, provider: AnthropicProvider
) -> None:
    fake_backend.script(
        "POST",
        MESSAGES,
        anthropic_error(
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit",
            headers={"Retry-After": "1"},
        ),
        text_stream("late"),
    )
    response = await asyncio.wait_for(provider.complete(HELLO), 5)
    assert response.content == "late"
    first, second = fake_backend.requests_to(MESSAGES)
    assert second.received_at - first.received_at >= 0.9


async def test_401_is_auth_and_never_leaks_the_key(
    fake_backend: FakeBackend, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(KEY_ENV, SECRET)
    echo = f"invalid x-api-key {SECRET}"
    fake_backend.script(
        "POST",
        MESSAGES,
        anthropic_error(529, "overloaded_error", f"Overloaded ({SECRET})"),
        anthropic_error(401, "authentication_error", echo),
    )
    provider = make_provider(fake_backend, options={"max_attempts": 2})
    error = await failure(provider.stream(HELLO))
    await provider.aclose()
    assert error.code == "auth"
    assert "invalid x-api-key" in error.message and KEY_ENV in error.message
    for text in (error.message, repr(error), str(error), caplog.text, repr(provider)):
        assert SECRET not in text
    assert len(fake_backend.requests) == 2  # the 529 was retried, the 401 not


async def test_401_without_a_key_says_the_variable_is_unset(
    fake_backend: FakeBackend, provider: AnthropicProvider
) -> None:
    fake_backend.script(
        "POST",
        MESSAGES,
        anthropic_error(401, "authentication_error", "x-api-key header is required"),
    )
    error = await failure(provider.stream(HELLO))
    assert error.code == "auth" and f"{KEY_ENV} is not set" in error.message


async def test_prompt_too_long_is_context_length(
    fake_backend: FakeBackend, provider: AnthropicProvider
) -> None:
    fake_backend.script(
        "POST",
        MESSAGES,
        anthropic_error(
            400, "invalid_request_error", "prompt is too long: 210563 tokens > 200000 maximum"
        ),
    )
    error = await failure(provider.stream(HELLO))
    assert error.code == "context_length" and "210563 tokens" in error.message
    assert len(fake_backend.requests) == 1


async def test_unknown_model_is_not_found_with_a_hint(
    fake_backend: FakeBackend, provider: AnthropicProvider
) -> None:
    fake_backend.script(
        "POST", MESSAGES, anthropic_error(404, "not_found_error", "model: claude-nope")
    )
    error = await failure(provider.stream(HELLO, options=CompletionOptions(model="claude-nope")))
    assert error.code == "not_found" and error.model == "claude-nope"
    assert "agentls/models" in error.message and "without /v1" in error.message


# --------------------------------------------------------------------------- stream errors


@pytest.mark.parametrize(
    ("kind", "message", "code"),
    [
        ("overloaded_error", "Overloaded", "server_error"),
        ("api_error", "Internal server error", "server_error"),
        ("rate_limit_error", "Rate limited", "rate_limit"),
        ("invalid_request_error", "prompt is too long: 201000 tokens", "context_length"),
        ("authentication_error", "invalid x-api-key", "auth"),
        ("brand_new_error", "Something else", "server_error"),
    ],
)
async def test_error_event_mid_stream(
    fake_backend: FakeBackend, provider: AnthropicProvider, kind: str, message: str, code: str
) -> None:
    error_event = sse_event("error", {"type": "error", "error": {"type": kind, "message": message}})
    fake_backend.script(
        "POST",
        MESSAGES,
        # STALL: the client must fail on the event itself, not on the end of
        # the stream (and it leaves no unread bytes to reset the socket with).
        sse_reply([message_start(), text_start(0), text_delta(0, "Hel"), error_event, STALL]),
    )
    received: list[StreamChunk] = []
    with pytest.raises(ModelError) as info:

        async def run() -> None:
            async for chunk in provider.stream(HELLO):
                received.append(chunk)

        await asyncio.wait_for(run(), 5)
    assert [c.delta for c in received] == ["Hel"]
    assert info.value.code == code and message in info.value.message
    assert len(fake_backend.requests) == 1  # never retried after the first byte


async def test_connection_closed_mid_stream(
    fake_backend: FakeBackend, provider: AnthropicProvider
) -> None:
    fake_backend.script(
        "POST", MESSAGES, sse_reply([message_start(), text_start(0), text_delta(0, "Hel"), CLOSE])
    )
    started = time.monotonic()
    error = await failure(provider.stream(HELLO))
    assert error.code == "connection"
    assert time.monotonic() - started < 2.0
    assert len(fake_backend.requests) == 1  # bytes were handed out: never retried


async def test_stream_ending_without_message_stop_is_an_error(
    fake_backend: FakeBackend, provider: AnthropicProvider
) -> None:
    # A close-delimited body: the end looks clean at the HTTP level.
    fake_backend.script(
        "POST",
        MESSAGES,
        sse_reply([message_start(), text_start(0), text_delta(0, "Hel")], chunked=False),
    )
    error = await failure(provider.stream(HELLO))
    assert error.code == "connection" and "before the message finished" in error.message


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (b"event: content_block_delta\ndata: {not json\n\n", "not JSON"),
        (b"event: content_block_delta\ndata: [1, 2]\n\n", "not an object"),
        (json_delta(5, '{"a": 1}'), "not a tool_use block"),
    ],
    ids=["malformed-json", "not-an-object", "delta-for-unknown-block"],
)
async def test_invalid_events(
    fake_backend: FakeBackend, provider: AnthropicProvider, frame: bytes, expected: str
) -> None:
    fake_backend.script("POST", MESSAGES, sse_reply([message_start(), frame, STALL]))
    error = await failure(provider.stream(HELLO))
    assert error.code == "invalid_response" and expected in error.message


# --------------------------------------------------------------------------- cancel, timeouts


async def test_cancel_request_mid_stream_closes_the_connection(
    fake_backend: FakeBackend, provider: AnthropicProvider
) -> None:
    fake_backend.script(
        "POST", MESSAGES, sse_reply([message_start(), text_start(0), text_delta(0, "Hel"), STALL])
    )
    stream = provider.stream(HELLO, options=CompletionOptions(request_id="req-1"))
    received: list[StreamChunk] = []

    async def consume() -> None:
        async for chunk in stream:
            received.append(chunk)

    task = asyncio.create_task(consume())
    for _ in range(300):
        if received:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # the consumer is parked waiting for the next chunk
    assert provider.cancel_request("req-1")
    with pytest.raises(ProviderRequestCancelled):
        await asyncio.wait_for(task, 2)
    assert [c.delta for c in received] == ["Hel"]
    request = fake_backend.requests_to(MESSAGES)[0]
    assert await asyncio.to_thread(fake_backend.wait_for_disconnect, request, 3)
    assert provider.active_requests == 0
    assert not provider.cancel_request("req-1")


async def test_stalled_server_times_out(fake_backend: FakeBackend) -> None:
    fake_backend.script(
        "POST", MESSAGES, sse_reply([message_start(), text_start(0), text_delta(0, "Hel"), STALL])
    )
    provider = make_provider(fake_backend, request_timeout=0.5)
    started = time.monotonic()
    error = await failure(provider.stream(HELLO))
    elapsed = time.monotonic() - started
    await provider.aclose()
    assert error.code == "timeout" and "0.5 s" in error.message
    assert 0.4 <= elapsed < 2.0
    assert len(fake_backend.requests) == 1  # read timeouts are not retried


# --------------------------------------------------------------------------- models, info


async def test_list_models_follows_pages(
    fake_backend: FakeBackend, provider: AnthropicProvider
) -> None:
    def model(id: str, name: str) -> dict[str, Any]:
        return {
            "type": "model",
            "id": id,
            "display_name": name,
            "created_at": "2025-09-29T00:00:00Z",
        }

    fake_backend.script(
        "GET",
        "/v1/models",
        json_reply(
            {
                "data": [model("claude-sonnet-4-5-20250929", "Claude Sonnet 4.5")],
                "has_more": True,
                "first_id": "claude-sonnet-4-5-20250929",
                "last_id": "claude-sonnet-4-5-20250929",
            }
        ),
        json_reply(
            {
                "data": [
                    model("claude-opus-4-1-20250805", "Claude Opus 4.1"),
                    model("claude-3-5-haiku-20241022", "Claude Haiku 3.5"),
                ],
                "has_more": False,
                "first_id": "claude-opus-4-1-20250805",
                "last_id": "claude-3-5-haiku-20241022",
            }
        ),
    )
    models = await asyncio.wait_for(provider.list_models(), 5)
    assert [(m.id, m.display_name, m.context_window, m.max_output_tokens) for m in models] == [
        ("claude-sonnet-4-5-20250929", "Claude Sonnet 4.5", 200000, 64000),
        ("claude-opus-4-1-20250805", "Claude Opus 4.1", 200000, 32000),
        ("claude-3-5-haiku-20241022", "Claude Haiku 3.5", 200000, 8192),
    ]
    assert "thinking" in models[0].capabilities and "thinking" not in models[2].capabilities
    first, second = fake_backend.requests_to("/v1/models")
    assert first.headers["anthropic-version"] == "2023-06-01"
    assert "after_id=claude-sonnet-4-5-20250929" in second.query


def test_model_limits_table() -> None:
    assert model_limits("claude-3-haiku-20240307") == (200000, 4096, False)
    assert model_limits("claude-opus-4-20250514")[1] == 32000
    assert model_limits("claude-haiku-4-5")[1] == 64000
    assert model_limits("some-proxy-model") == (200000, 8192, False)


def test_get_info_and_entry_point() -> None:
    info = AnthropicProvider(ProviderConfig(name="anthropic")).get_info()
    assert (info.id, info.display_name) == ("anthropic", "Anthropic")
    assert info.credential_env_vars == ["ANTHROPIC_API_KEY"]
    assert info.capabilities == ["streaming", "tools", "vision", "thinking"]
    assert "fim" not in info.capabilities
    assert info.defaults["base_url"] == "https://api.anthropic.com"
    assert info.defaults["model"] == "claude-sonnet-4-5"
    assert {f.id for f in info.config_fields} >= {"apiKey", "baseUrl", "apiKeyEnv", "model"}
    custom = ProviderConfig(name="anthropic", api_key_env="MY_CLAUDE_KEY")
    assert AnthropicProvider(custom).get_info().credential_env_vars == ["MY_CLAUDE_KEY"]
    (entry,) = entry_points(group="agentls.providers", name="anthropic")
    assert entry.load() is AnthropicProvider
    assert json.loads(info.model_dump_json())["id"] == "anthropic"
