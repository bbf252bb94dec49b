"""Supersede, debounce, cancellation, caching and errors of the inline
completion feature, against an in-process provider (the e2e tests use the
real server and the loopback HTTP backend)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from agentls.core.provider.contract import (
    BaseProvider,
    CompletionOptions,
    FimRequest,
    ProviderConfig,
    ToolSpec,
)
from agentls.core.settings.schema import InlineCompletionSettings
from agentls.core.types.conversation import Message
from agentls.core.types.errors import AgentlsError, ModelError
from agentls.core.types.messages import ProviderInfo, StreamChunk
from agentls.features.inline_completion import (
    InlineCompletionFeature,
    InlineRequest,
    OpenDocument,
)
from agentls.features.inline_completion.flights import ORPHAN_SECONDS
from agentls.features.inline_completion.scheduler import LatestPerDocument

DOC = "def area(r):\n    return \n"
CURSOR = DOC.index("return ") + len("return ")


class FakeProvider(BaseProvider):
    """Replies `reply` in `chunks` pieces after `delay`; `stall` waits forever."""

    name = "fake"

    def __init__(self, reply: str = "3.14 * r * r", *, fim: bool = False, delay: float = 0.0,
                 stall: bool = False, error: Exception | None = None,
                 chunks: Sequence[str] | None = None) -> None:
        super().__init__(ProviderConfig(name="fake"))
        self.reply, self.fim, self.delay, self.stall, self.error = reply, fim, delay, stall, error
        self.chunks = chunks
        self.calls: list[dict[str, Any]] = []
        self.closed = 0
        self.yielded = 0

    def get_info(self) -> ProviderInfo:
        return ProviderInfo(id="fake", display_name="fake")

    def model_supports_fim(self, model: str | None = None) -> bool:
        return self.fim

    async def _reply(self) -> AsyncIterator[StreamChunk]:
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.stall:
                await asyncio.Event().wait()
            if self.error is not None:
                raise self.error
            for piece in self.chunks or [self.reply]:
                self.yielded += 1
                yield StreamChunk(delta=piece)
            yield StreamChunk(finish_reason="stop")
        finally:
            self.closed += 1

    def _stream(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None,
                options: CompletionOptions) -> AsyncIterator[StreamChunk]:
        self.calls.append({"kind": "chat", "messages": list(messages), "options": options})
        return self._reply()

    def _stream_fim(self, request: FimRequest) -> AsyncIterator[StreamChunk]:
        self.calls.append({"kind": "fim", "request": request, "options": request.options})
        return self._reply()


async def until(condition: Any, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.001)


def settings(**overrides: Any) -> InlineCompletionSettings:
    return InlineCompletionSettings(**{"debounce_ms": 0, **overrides})


def request(text: str = DOC, offset: int = CURSOR, **kwargs: Any) -> InlineRequest:
    return InlineRequest(uri="file:///a.py", language_id="python", text=text, offset=offset,
                         **kwargs)


async def test_answers_from_the_model_then_from_the_cache() -> None:
    feature, provider, config = InlineCompletionFeature(), FakeProvider(), settings()
    first = await feature.complete(request(), lambda: provider, config)
    assert first.items == ("3.14 * r * r",) and first.model_answered and not first.from_cache
    typed = DOC[:CURSOR] + "3.1" + DOC[CURSOR:]
    second = await feature.complete(request(typed, CURSOR + 3), lambda: provider, config)
    assert second.items == ("4 * r * r",) and second.from_cache
    assert len(provider.calls) == 1 and feature.provider_calls == 1


async def test_chat_or_fim_by_model() -> None:
    chat, fim = FakeProvider("```python\n42\n```"), FakeProvider("42", fim=True)
    config = settings(max_tokens=32, model="coder")
    assert (await InlineCompletionFeature().complete(request(), lambda: chat, config)).items == (
        "42",)
    assert (await InlineCompletionFeature().complete(request(), lambda: fim, config)).items == (
        "42",)
    assert chat.calls[0]["kind"] == "chat" and fim.calls[0]["kind"] == "fim"
    options = fim.calls[0]["options"]
    assert options.max_tokens == 32 and options.model == "coder"
    assert fim.calls[0]["request"].prefix == DOC[:CURSOR]
    assert fim.calls[0]["request"].suffix == DOC[CURSOR:]


async def test_newer_request_supersedes_the_older() -> None:
    feature, config = InlineCompletionFeature(), settings()
    slow, fast = FakeProvider(stall=True), FakeProvider("1")
    older = asyncio.create_task(feature.complete(request(), lambda: slow, config))
    await until(lambda: slow.calls)
    started = time.monotonic()
    newer = await feature.complete(request(DOC + "\n"), lambda: fast, config)
    answer = await asyncio.wait_for(older, 1)
    assert time.monotonic() - started < 0.5
    assert answer.superseded and answer.items == ()
    assert slow.closed == 1  # the provider stream of the older request was closed
    assert newer.items == ("1",)
    assert feature.scheduler.superseded == 1


async def test_outside_cancellation_propagates() -> None:
    feature, provider = InlineCompletionFeature(), FakeProvider(stall=True)
    task = asyncio.create_task(feature.complete(request(), lambda: provider, settings()))
    await until(lambda: provider.calls)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The model call outlives it only while a next keystroke may continue it.
    started = time.monotonic()
    await until(lambda: provider.closed == 1, within=ORPHAN_SECONDS + 1)
    assert time.monotonic() - started >= ORPHAN_SECONDS * 0.9


async def test_superseded_and_cancelled_still_propagates() -> None:
    feature, provider = InlineCompletionFeature(), FakeProvider(stall=True)
    task = asyncio.create_task(feature.complete(request(), lambda: provider, settings()))
    await until(lambda: provider.calls)
    task.cancel()  # the client's $/cancelRequest ...
    feature.scheduler.begin("file:///a.py")  # ... and a newer request, at once
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_debounce_coalesces_automatic_triggers() -> None:
    feature, provider = InlineCompletionFeature(), FakeProvider("done")
    config = settings(debounce_ms=50)
    tasks = []
    text = DOC
    for index in range(5):
        text = text[:CURSOR + index] + "x" + text[CURSOR + index:]
        tasks.append(asyncio.create_task(
            feature.complete(request(text, CURSOR + index + 1), lambda: provider, config)))
        await asyncio.sleep(0.01)
    answers = await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert len(provider.calls) == 1
    assert [a.superseded for a in answers] == [True] * 4 + [False]
    assert answers[-1].items == ("done",)


async def test_invoked_requests_skip_the_debounce() -> None:
    feature, provider = InlineCompletionFeature(), FakeProvider("now")
    started = time.monotonic()
    answer = await feature.complete(request(invoked=True), lambda: provider,
                                    settings(debounce_ms=2000))
    assert answer.items == ("now",) and time.monotonic() - started < 1


async def test_disabled_does_nothing() -> None:
    feature, provider = InlineCompletionFeature(), FakeProvider()
    answer = await feature.complete(request(), lambda: provider, settings(enabled=False))
    assert answer.items == () and not provider.calls


async def test_settings_change_clears_the_cache() -> None:
    feature, provider = InlineCompletionFeature(), FakeProvider()
    await feature.complete(request(), lambda: provider, settings())
    await feature.complete(request(), lambda: provider, settings(model="other"))
    assert len(provider.calls) == 2


@pytest.mark.parametrize(
    ("error", "key"),
    [
        (ModelError("openai: cannot reach the server", code="connection"),
         "inline-completion:connection"),
        (ModelError("bad key", code="auth"), "inline-completion:auth"),
        (ModelError("no such model", code="not_found"), "inline-completion:not_found"),
        (ModelError("too long", code="context_length"), "inline-completion:context_length"),
        (ModelError("slow down", code="rate_limit"), None),
        (ModelError("overloaded", code="server_error"), None),
    ],
)
async def test_errors_become_notices(error: ModelError, key: str | None) -> None:
    feature, provider = InlineCompletionFeature(), FakeProvider(error=error)
    answer = await feature.complete(request(), lambda: provider, settings())
    assert answer.items == () and not answer.model_answered
    assert (answer.notice.key if answer.notice else None) == key
    if answer.notice is not None:
        assert str(error) in answer.notice.message


async def test_context_length_notice_names_the_settings() -> None:
    provider = FakeProvider(error=ModelError("too long", code="context_length"))
    answer = await InlineCompletionFeature().complete(request(), lambda: provider, settings())
    assert answer.notice is not None and "inlineCompletion.maxPrefixChars" in answer.notice.message


async def test_provider_that_cannot_be_built_is_a_notice() -> None:
    def broken() -> Any:
        raise AgentlsError("No provider named 'nope' is installed")

    answer = await InlineCompletionFeature().complete(request(), broken, settings())
    assert answer.notice is not None and "nope" in answer.notice.message


async def test_fim_stops_reading_at_the_end_of_the_line() -> None:
    provider = FakeProvider(fim=True, chunks=["a, ", "b\n", "more\n", "and more"])
    text = "add()\n"
    answer = await InlineCompletionFeature().complete(request(text, 4), lambda: provider,
                                                      settings())
    assert answer.items == ("a, b",)
    assert provider.yielded == 2 and provider.closed == 1
    assert provider.calls[0]["options"].stop == ("\n",)


async def test_neighbours_are_read_only_for_model_calls() -> None:
    seen: list[int] = []
    other = OpenDocument("file:///lib.py", "python", 1, "def area(radius):\n    return 2\n")

    def neighbours() -> list[OpenDocument]:
        seen.append(1)
        return [other, OpenDocument("file:///x.js", "javascript", 1, "area()")]

    feature, provider = InlineCompletionFeature(), FakeProvider(fim=True)
    await feature.complete(request(neighbours=neighbours), lambda: provider, settings())
    assert seen == [1]
    assert "# Path: lib.py" in provider.calls[0]["request"].prefix
    await feature.complete(request(neighbours=neighbours), lambda: provider, settings())
    assert seen == [1]  # cache hit: not asked again


async def test_absorb_only_undoes_its_own_cancel() -> None:
    scheduler = LatestPerDocument()

    async def work() -> str:
        ticket = scheduler.begin("k")
        try:
            await asyncio.sleep(5)
            return "finished"
        except asyncio.CancelledError:
            if scheduler.absorb(ticket):
                return "superseded"
            raise
        finally:
            scheduler.finish(ticket)

    task = asyncio.create_task(work())
    await asyncio.sleep(0)
    newer = scheduler.begin("k")
    assert await task == "superseded"
    assert task.cancelling() == 0
    assert scheduler.is_current(newer)
    scheduler.finish(newer)
    assert not scheduler.is_current(newer)


class ContinuationProvider(FakeProvider):
    """A base-model provider (like the embedded one): no FIM, but a raw
    continuation endpoint, declared by the capability "completion"."""

    def __init__(self, reply: str, *, capabilities: list[str]) -> None:
        super().__init__(reply)
        self.capabilities = capabilities

    model_supports_fim = None  # type: ignore[assignment]  # decide by capabilities

    def get_info(self) -> ProviderInfo:
        return ProviderInfo(id="base", display_name="base", capabilities=self.capabilities)


@pytest.mark.parametrize("capabilities,kind", [
    (["streaming", "completion"], "fim"),
    (["streaming", "fim"], "fim"),
    (["streaming", "tools"], "chat"),
])
async def test_continuation_endpoint_is_used_for_base_models(
    capabilities: list[str], kind: str
) -> None:
    provider = ContinuationProvider("3.14 * r * r", capabilities=capabilities)
    answer = await InlineCompletionFeature().complete(request(), lambda: provider, settings())
    assert [c["kind"] for c in provider.calls] == [kind]
    assert answer.items == ("3.14 * r * r",)


def test_next_edit_notices_speak_of_next_edits() -> None:
    from agentls.features.inline_completion.notices import NEXT_EDIT, notice_for

    notice = notice_for(ModelError("cannot reach", code="connection"), wording=NEXT_EDIT)
    assert notice is not None and notice.key == "next-edit:connection"
    assert notice.message.startswith("agentls next edit suggestions: cannot reach")
    assert "nextEdit.enabled" in notice.message and "inlineCompletion" not in notice.message
    missing = notice_for(ModelError("no such model", code="not_found"), fim=True,
                         wording=NEXT_EDIT)
    assert missing is not None and "nextEdit.model" in missing.message
    inline = notice_for(ModelError("cannot reach", code="connection"))
    assert inline is not None and "inlineCompletion.enabled" in inline.message
