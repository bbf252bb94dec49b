"""Runaway streams: the output cap and the degeneration detector
(server/core/agent/stream_guard.py), as pure logic and through a chat turn whose
model is the real openai provider talking to a loopback fake that streams
forever (tests/fakes/http_backend.py)."""

from __future__ import annotations

import asyncio
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentls.core.agent.orchestrator import Orchestrator
from agentls.core.agent.stream_guard import StreamGuard, repeating_tail
from agentls.core.provider.contract import ProviderConfig
from agentls.core.types.conversation import Session
from agentls.providers.openai.provider import OpenAIProvider
from tests.agent_helpers import agent_bundle
from tests.fakes.http_backend import (
    SSE_DONE,
    STALL,
    FakeBackend,
    openai_chunk,
    openai_usage_chunk,
    sse,
    sse_reply,
)
from tests.test_orchestrator import Display

CHAT = "/v1/chat/completions"
KEY_ENV = "AGENTLS_TEST_GUARD_KEY"

# Real-looking output that must never trip the detector.
NORMAL_TEXTS = [
    "=" * 200 + "\nSection\n" + "-" * 200,
    "| name | value |\n|------|-------|\n"
    + "".join(f"| row{i} | {i * i} |\n" for i in range(200)),
    "".join(f"    assert f({i}) == {i + 1}\n" for i in range(150)),
    ("The quick brown fox jumps over the lazy dog. " * 3 + "\n") * 5,
]


# --------------------------------------------------------------------------- pure logic


@pytest.mark.parametrize("text", NORMAL_TEXTS)
def test_normal_output_is_not_degenerate(text: str) -> None:
    assert repeating_tail(text) is None
    guard = StreamGuard(None)
    assert all(guard.feed(text[i:i + 7]) is None for i in range(0, len(text), 7))


@pytest.mark.parametrize(
    ("junk", "unit"),
    [
        (".x" * 600, ".x"),
        ("yes no maybe " * 200, "yes no maybe "),
        ("line again\n" * 120, "line again\n"),
    ],
)
def test_repetition_is_found_after_a_normal_start(junk: str, unit: str) -> None:
    text = "Here is what calc.py contains: " + junk
    assert repeating_tail(text) == unit  # the smallest period, as it ends the text


@settings(max_examples=60, deadline=None)
@given(
    prefix=st.text(min_size=0, max_size=300),
    unit=st.text(alphabet=string.printable, min_size=1, max_size=60),
)
def test_any_short_unit_repeated_long_enough_is_caught(prefix: str, unit: str) -> None:
    guard = StreamGuard(None)
    stream = prefix + unit * (2000 // len(unit) + 20)
    stops = [guard.feed(stream[i:i + 16]) for i in range(0, len(stream), 16)]
    stop = next((s for s in stops if s is not None), None)
    assert stop is not None and stop.reason == "degenerate" and stop.finish_reason == "length"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 10**9), min_size=50, max_size=400))
def test_distinct_lines_never_trip_it(numbers: list[int]) -> None:
    text = "".join(f"value {i}: {n}\n" for i, n in enumerate(numbers))
    assert repeating_tail(text) is None


def test_output_cap_counts_characters_or_reported_tokens() -> None:
    guard = StreamGuard(100)
    assert guard.feed("abcdefghij" * 49) is None  # 490 characters, about 98 tokens
    stop = guard.feed("abcdefghij")
    assert stop is not None and stop.reason == "output_cap"
    assert "session.maxOutputTokens" in stop.message
    reported = StreamGuard(100)
    assert reported.feed("word", reported_output_tokens=100) is not None
    tools = StreamGuard(100)
    assert tools.feed("", other_chars=500) is not None  # tool-call arguments count too


# --------------------------------------------------------------------------- through a turn


def forever(unit_of: Any, count: int = 50_000) -> list[Any]:
    """A stream that, at the pace of a test, never ends on its own."""
    return [sse(openai_chunk(unit_of(i))) for i in range(count)] + [STALL]


async def run_turn(backend: FakeBackend, max_tokens: int) -> tuple[Any, Display]:
    provider = OpenAIProvider(ProviderConfig(
        name="openai", model="test-model", base_url=backend.url + "/v1",
        api_key_env=KEY_ENV, request_timeout=30.0, connect_timeout=2.0,
    ))
    display = Display()
    orch = Orchestrator(agent_bundle(provider, display=display, max_tokens=max_tokens))
    try:
        result = await asyncio.wait_for(
            orch.run_turn(Session("s1"), "In one sentence: what does calc.py contain?"), 20
        )
    finally:
        await provider.aclose()
    return result, display


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-guard")


async def test_a_degenerate_stream_is_stopped_as_length_and_the_user_told(
    fake_backend: FakeBackend,
) -> None:
    fake_backend.script("POST", CHAT, sse_reply(forever(lambda i: ".x")))
    result, display = await run_turn(fake_backend, max_tokens=100_000)

    assert result.status == "completed"
    answer = result.messages[-1]
    assert answer.metadata["finish_reason"] == "length"
    assert answer.metadata["stopped"]["reason"] == "degenerate"
    assert answer.content.endswith(".x.x.x")
    assert len(answer.content) < 5000  # stopped early, not at the cap
    assert any("repeating" in text and level == "warning" for text, level in display.shown)
    request = fake_backend.requests_to(CHAT)[0]
    assert request.json["max_tokens"] == 100_000
    # The HTTP call was given up, not left streaming in the background.
    assert fake_backend.wait_for_disconnect(request, timeout=10)


async def test_unique_text_beyond_the_cap_ends_at_the_cap(fake_backend: FakeBackend) -> None:
    # A server that ignores max_tokens: every chunk differs, so only the cap stops it.
    fake_backend.script("POST", CHAT, sse_reply(forever(lambda i: f"word{i} ")))
    result, display = await run_turn(fake_backend, max_tokens=200)

    answer = result.messages[-1]
    assert answer.metadata["finish_reason"] == "length"
    assert answer.metadata["stopped"]["reason"] == "output_cap"
    assert 200 * 4 <= len(answer.content) <= 200 * 5 + 20
    assert fake_backend.requests_to(CHAT)[0].json["max_tokens"] == 200
    assert any("maxOutputTokens" in text for text, _ in display.shown)
    assert fake_backend.wait_for_disconnect(fake_backend.requests_to(CHAT)[0], timeout=10)


async def test_a_reply_that_ends_by_itself_at_the_cap_is_not_cut(
    fake_backend: FakeBackend,
) -> None:
    # The server honoured max_tokens: its finish and usage arrive at the cap.
    fake_backend.script("POST", CHAT, sse_reply([
        sse(openai_chunk("word " * 40)), sse(openai_chunk(finish_reason="length")),
        sse(openai_usage_chunk(10, 50)), SSE_DONE]))
    result, display = await run_turn(fake_backend, max_tokens=50)
    answer = result.messages[-1]
    assert answer.metadata["finish_reason"] == "length"
    assert "stopped" not in answer.metadata and display.shown == []
