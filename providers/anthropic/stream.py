"""The Messages API stream: its server-sent events (message_start,
content_block_start/delta/stop, message_delta, message_stop, error) as
StreamChunks, and the closing usage chunk.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from agentls.core.types.errors import FinishReason, ModelError
from agentls.core.types.messages import StreamChunk, ToolCallDelta, Usage
from agentls.providers.http.client import HttpClient
from agentls.providers.http.framing import SSEEvent
from agentls.providers.http.stream import StreamReader, estimated_tokens

__all__ = ["AnthropicEventReader"]

logger = logging.getLogger("agentls.providers.anthropic.provider")

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}

# Anthropic's error types and the HTTP status each comes with (its errors
# page); an `error` event inside a 200 stream is classified by this status.
_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class AnthropicEventReader(StreamReader):
    """Turns Messages API stream events into StreamChunks and remembers what
    the closing chunk needs (usage, whether the message ended properly)."""

    def __init__(self, http: HttpClient, model: str, *, prompt_chars: int) -> None:
        super().__init__(http, model, prompt_chars=prompt_chars)  # done: message_stop seen
        self.stop_reason: str | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        # content-block index -> 0-based tool-call index, and per-tool state
        self._tools: dict[int, int] = {}
        self._tool_input: dict[int, Any] = {}  # the input given in content_block_start
        self._tool_streamed: set[int] = set()  # blocks that had input_json_delta

    def feed(self, event: SSEEvent) -> StreamChunk | None:
        if event.event == "ping":
            return None
        payload = self.json_object(event.data, f"a {event.event!r} event")
        kind = payload.get("type") or event.event
        if kind == "error" or event.event == "error":
            raise self._stream_error(payload)
        if kind == "message_start":
            self._usage(_obj(payload.get("message")).get("usage"))
            return None
        if kind == "content_block_start":
            return self._block_start(payload)
        if kind == "content_block_delta":
            return self._block_delta(payload)
        if kind == "content_block_stop":
            return self._block_stop(payload)
        if kind == "message_delta":
            self._usage(payload.get("usage"))
            raw = _obj(payload.get("delta")).get("stop_reason")
            if not raw:
                return None
            self.stop_reason = str(raw)
            return StreamChunk(finish_reason=self._finish_reason(self.stop_reason))
        if kind == "message_stop":
            self.done = True
            return None
        return None  # ping and event types added after this code was written

    def _index(self, payload: dict[str, Any]) -> int:
        index = payload.get("index")
        if not isinstance(index, int):
            raise self.invalid(
                f"a {payload.get('type')} event without a block index: {payload!r:.200}"
            )
        return index

    def _block_start(self, payload: dict[str, Any]) -> StreamChunk | None:
        index = self._index(payload)
        block = _obj(payload.get("content_block"))
        kind = block.get("type")
        if kind == "tool_use":
            tool_index = self._tools[index] = len(self._tools)
            self._tool_input[index] = block.get("input")
            return StreamChunk(
                tool_call_deltas=[
                    ToolCallDelta(
                        index=tool_index,
                        id=block.get("id") or None,
                        name=block.get("name") or None,
                    )
                ]
            )
        if kind == "text" and block.get("text"):
            self.output_chars += len(block["text"])
            return StreamChunk(delta=block["text"])
        if kind == "thinking" and block.get("thinking"):
            self.output_chars += len(block["thinking"])
            return StreamChunk(reasoning=block["thinking"])
        return None  # redacted_thinking, server tool blocks, empty starts

    def _block_delta(self, payload: dict[str, Any]) -> StreamChunk | None:
        index = self._index(payload)
        delta = _obj(payload.get("delta"))
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text") or ""
            self.output_chars += len(text)
            return StreamChunk(delta=text) if text else None
        if kind == "thinking_delta":
            thinking = delta.get("thinking") or ""
            self.output_chars += len(thinking)
            return StreamChunk(reasoning=thinking) if thinking else None
        if kind == "input_json_delta":
            if index not in self._tools:
                raise self.invalid(
                    f"input_json_delta for content block {index}, which is not a tool_use block"
                )
            partial = delta.get("partial_json") or ""
            self._tool_streamed.add(index)
            self.output_chars += len(partial)
            if not partial:
                return None
            return StreamChunk(
                tool_call_deltas=[ToolCallDelta(index=self._tools[index], arguments=partial)]
            )
        return None  # signature_delta, citations_delta, ...

    def _block_stop(self, payload: dict[str, Any]) -> StreamChunk | None:
        index = self._index(payload)
        given = self._tool_input.pop(index, None)
        if index in self._tools and index not in self._tool_streamed and given:
            # The input came whole in content_block_start (no deltas followed).
            arguments = json.dumps(given)
            self.output_chars += len(arguments)
            return StreamChunk(
                tool_call_deltas=[ToolCallDelta(index=self._tools[index], arguments=arguments)]
            )
        return None

    def _usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        parts = [
            usage.get(key)
            for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        ]
        if any(isinstance(part, int) for part in parts):
            self.input_tokens = sum(part for part in parts if isinstance(part, int))
        if isinstance(usage.get("output_tokens"), int):
            self.output_tokens = usage["output_tokens"]  # cumulative, as documented

    def _finish_reason(self, raw: str) -> FinishReason:
        reason = _FINISH.get(raw, "stop")
        return "tool_calls" if reason == "stop" and self._tools else reason

    def _stream_error(self, payload: dict[str, Any]) -> ModelError:
        error = payload.get("error")
        kind = error.get("type") if isinstance(error, dict) else None
        status = _ERROR_STATUS.get(str(kind), 200)
        return self.stream_error(payload, status=status)

    def finish(self) -> list[StreamChunk]:
        """The closing usage chunk; raises if the stream was cut short."""
        if not (self.done or self.stop_reason):
            raise self.cut_short(
                "the message finished (no message_delta stop_reason, no message_stop)"
            )
        prompt, output = self.input_tokens, self.output_tokens
        if prompt is None and output is None:
            logger.debug(
                "anthropic: %s sent no usage; estimating tokens as characters/4",
                self.http.base_url,
            )
        if prompt is None:
            prompt = estimated_tokens(self.prompt_chars)
        if output is None:
            output = estimated_tokens(self.output_chars)
        return [
            StreamChunk(
                usage=Usage(input_tokens=prompt, output_tokens=output, total_tokens=prompt + output)
            )
        ]
