"""NextEditFeature: next edit suggestions (textDocument/copilotInlineEdit).

    supersede the older request for the document, debounce automatic triggers
    -> editable region around the cursor + the user's recent edits
    -> prompt (chat, or a continuation for base/completion models)
    -> provider stream -> the rewritten region (or no suggestion)
    -> minimal edits -> drop the ones not worth showing

Knows nothing of LSP: the language server hands over a NextEditRequest
(core/editor/next_edit.py) and turns the SuggestedEdits into ranges.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentls import __version__
from agentls.core.provider.chunk_stream import ChunkStream
from agentls.core.provider.contract import (
    CompletionOptions,
    FimChoice,
    FimChunk,
    FimRequest,
    FimUnsupported,
    Provider,
)
from agentls.core.types.errors import AgentlsError, ModelError, ProviderRequestCancelled
from agentls.features.inline_completion.scheduler import LatestPerDocument
from agentls.features.policy.sensitive import buffer_withheld

if TYPE_CHECKING:
    from agentls.core.editor.next_edit import NextEditAnswer, NextEditRequest
    from agentls.core.settings.schema import NextEditSettings
    from agentls.core.types.messages import StreamChunk

__all__ = ["NextEditFeature"]

log = logging.getLogger("agentls.features.next_edit")

_CACHED_ANSWERS = 16


class NextEditFeature:
    """FeaturePlugin `next-edit` (switch off with features.disabled or
    nextEdit.enabled)."""

    name = "next-edit"
    version = __version__
    priority = 11

    def __init__(self) -> None:
        self.scheduler = LatestPerDocument()
        self.provider_calls = 0
        self._ids = itertools.count(1)
        # Base/completion models get a continuation prompt, as inline
        # completion's FIM path decides.
        self.continuation = FimChoice()
        self._settings: NextEditSettings | None = None
        # (uri, offset, model, history) -> (document text, answer)
        self._answers: OrderedDict[tuple[Any, ...], tuple[str, NextEditAnswer]] = OrderedDict()

    def get_config_schema(self) -> dict[str, Any]:
        from agentls.core.settings.schema import NextEditSettings

        return NextEditSettings.model_json_schema(by_alias=True)

    async def suggest(
        self,
        request: NextEditRequest,
        provider: Callable[[], Provider],
        settings: NextEditSettings,
        model: str | None = None,
    ) -> NextEditAnswer:
        """`model`: the model to ask (nextEdit.model, else
        inlineCompletion.model, else the provider's default)."""
        # Imported here: the registry builds every feature plugin when inline
        # completion first asks for its own, and that path need not load these.
        from agentls.core.editor.next_edit import NextEditAnswer
        from agentls.features.inline_completion.neighbours import display_path
        from agentls.features.inline_completion.notices import NEXT_EDIT, notice_for
        from agentls.features.next_edit.prompt import (
            before_edit,
            build_prompt,
            describe_change,
            render_edits,
        )
        from agentls.features.next_edit.region import editable_region
        from agentls.features.next_edit.rewrite import extract_rewrite, minimal_edits
        from agentls.features.next_edit.suppress import worth_showing

        if not settings.enabled:
            return NextEditAnswer(why_none="nextEdit.enabled is false")
        # The secret-file rule read_file asks under: no suggestion inside a
        # secret file, and a secret file's edits are not shown to the model
        # as context for another file's.
        why = buffer_withheld(request.uri)
        if why is not None:
            return NextEditAnswer(why_none=why)
        history = tuple((uri, hunk) for uri, hunk in request.history
                        if uri == request.uri or buffer_withheld(uri) is None)
        if len(history) != len(request.history):
            request = dataclasses.replace(request, history=history)
        if not request.history:
            return NextEditAnswer(why_none="no recent edits")
        # The same question again (a client that re-asks on cursor moves, or
        # after cancelling its own request): the same answer, no model call.
        key = (request.uri, request.offset, model,
               tuple((uri, h.start, h.old, h.new) for uri, h in request.history))
        if settings is not self._settings:  # settings (or provider) changed: start over
            self._settings = settings
            self._answers.clear()
        cached = self._answers.get(key)
        if cached is not None and cached[0] == request.text:
            self._answers.move_to_end(key)
            return cached[1]
        ticket = self.scheduler.begin(request.uri)
        completion_model = False
        try:
            if not request.invoked:
                await self.scheduler.debounce(settings.debounce_ms / 1000)
            chosen = provider()
            completion_model = await self.continuation.decide(chosen, model)
            region = editable_region(request.text, request.offset)
            lookup = request.document_text or (lambda uri: None)

            def text_of(uri: str) -> str | None:
                return request.text if uri == request.uri else lookup(uri)

            edits_text = render_edits(request.history, text_of, display_path)
            last = next((hunk for uri, hunk in reversed(request.history)
                         if uri == request.uri), None)

            def prompt_for(completion: bool) -> Any:
                return build_prompt(region, edits_text, chat=not completion,
                                    path=display_path(request.uri),
                                    language_id=request.language_id,
                                    change=describe_change(request.text, last),
                                    original=before_edit(region, last))

            prompt = prompt_for(completion_model)
            try:
                answer = await self._ask(chosen, prompt, settings, model, len(region.text))
            except FimUnsupported as exc:
                # The provider's probe found no continuation endpoint for this
                # model (providers/fim/probe.py): chat, now and from then on.
                log.info("Next edit: %s; using chat prompts", exc)
                self.continuation.refused(chosen, model)
                completion_model = False
                prompt = prompt_for(False)
                answer = await self._ask(chosen, prompt, settings, model, len(region.text))
            for stop in prompt.stop:  # in case the provider did not stop there itself
                answer = answer.split(stop, 1)[0]
            rewritten, why = extract_rewrite(answer, region)
            if rewritten is None:
                log.debug("No next edit: %s", why)
                return NextEditAnswer(model_answered=True, why_none=why)
            edits = minimal_edits(region.text, rewritten, region.start)
            kept, why = worth_showing(edits, request.text, request.offset, last,
                                      [hunk for _, hunk in request.history])
            result = NextEditAnswer(tuple(kept), model_answered=True,
                                    why_none="" if kept else why)
            self._answers[key] = (request.text, result)
            if len(self._answers) > _CACHED_ANSWERS:
                self._answers.popitem(last=False)
            return result
        except asyncio.CancelledError:
            if self.scheduler.absorb(ticket):
                return NextEditAnswer(superseded=True, why_none="superseded")
            raise
        except ProviderRequestCancelled:
            return NextEditAnswer(superseded=True, why_none="superseded")
        except (ModelError, AgentlsError) as exc:
            log.warning("Next edit suggestion failed: %s", exc)
            return NextEditAnswer(notice=notice_for(exc, fim=completion_model,
                                                    wording=NEXT_EDIT),
                                  why_none=str(exc))
        finally:
            self.scheduler.finish(ticket)

    async def _ask(self, provider: Provider, prompt: Any, settings: NextEditSettings,
                   model: str | None, region_chars: int) -> str:
        # The answer is the region again: room for it and a little more, so a
        # model that runs on is cut off early.
        limit = min(settings.max_tokens, region_chars // 2 + 64)
        # Temperature 0: the same edit asked twice gives the same suggestion.
        options = CompletionOptions(model=model, max_tokens=limit, stop=prompt.stop,
                                    temperature=0.0, background=True,
                                    request_id=f"next-edit-{next(self._ids)}")
        stream: ChunkStream[StreamChunk] | ChunkStream[FimChunk]
        if prompt.chat:
            stream = provider.stream(list(prompt.messages), options=options)
        else:
            stream = provider.stream_fim(  # type: ignore[attr-defined]
                FimRequest(prefix=prompt.text, suffix="", options=options))
        self.provider_calls += 1
        parts: list[str] = []
        try:
            async for chunk in stream:
                if chunk.delta:
                    parts.append(chunk.delta)
        finally:
            await stream.aclose()
        return "".join(parts)

