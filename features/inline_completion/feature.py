"""InlineCompletionFeature: the inline completion hot path.

    cache lookup (type-ahead: no model call)
    -> wait for the document's model call in flight if the user typed what it streams
    -> supersede the older request for the document, debounce automatic triggers
    -> prompt (FIM or chat, budgets, neighbour context)
    -> provider stream (small max_tokens, stop sequences, read only as far as needed)
    -> post-process -> cache -> items

It knows nothing of LSP: the language server hands it a `InlineRequest`
(document text and a code-point offset) and turns the `InlineAnswer` into
LSP items. The model call runs as the document's flight (flights.py): a
newer request that does not continue it cancels it, which reaches the
provider's HTTP stream, which closes.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from agentls import __version__
from agentls.core.editor.inline_completion import InlineAnswer, InlineRequest
from agentls.core.plugins.capabilities import Warmable
from agentls.core.plugins.registry import offers
from agentls.core.provider.chunk_stream import ChunkStream
from agentls.core.provider.contract import (
    CompletionOptions,
    FimChoice,
    FimChunk,
    FimRequest,
    FimUnsupported,
    Provider,
)
from agentls.core.settings.schema import InlineCompletionSettings
from agentls.core.types.errors import AgentlsError, ModelError, ProviderRequestCancelled
from agentls.features.inline_completion.cache import CompletionCache
from agentls.features.inline_completion.document import CursorContext, cursor_context
from agentls.features.inline_completion.flights import Flights, Streamed, accepted
from agentls.features.inline_completion.neighbours import NeighbourIndex, display_path
from agentls.features.inline_completion.notices import notice_for
from agentls.features.inline_completion.postprocess import postprocess, reached_end
from agentls.features.inline_completion.prompt import (
    CompletionPrompt,
    TokenCounter,
    build_prompt,
    context_budget,
)
from agentls.features.inline_completion.scheduler import LatestPerDocument
from agentls.features.inline_completion.withheld import WithheldBuffers

if TYPE_CHECKING:
    from agentls.core.types.messages import StreamChunk

__all__ = [ "InlineCompletionFeature",]

log = logging.getLogger("agentls.features.inline_completion")

# Room for the chat system prompt and message framing when a provider
# counts tokens.
_PROMPT_OVERHEAD_TOKENS = 128
# Once a fill the editor asked for while the user types has taken this long,
# it ends at its next complete line (as llama.vim's t_max_predict_ms): on a
# laptop CPU a multi-line fill runs on for seconds while the user waits; a
# fast backend finishes well before. An invoked request (the user asked and
# waits) is read whole.
FIRST_LINES_SECONDS = 1.0
# A completion wants the likeliest text, the same every time it is asked:
# servers sample at their default otherwise (llama.cpp's 0.8 made the same
# hole pass, then fail, minutes apart). Tabby sends 0.1.
INLINE_TEMPERATURE = 0.1


_NOTHING = InlineAnswer()


class InlineCompletionFeature:
    """FeaturePlugin `inline-completion` (switch off with features.disabled);
    the InlineCompleter of core/editor/inline_completion.py."""

    name = "inline-completion"
    version = __version__
    priority = 10

    def __init__(self) -> None:
        self.cache = CompletionCache()
        self.scheduler = LatestPerDocument()
        self.flights = Flights()
        self.neighbours = NeighbourIndex()
        self.withheld = WithheldBuffers()
        self.provider_calls = 0
        self.warmed = 0  # prompts evaluated ahead at a resting cursor
        self._warming: asyncio.Task[bool] | None = None
        self._settings: InlineCompletionSettings | None = None
        self.fim = FimChoice()
        self._ids = itertools.count(1)

    # -- FeaturePlugin (cold path) ----------------------------------------------
    def get_config_schema(self) -> dict[str, Any]:
        return InlineCompletionSettings.model_json_schema(by_alias=True)

    async def prepare(
        self, provider: Callable[[], Provider], settings: InlineCompletionSettings
    ) -> None:
        """Ahead of the first request (a document opened): build the provider,
        decide its prompt form and warm its model, so the first keystroke
        waits for the model's answer alone."""
        if not settings.enabled:
            return
        chosen = provider()
        await self.fim.decide(chosen, settings.model)
        if offers(chosen, Warmable):
            await chosen.warm(settings.model or None, "completion")

    async def warm_at(
        self,
        request: InlineRequest,
        provider: Callable[[], Provider],
        settings: InlineCompletionSettings,
    ) -> bool:
        """The cursor rests at `request`'s position and nothing is asked yet:
        the engine evaluates the prompt a keystroke there would send, so that
        keystroke's answer waits for its own few tokens, not for the whole
        window (docs/local-model.md, "Why the first suggestion at a new place
        is slow"). Only an engine of the user's own (Warmable) is asked: a
        paid API would bill every cursor move. A newer cursor supersedes the
        older one; any inline completion goes before it in the engine.
        Whether the engine was asked."""
        if self._warming is not None:
            self._warming.cancel()
        if not settings.enabled or self.flights.flying(request.uri) or \
                self.cache.lookup(request.uri, request.text, request.offset) is not None:
            return False
        if self.withheld.now(request.uri) is not None:
            return False  # a secret's text never goes to the model
        try:
            chosen = provider()
            local_engine = offers(chosen, Warmable)
            if not local_engine or not await self.fim.decide(chosen, settings.model):
                return False
        except (ModelError, AgentlsError) as exc:  # no provider yet: the next request says why
            log.debug("Inline completion: no warm-up at the cursor: %s", exc)
            return False
        task = asyncio.ensure_future(self._warm(chosen, request, settings))
        self._warming = task
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # this caller was cancelled, not only its warm-up
            return False  # a newer cursor's warm-up replaced it
        except ProviderRequestCancelled:  # an inline completion went first
            return False
        except (ModelError, AgentlsError) as exc:  # the next request reports it
            log.debug("Inline completion: no warm-up at the cursor: %s", exc)
            return False
        finally:
            if self._warming is task:
                self._warming = None

    async def _warm(self, provider: Provider, request: InlineRequest,
                    settings: InlineCompletionSettings) -> bool:
        _, prompt = self._prompt(provider, request, settings, True)
        # One token: llama-cpp-python reads max_tokens 0 as "up to the context".
        options = CompletionOptions(model=settings.model, max_tokens=1,
                                    temperature=INLINE_TEMPERATURE, stop=prompt.stop,
                                    request_id=f"warm-{next(self._ids)}", background=True)
        stream = provider.stream_fim(  # type: ignore[attr-defined]
            FimRequest(prefix=prompt.prefix, suffix=prompt.suffix, options=options))
        try:
            async for _ in stream:
                pass
        finally:
            await stream.aclose()
        self.warmed += 1
        return True

    # -- the hot path --------------------------------------------------------------
    async def complete(
        self,
        request: InlineRequest,
        provider: Callable[[], Provider],
        settings: InlineCompletionSettings,
    ) -> InlineAnswer:
        """Completions at the cursor. `provider` is called only when the
        model is needed (it may raise AgentlsError when it cannot be built)."""
        if not settings.enabled:
            return _NOTHING
        if settings is not self._settings:
            if settings != self._settings:  # other model or budgets: old answers are stale
                self.cache.clear()
            self._settings = settings
        show_at = self._show_at(asyncio.get_running_loop().time(), request, settings)
        ticket = self.scheduler.begin(request.uri)
        fim = False
        try:
            cached = self.cache.lookup(request.uri, request.text, request.offset)
            if cached is not None:
                return InlineAnswer((cached,), from_cache=True)
            adopted = False
            flight = self.flights.matching(request.uri, request.text, request.offset)
            if flight is not None:  # the model is producing what the user typed: wait for it
                part, partial = await self.flights.wait_or_part(
                    flight, show_at, flight.typed_since(request.text, request.offset) or "")
                if partial:
                    return InlineAnswer((part,), model_answered=True, partial=True)
                cached = self.cache.lookup(request.uri, request.text, request.offset)
                if cached is not None:
                    return InlineAnswer((cached,), from_cache=True, model_answered=True)
                adopted = True
            self.flights.cancel(request.uri)  # the user went elsewhere: the engine is theirs
            if self._warming is not None:  # an HTTP engine would serve the warm-up first
                self._warming.cancel()
            # A secret file's text never goes to the model (read_file asks
            # for it); checked while the request debounces.
            pending = self.withheld.start(request.uri)
            if not request.invoked and not adopted:
                await self.scheduler.debounce(settings.debounce_ms / 1000)
            why = pending if pending is None or isinstance(pending, str) else await pending
            if why is not None:
                log.debug("Inline completion: %s", why)
                return _NOTHING
            chosen = provider()
            fim = await self.fim.decide(chosen, settings.model)
            sent: list[int] = [0, 0]
            try:
                completion, partial = await self._fly(chosen, request, settings, fim, sent,
                                                      show_at)
            except FimUnsupported as exc:
                # The provider found out (its probe) that the server has no
                # FIM for this model: this request, and the next ones, chat.
                log.info("Inline completion: %s; using chat prompts", exc)
                self.fim.refused(chosen, settings.model)
                fim = False
                completion, partial = await self._fly(chosen, request, settings, fim, sent,
                                                      show_at)
            if completion and settings.speculative and not partial:
                self._ask_ahead(chosen, request, settings, fim, completion)
            return InlineAnswer((completion,) if completion else (), model_answered=True,
                                prompt_chars=sent[0], input_tokens=sent[1], partial=partial)
        except asyncio.CancelledError:
            if self.scheduler.absorb(ticket):
                return InlineAnswer(superseded=True)
            raise
        except ProviderRequestCancelled:
            return InlineAnswer(superseded=True)
        except (ModelError, AgentlsError) as exc:
            notice = notice_for(exc, fim=fim)
            log.warning("Inline completion failed: %s", exc)
            return InlineAnswer(notice=notice)
        finally:
            self.scheduler.finish(ticket)

    @staticmethod
    def _show_at(began: float, request: InlineRequest,
                 settings: InlineCompletionSettings) -> float:
        """When a request may be answered with part of the model's answer
        (the loop's clock): never for one the user asked for."""
        if request.invoked or not settings.show_partial_after_ms:
            return math.inf
        return began + settings.show_partial_after_ms / 1000

    async def _fly(self, provider: Provider, request: InlineRequest,
                   settings: InlineCompletionSettings, fim: bool, sent: list[int],
                   show_at: float) -> tuple[str, bool]:
        """The model call as the document's flight (flights.py), awaited
        whole or, after `show_at`, in part: (completion, partial)."""
        ctx, prompt = self._prompt(provider, request, settings, fim)

        def shown(text: str) -> str:  # a FIM model's text so far, whole lines if several
            return postprocess(text, ctx, truncated=True)

        flight = self.flights.start(
            request.uri, request.text, request.offset,
            lambda streamed: self._ask(provider, request, settings, fim, sent, streamed,
                                       ctx, prompt),
            shown=shown if fim else None)
        return await self.flights.wait_or_part(flight, show_at, adopted=False)

    def _ask_ahead(self, provider: Provider, request: InlineRequest,
                   settings: InlineCompletionSettings, fim: bool, completion: str) -> None:
        """The completion after `completion`, in the background (flights.py)."""
        text, offset = accepted(request.text, request.offset, completion)
        after = replace(request, text=text, offset=offset, invoked=False)

        async def ask(streamed: Streamed) -> str:
            ctx, prompt = self._prompt(provider, after, settings, fim)
            return await self._ask(provider, after, settings, fim, [0, 0], streamed, ctx, prompt)

        self.flights.start(request.uri, text, offset, ask, ahead=True)

    def _prompt(
        self, provider: Provider, request: InlineRequest, settings: InlineCompletionSettings,
        fim: bool,
    ) -> tuple[CursorContext, CompletionPrompt]:
        """The cursor's context and the prompt a request there sends."""
        # A provider may prefer less context than the setting allows (the
        # embedded CPU model: prompt length is its latency).
        max_prefix = _preferred(provider, "preferred_prefix_chars", settings.max_prefix_chars)
        ctx = cursor_context(
            request.text,
            request.offset,
            max_prefix_chars=max_prefix,
            max_suffix_chars=_preferred(provider, "preferred_suffix_chars",
                                        settings.max_suffix_chars),
        )
        snippets = []
        if request.neighbours is not None:
            others = [
                document
                for document in request.neighbours()
                if document.language_id == request.language_id and document.uri != request.uri
                and self.withheld.now(document.uri) is None
            ]
            if others:
                snippets = self.neighbours.snippets(
                    ctx.prefix, others, context_budget(max_prefix)
                )
        counter, limit = _token_limit(provider, settings.max_tokens)
        prompt = build_prompt(
            ctx,
            fim=fim,
            language_id=request.language_id,
            path=display_path(request.uri),
            max_prefix_chars=max_prefix,
            snippets=snippets,
            tokens=counter,
            token_limit=limit,
        )
        return ctx, prompt

    async def _ask(
        self,
        provider: Provider,
        request: InlineRequest,
        settings: InlineCompletionSettings,
        fim: bool,
        sent: list[int],
        streamed: Streamed,
        ctx: CursorContext,
        prompt: CompletionPrompt,
    ) -> str:
        options = CompletionOptions(
            model=settings.model,
            max_tokens=settings.max_tokens,
            temperature=INLINE_TEMPERATURE,
            stop=prompt.stop,
            request_id=f"inline-{next(self._ids)}",
        )
        stream: ChunkStream[StreamChunk] | ChunkStream[FimChunk]
        if fim:
            stream = provider.stream_fim(  # type: ignore[attr-defined]
                FimRequest(prefix=prompt.prefix, suffix=prompt.suffix, options=options)
            )
        else:
            stream = provider.stream(prompt.messages, options=options)
        self.provider_calls += 1
        sent[0] = (len(prompt.prefix) + len(prompt.suffix) if fim
                   else sum(len(m.content) for m in prompt.messages if isinstance(m.content, str)))
        parts: list[str] = []
        truncated = False
        asked = time.monotonic()
        try:
            async for chunk in stream:
                if chunk.usage.input_tokens:
                    sent[1] = chunk.usage.input_tokens
                if chunk.finish_reason == "length":
                    truncated = True
                if chunk.delta:
                    parts.append(chunk.delta)
                    streamed.append(chunk.delta)
                    # A FIM model's text is the completion itself: stop reading
                    # once it has run past the end (chat replies need their fences).
                    if fim and "\n" in chunk.delta:
                        text = "".join(parts)
                        if reached_end(text, ctx):
                            break
                        first_line = text[: text.find("\n")]
                        if not request.invoked and ctx.line_prefix.strip() and first_line.strip():
                            # Typed into a statement: its line is the answer
                            # (as Copilot's single-line mode); asked for, read whole.
                            parts = [first_line]
                            break
                        if (not request.invoked and text.strip()
                                and time.monotonic() - asked > FIRST_LINES_SECONDS):
                            parts = [text[: text.rfind("\n") + 1]]  # whole lines only
                            break
        finally:
            await stream.aclose()
        completion = postprocess("".join(parts), ctx, chat=not fim, truncated=truncated)
        if completion:
            self.cache.store(
                request.uri, request.text, request.offset, ctx.prefix, ctx.suffix, completion
            )
        return completion


def _preferred(provider: Provider, name: str, most: int) -> int:
    """The setting's budget, or the provider's smaller preference."""
    preferred = getattr(provider, name, None)
    return preferred if isinstance(preferred, int) and 0 < preferred < most else most


def _token_limit(provider: Provider, max_tokens: int) -> tuple[TokenCounter | None, int | None]:
    """A provider that knows its tokenizer and window bounds the prompt in tokens."""
    window = getattr(provider, "context_window", None)
    # getattr, not isinstance(provider, TokenCounter): a runtime protocol
    # check costs tens of microseconds on every request.
    if isinstance(window, int) and window > 0 and callable(getattr(provider, "count_tokens", None)):
        return cast(TokenCounter, provider), window - max_tokens - _PROMPT_OVERHEAD_TOKENS
    return None, None
