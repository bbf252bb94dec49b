"""The warm-up at a resting cursor (InlineCompletionFeature.warm_at): which
providers are asked, with what, and when it stands aside. Pure logic with a
recording provider; the real server and the packaged model are
tests/e2e/test_local_engine_work.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from agentls.core.editor.inline_completion import InlineRequest
from agentls.core.provider.contract import FimChunk, FimRequest
from agentls.core.settings.schema import InlineCompletionSettings
from agentls.features.inline_completion.feature import InlineCompletionFeature

DOC = "def area(r):\n    \n\nprint(area(2))\n"
AT = DOC.index("    \n") + 4
REQUEST = InlineRequest(uri="file:///w/a.py", language_id="python", text=DOC, offset=AT)


class Info:
    capabilities = ("completion",)


class Recording:
    """A FIM provider that records what it was asked; `hold` keeps a stream
    open until released."""

    def __init__(self, *, local: bool, hold: asyncio.Event | None = None) -> None:
        self.asked: list[FimRequest] = []
        self.hold = hold
        self.closed = 0
        if local:
            self.warm = self._warm

    async def _warm(self, model: str | None, role: str) -> None:
        return None

    def get_info(self) -> Info:
        return Info()

    def stream_fim(self, request: FimRequest) -> AsyncIterator[FimChunk]:
        self.asked.append(request)

        async def chunks() -> AsyncIterator[FimChunk]:
            try:
                if self.hold is not None:
                    await self.hold.wait()
                yield FimChunk(delta="return")
            finally:
                self.closed += 1

        return chunks()


def settings(**values: Any) -> InlineCompletionSettings:
    return InlineCompletionSettings(**values)


async def test_a_local_engine_evaluates_the_prompt_a_keystroke_there_would_send() -> None:
    feature = InlineCompletionFeature()
    provider = Recording(local=True)
    assert await feature.warm_at(REQUEST, lambda: provider, settings())
    (asked,) = provider.asked
    assert asked.options.max_tokens == 1 and asked.options.background
    assert asked.prefix == DOC[:AT] and asked.suffix == DOC[AT:]
    assert feature.warmed == 1 and feature.provider_calls == 0
    # the keystroke's request there sends the same prompt, from the cursor on
    _, prompt = feature._prompt(provider, REQUEST, settings(), True)  # type: ignore[arg-type]
    assert (prompt.prefix, prompt.suffix) == (asked.prefix, asked.suffix)


async def test_a_paid_or_remote_provider_is_never_asked_ahead() -> None:
    feature = InlineCompletionFeature()
    provider = Recording(local=False)
    assert not await feature.warm_at(REQUEST, lambda: provider, settings())
    assert provider.asked == [] and feature.warmed == 0


async def test_switched_off_it_asks_nothing() -> None:
    provider = Recording(local=True)
    assert not await InlineCompletionFeature().warm_at(
        REQUEST, lambda: provider, settings(enabled=False))
    assert provider.asked == []


async def test_a_newer_cursor_cancels_the_older_warm_up() -> None:
    feature = InlineCompletionFeature()
    hold = asyncio.Event()
    provider = Recording(local=True, hold=hold)
    first = asyncio.ensure_future(feature.warm_at(REQUEST, lambda: provider, settings()))
    while not provider.asked:
        await asyncio.sleep(0)
    elsewhere = InlineRequest(uri=REQUEST.uri, language_id="python", text=DOC,
                              offset=DOC.index("print"))
    second = asyncio.ensure_future(feature.warm_at(elsewhere, lambda: provider, settings()))
    assert await first is False  # cancelled: its stream closed
    assert provider.closed == 1
    hold.set()
    assert await second is True
    assert len(provider.asked) == 2 and feature.warmed == 1


async def test_an_answer_already_cached_there_asks_nothing() -> None:
    feature = InlineCompletionFeature()
    provider = Recording(local=True)
    feature.cache.store(REQUEST.uri, DOC, AT, DOC[:AT], DOC[AT:], "return 3.14 * r * r")
    assert not await feature.warm_at(REQUEST, lambda: provider, settings())
    assert provider.asked == []


async def test_a_provider_that_cannot_be_built_is_no_error_at_a_cursor_move() -> None:
    from agentls.core.types.errors import AgentlsError

    def broken() -> Any:
        raise AgentlsError("no API key: set OPENAI_API_KEY")

    assert not await InlineCompletionFeature().warm_at(REQUEST, broken, settings())
