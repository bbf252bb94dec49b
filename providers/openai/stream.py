"""The OpenAI-compatible stream's common part: the SSE payloads of
`/completions` (fill in the middle) and `/chat/completions` carry errors,
usage and finish reasons the same way. `SseChunkReader` reads them and
decodes the FIM stream; openai_chat.ChatChunkReader adds the chat's chunks.

Apart from openai.py so that the chat module can subclass the reader
without importing the provider (and the provider imports no chat code).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from agentls.core.provider.contract import FimChunk
from agentls.core.types.errors import FinishReason
from agentls.providers.http.client import HttpClient
from agentls.providers.http.framing import SSEEvent
from agentls.providers.http.stream import StreamReader, estimated_tokens

__all__ = ["SseChunkReader", "first_choice"]

logger = logging.getLogger("agentls.providers.openai.provider")

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}

_Chunk = TypeVar("_Chunk")


class SseChunkReader(StreamReader):
    """Reads a stream's SSE payloads: errors sent in the stream, the usage
    counts, whether the stream ended properly. `text_chunk` decodes the
    /completions (FIM) stream; openai_chat.ChatChunkReader adds the chat's."""

    def __init__(self, http: HttpClient, model: str, *, prompt_chars: int) -> None:
        super().__init__(http, model, prompt_chars=prompt_chars)
        self.finished = False
        # (prompt_tokens, completion_tokens, total_tokens) as the server said
        self.usage: tuple[int, int, int] | None = None
        self.saw_tool_calls = False

    def sse_chunks(
        self, events: AsyncIterator[SSEEvent], decode: Callable[[str], _Chunk | None]
    ) -> AsyncIterator[_Chunk]:
        """The decoded chunks of an SSE stream up to its `[DONE]`."""

        def decode_event(event: SSEEvent) -> _Chunk | None:
            if event.data.strip() == "[DONE]":
                self.done = True
                return None
            return decode(event.data)

        return self.chunks(events, decode_event)

    def payload(self, data: str) -> dict[str, Any]:
        payload = self.json_object(data, "a stream chunk")
        # vLLM, LiteLLM and others report failures in-stream
        self.raise_sent_error(payload)
        usage = payload.get("usage")
        if isinstance(usage, dict):
            prompt = int(usage.get("prompt_tokens") or 0)
            completion = int(usage.get("completion_tokens") or 0)
            self.usage = (prompt, completion, int(usage.get("total_tokens") or prompt + completion))
        return payload

    def text_chunk(self, data: str) -> FimChunk | None:
        choice = first_choice(self.payload(data))
        if choice is None:
            return None
        text = choice.get("text") or ""
        self.output_chars += len(text)
        finish = self.finish_reason(choice)
        if not (text or finish):
            return None
        return FimChunk(delta=text, finish_reason=finish)

    def finish_reason(self, choice: dict[str, Any]) -> FinishReason | None:
        raw = choice.get("finish_reason")
        if not raw:
            return None
        self.finished = True
        reason = _FINISH.get(str(raw), "stop")
        # Some servers (older llama.cpp, Ollama) say "stop" after tool calls.
        return "tool_calls" if reason == "stop" and self.saw_tool_calls else reason

    def token_counts(self) -> tuple[int, int, int]:
        """(input, output, total) tokens for the closing usage chunk; raises
        if the stream was cut short."""
        if not (self.done or self.finished):
            raise self.cut_short("it finished (no finish_reason, no [DONE])")
        if self.usage is not None:
            return self.usage
        prompt, output = estimated_tokens(self.prompt_chars), estimated_tokens(self.output_chars)
        logger.debug(
            "openai: %s sent no usage; estimated %d in / %d out tokens as characters/4",
            self.http.base_url,
            prompt,
            output,
        )
        return prompt, output, prompt + output


def first_choice(payload: dict[str, Any]) -> dict[str, Any] | None:
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    first: dict[str, Any] = choices[0]
    return first
