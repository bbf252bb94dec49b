"""The three HTTP providers' wire formats, for fault injection: how to build
a provider against a loopback fake backend, a healthy streamed reply, a
partial one (some text, then whatever fault the test appends), and what
garbage in each format looks like."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentls.core.provider.contract import BaseProvider
from tests.fakes.http_backend import (
    SSE_DONE,
    Chunk,
    Reply,
    ndjson_reply,
    openai_chunk,
    openai_usage_chunk,
    sse,
    sse_event,
    sse_reply,
)

__all__ = ["WIRES", "Wire"]


def _anthropic(name: str, **payload: Any) -> bytes:
    return sse_event(name, {"type": name, **payload})


def _ollama(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode() + b"\n"


@dataclass(frozen=True)
class Wire:
    name: str  # the provider's name (settings `provider`)
    route: str  # the chat endpoint on the fake backend
    base_url: Callable[[str], str]  # fake backend url -> provider baseUrl
    key_env: str | None
    head: tuple[bytes, ...]  # what precedes the first text
    text: Callable[[str], bytes]  # one piece of streamed text
    tail: tuple[bytes, ...]  # a proper end of stream
    reply: Callable[..., Reply]  # a streamed reply of these chunks
    garbage: Callable[[Any], bytes]  # a random JSON value framed as one chunk
    invalid_utf8: bytes  # a chunk whose bytes are not UTF-8
    malformed: bytes  # well-framed JSON of the wrong shape

    def provider(self, url: str, **config: Any) -> BaseProvider:
        from agentls.app import build_provider
        from agentls.core.settings.schema import AgentlsSettings

        options = config.pop("options", {})
        settings = AgentlsSettings(provider=self.name, model="test-model",
                                   base_url=self.base_url(url), provider_options=options,
                                   request_timeout_seconds=config.pop("request_timeout", 2.0),
                                   connect_timeout_seconds=config.pop("connect_timeout", 2.0))
        assert not config, config
        return build_provider(settings)

    def settings(self, url: str, **extra: Any) -> dict[str, Any]:
        """LSP settings (initializationOptions) for this provider."""
        return {"provider": self.name, "model": "test-model", "baseUrl": self.base_url(url),
                **extra}

    def healthy(self, *parts: str) -> Reply:
        return self.reply([*self.head, *(self.text(p) for p in parts), *self.tail])

    def partial(self, *after: Chunk, parts: tuple[str, ...] = ("Hel", "lo"), **reply: Any
                ) -> Reply:
        """Some streamed text, then `after` (a fault: STALL, CLOSE, garbage)."""
        return self.reply([*self.head, *(self.text(p) for p in parts), *after], **reply)


OPENAI = Wire(
    name="openai",
    route="/v1/chat/completions",
    base_url=lambda url: url + "/v1",
    key_env="OPENAI_API_KEY",
    head=(),
    text=lambda t: sse(openai_chunk(t)),
    tail=(sse(openai_chunk(finish_reason="stop")), sse(openai_usage_chunk(5, 2)), SSE_DONE),
    reply=sse_reply,
    garbage=lambda value: sse(json.dumps(value)),
    invalid_utf8=b'data: {"choices": [{"delta": {"content": "\xff\xfe"}}]}\n\n',
    malformed=sse({"choices": [{"delta": {"content": {"text": "not a string"}}}]}),
)

ANTHROPIC = Wire(
    name="anthropic",
    route="/v1/messages",
    base_url=lambda url: url,
    key_env="ANTHROPIC_API_KEY",
    head=(
        _anthropic("message_start", message={
            "id": "msg_1", "type": "message", "role": "assistant", "model": "test-model",
            "content": [], "usage": {"input_tokens": 5, "output_tokens": 1}}),
        _anthropic("content_block_start", index=0, content_block={"type": "text", "text": ""}),
    ),
    text=lambda t: _anthropic("content_block_delta", index=0,
                              delta={"type": "text_delta", "text": t}),
    tail=(
        _anthropic("content_block_stop", index=0),
        _anthropic("message_delta", delta={"stop_reason": "end_turn"},
                   usage={"output_tokens": 2}),
        _anthropic("message_stop"),
    ),
    reply=sse_reply,
    garbage=lambda value: (
        sse_event(str(value.get("type", "x")), json.dumps(value)) if isinstance(value, dict)
        else sse(json.dumps(value))),
    invalid_utf8=(b'event: content_block_delta\ndata: {"type": "content_block_delta", '
                  b'"index": 0, "delta": {"type": "text_delta", "text": "\xc3\x28"}}\n\n'),
    malformed=_anthropic("content_block_delta", index="zero",
                         delta={"type": "text_delta", "text": "x"}),
)

OLLAMA = Wire(
    name="ollama",
    route="/api/chat",
    base_url=lambda url: url,
    key_env=None,
    head=(),
    text=lambda t: _ollama({"model": "test-model", "message": {"role": "assistant",
                                                                "content": t}, "done": False}),
    tail=(_ollama({"model": "test-model", "message": {"role": "assistant", "content": ""},
                   "done": True, "done_reason": "stop", "prompt_eval_count": 5,
                   "eval_count": 2}),),
    reply=ndjson_reply,
    garbage=lambda value: json.dumps(value).encode() + b"\n",
    invalid_utf8=b'{"message": {"role": "assistant", "content": "\xed\xa0\x80"}, "done": false}\n',
    malformed=_ollama({"message": {"role": "assistant", "content": "",
                                   "tool_calls": [{"function": {"name": 5}}]}, "done": False}),
)

WIRES = {wire.name: wire for wire in (OPENAI, ANTHROPIC, OLLAMA)}
