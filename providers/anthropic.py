"""The `anthropic` provider: Anthropic's Messages API, streamed over SSE.

baseUrl is the API root (https://api.anthropic.com), not .../v1 (a trailing
/v1 is tolerated and dropped). The key is read from ANTHROPIC_API_KEY (or the
variable apiKeyEnv names) and sent as `x-api-key`, only when set.

Request conversion (core Messages -> Messages API):
- leading system messages -> the top-level `system` field; a system message
  later in the conversation, or any hook injection (metadata.source "hook"),
  -> user text wrapped in <system-reminder> tags, since the API has no
  mid-conversation system role;
- assistant tool calls -> `tool_use` blocks; role "tool" messages ->
  `tool_result` blocks (is_error when the tool failed) in a user message;
- consecutive messages of one role are merged (the API wants user and
  assistant to alternate), so consecutive tool results share one user
  message, tool_result blocks first; empty text is omitted.

No fill-in-the-middle: inline completion goes through chat.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from agentls.core.models import (
    ConfigField,
    FinishReason,
    ModelError,
    ModelInfo,
    ProviderInfo,
    StreamChunk,
    ToolCallDelta,
    Usage,
)
from agentls.core.provider import CompletionOptions, ProviderConfig, ToolSpec
from agentls.core.session_types import Message

from .http import HttpClient, SSEEvent
from .http_provider import HttpProvider, text_of, tool_result_text

__all__ = [
    "AnthropicProvider",
    "model_limits",
    "to_anthropic_messages",
    "to_anthropic_tools",
]

logger = logging.getLogger("agentls.providers.anthropic")

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_API_KEY_ENV = "ANTHROPIC_API_KEY"
DEFAULT_MODEL = "claude-sonnet-4-5"
API_VERSION = "2023-06-01"
CONTEXT_WINDOW = 200_000  # every Claude 3+ family (1M is a beta opt-in)
DEFAULT_MAX_OUTPUT_TOKENS = 8192  # for models the table below does not know
# max_tokens sent when neither the call nor providerOptions.maxTokens sets it;
# capped by the model's own maximum. Output rate limits are charged on
# max_tokens up front, so this stays well below the 64K some models allow.
DEFAULT_MAX_TOKENS = 8192
SYSTEM_REMINDER = "<system-reminder>\n{text}\n</system-reminder>"

# (model id pattern, max output tokens, extended thinking); first match wins.
_MODEL_TABLE: tuple[tuple[re.Pattern[str], int, bool], ...] = tuple(
    (re.compile(pattern), max_output, thinking)
    for pattern, max_output, thinking in (
        (r"claude-opus-4(?:-[01])?(?:-\d{8})?$", 32_000, True),  # Opus 4 and 4.1
        (r"claude-(?:opus|sonnet|haiku)-(?:4|[5-9]|\d\d)", 64_000, True),
        (r"claude-3-7-sonnet", 64_000, True),
        (r"claude-3-5-(?:sonnet|haiku)", 8_192, False),
        (r"claude-3-(?:opus|sonnet|haiku)", 4_096, False),
    )
)

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

_HINTS = {
    "not_found": "Model {model!r} or the endpoint does not exist at {base_url}: list the "
    "models the account offers (agentls/models, i.e. GET {base_url}/v1/models) and set "
    "`model` to one of them; baseUrl is the API root (https://api.anthropic.com), "
    "without /v1.",
    "invalid_response": "Check that baseUrl ({base_url}) is Anthropic's API root "
    "(https://api.anthropic.com, without /v1) or a proxy speaking the Messages API.",
    "rate_limit": "Gave up after {attempts} attempt(s); wait a moment, or check the "
    "organisation's rate limits in the Anthropic console.",
    "server_error": "Gave up after {attempts} attempt(s); Anthropic may be overloaded, "
    "try again later.",
}


def model_limits(model: str) -> tuple[int, int, bool]:
    """(context window, max output tokens, supports extended thinking) for a model id."""
    for pattern, max_output, thinking in _MODEL_TABLE:
        if pattern.search(model):
            return CONTEXT_WINDOW, max_output, thinking
    return CONTEXT_WINDOW, DEFAULT_MAX_OUTPUT_TOKENS, False


def _option(options: Mapping[str, Any], snake: str, camel: str) -> Any:
    return options.get(snake, options.get(camel))


class AnthropicProvider(HttpProvider):
    name = "anthropic"
    default_base_url = DEFAULT_BASE_URL
    default_api_key_env = DEFAULT_API_KEY_ENV
    default_model_id = DEFAULT_MODEL
    hints = _HINTS

    def __init__(self, config: ProviderConfig) -> None:
        base_url = config.base_url
        if base_url and re.search(r"/v1/?$", base_url):
            # The API root is wanted; be forgiving about a trailing /v1.
            config = dataclasses.replace(config, base_url=re.sub(r"/v1/?$", "", base_url))
        super().__init__(config)

    def _auth_headers(self, key: str) -> dict[str, str]:
        return {"x-api-key": key}

    def _headers(self) -> dict[str, str]:
        options = self.config.options
        version = _option(options, "anthropic_version", "anthropicVersion") or API_VERSION
        headers = {"anthropic-version": str(version)}
        beta = _option(options, "anthropic_beta", "anthropicBeta")
        if beta:
            headers["anthropic-beta"] = ",".join(beta) if isinstance(beta, list) else str(beta)
        return headers

    def _max_tokens(self, options: CompletionOptions, model: str) -> int:
        if options.max_tokens is not None:
            return options.max_tokens
        configured = _option(self.config.options, "max_tokens", "maxTokens")
        if isinstance(configured, int) and configured > 0:
            return configured
        return min(DEFAULT_MAX_TOKENS, model_limits(model)[1])

    # -- chat ----------------------------------------------------------------
    async def _stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None,
        options: CompletionOptions,
    ) -> AsyncIterator[StreamChunk]:
        model = options.model or self.default_model
        system, converted = to_anthropic_messages(messages, model=model)
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": self._max_tokens(options, model),
            "messages": converted,
            "stream": True,
        }
        if system:
            body["system"] = system
        if tools:
            body["tools"] = to_anthropic_tools(tools)
        _apply_options(body, options)
        reader = _EventReader(self._http, model, prompt_chars=_prompt_chars(body))
        async with self._http.stream_sse(
            "POST", "/v1/messages", model=model, body=body, headers=self._headers()
        ) as events:
            async for event in events:
                if reader.done:
                    continue  # drain to the end so the connection can be reused
                chunk = reader.feed(event)
                if chunk is not None:
                    yield chunk
        for chunk in reader.finish():
            yield chunk

    # -- metadata ----------------------------------------------------------------
    async def list_models(self) -> list[ModelInfo]:
        model = self.default_model
        entries: list[Any] = []
        after: str | None = None
        for _ in range(20):  # pages of 1000; a bound, not an expectation
            path = "/v1/models?limit=1000" + (f"&after_id={after}" if after else "")
            payload = await self._http.request_json(
                "GET", path, model=model, headers=self._headers()
            )
            page = payload.get("data") if isinstance(payload, dict) else None
            if not isinstance(page, list):
                raise self._http.error(
                    "invalid_response", "GET /v1/models returned no `data` list", model=model
                )
            entries.extend(page)
            after = payload.get("last_id")
            if not payload.get("has_more") or not isinstance(after, str) or not page:
                break
        models = []
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                continue
            model_id: str = entry["id"]
            window, max_output, thinking = model_limits(model_id)
            # Newer API versions report the limits themselves.
            if isinstance(entry.get("max_input_tokens"), int):
                window = entry["max_input_tokens"]
            if isinstance(entry.get("max_tokens"), int):
                max_output = entry["max_tokens"]
            display = entry.get("display_name")
            models.append(
                ModelInfo(
                    id=model_id,
                    display_name=display if isinstance(display, str) and display else model_id,
                    context_window=window,
                    max_output_tokens=max_output,
                    capabilities=["streaming", "tools", "vision", *(["thinking"] * thinking)],
                )
            )
        return models  # the API lists newest first; keep its order

    def get_info(self) -> ProviderInfo:
        env = self._http.api_key_env or DEFAULT_API_KEY_ENV
        return ProviderInfo(
            id="anthropic",
            display_name="Anthropic",
            credential_env_vars=[env],
            capabilities=["streaming", "tools", "vision", "thinking"],
            defaults={
                "model": self.default_model,
                "base_url": self._http.base_url,
                "max_tokens": min(DEFAULT_MAX_TOKENS, model_limits(self.default_model)[1]),
            },
            config_fields=[
                ConfigField(
                    id="apiKey",
                    display_name="API key",
                    field_type="secret",
                    prompt="Anthropic API key (console.anthropic.com), read from the environment",
                    env_var=env,
                    required=True,
                ),
                ConfigField(
                    id="apiKeyEnv",
                    display_name="API key variable",
                    prompt="Name of the environment variable holding the API key",
                    required=False,
                    default=DEFAULT_API_KEY_ENV,
                ),
                ConfigField(
                    id="baseUrl",
                    display_name="Base URL",
                    prompt="API root, without /v1 (change it only for a proxy)",
                    required=False,
                    default=DEFAULT_BASE_URL,
                ),
                ConfigField(
                    id="model",
                    display_name="Model",
                    prompt="Model id or alias (see agentls/models)",
                    required=False,
                    default=DEFAULT_MODEL,
                ),
            ],
        )


# --------------------------------------------------------------------------- requests


def to_anthropic_messages(
    messages: Iterable[Message], *, model: str = ""
) -> tuple[str, list[dict[str, Any]]]:
    """Core messages -> (top-level `system`, Messages API `messages`)."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    leading = True
    for message in messages:
        if message.role == "system":
            text = text_of(message.content)
            if leading and (message.metadata or {}).get("source") != "hook":
                if text.strip():
                    system.append(text)
                continue
            role, blocks = "user", _text_blocks(SYSTEM_REMINDER.format(text=text) if text else "")
        else:
            leading = False
            role, blocks = _convert(message, model)
        if not blocks:
            continue  # empty text is rejected by the API; nothing to say
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": list(blocks)})
    for turn in turns:
        if turn["role"] == "user":
            # tool_result blocks must come first in their user message.
            turn["content"].sort(key=lambda block: block.get("type") != "tool_result")
    if turns and turns[-1]["role"] == "assistant":
        # A prefilled final assistant turn may not end in whitespace.
        last = turns[-1]["content"][-1]
        if last.get("type") == "text":
            last["text"] = last["text"].rstrip()
            if not last["text"]:
                turns[-1]["content"].pop()
                if not turns[-1]["content"]:
                    turns.pop()
    return "\n\n".join(system), turns


def _convert(message: Message, model: str) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "tool":
        call_id = message.tool_call_id
        if not call_id:
            raise ModelError(
                "anthropic: a tool message has no metadata.tool_call_id, so the model "
                "cannot match it to its call",
                model=model,
                code="bad_request",
            )
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
        text = tool_result_text(message)
        if text:
            block["content"] = text
        if (message.tool_result or {}).get("success", True) is False:
            block["is_error"] = True
        return "user", [block]
    if message.role == "assistant":
        blocks = _text_blocks(text_of(message.content))
        blocks += [_tool_use(call) for call in message.tool_calls]
        return "assistant", blocks
    parts = message.multipart_content or message.content
    if isinstance(parts, list):
        return "user", [b for b in (_part(p) for p in parts) if b is not None]
    return "user", _text_blocks(text_of(parts))


def to_anthropic_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "name": tool["name"],
            "description": tool.get("description", ""),
            "input_schema": tool.get("parameters") or {"type": "object", "properties": {}},
        }
        for tool in tools
    ]


def _tool_use(call: Any) -> dict[str, Any]:
    if hasattr(call, "model_dump"):  # a ToolCall rather than its dict form
        call = call.model_dump()
    arguments = call.get("arguments") or {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            arguments = {"arguments": arguments}
    if not isinstance(arguments, dict):
        arguments = {"arguments": arguments}
    return {
        "type": "tool_use",
        "id": call.get("id") or f"toolu_{uuid.uuid4().hex[:24]}",
        "name": call.get("tool") or call.get("name"),
        "input": arguments,
    }


def _part(part: Any) -> dict[str, Any] | None:
    """One user content part (OpenAI-style or Anthropic-style) -> a content block."""
    if isinstance(part, str):
        return {"type": "text", "text": part} if part else None
    if not isinstance(part, dict):
        return {"type": "text", "text": text_of(part)}
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": part["text"]} if part.get("text") else None
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        if isinstance(url, str):
            match = re.match(r"data:([^;,]+);base64,(.*)$", url, re.DOTALL)
            if match:
                source = {"type": "base64", "media_type": match[1], "data": match[2]}
                return {"type": "image", "source": source}
            return {"type": "image", "source": {"type": "url", "url": url}}
    if kind in ("image", "document", "tool_result", "tool_use"):
        return dict(part)  # already a Messages API block
    return {"type": "text", "text": text_of(part)}


def _text_blocks(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}] if text.strip() else []


def _apply_options(body: dict[str, Any], options: CompletionOptions) -> None:
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if options.stop:
        body["stop_sequences"] = list(options.stop)
    # `extra` wins (e.g. {"thinking": {...}}); a None value removes a field.
    for key, value in options.extra.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _prompt_chars(body: dict[str, Any]) -> int:
    return (
        len(json.dumps(body["messages"]))
        + len(body.get("system", ""))
        + len(json.dumps(body.get("tools", [])))
    )


# --------------------------------------------------------------------------- responses


class _EventReader:
    """Turns Messages API stream events into StreamChunks and remembers what
    the closing chunk needs (usage, whether the message ended properly)."""

    def __init__(self, http: HttpClient, model: str, *, prompt_chars: int) -> None:
        self.http = http
        self.model = model
        self.prompt_chars = prompt_chars
        self.output_chars = 0
        self.done = False  # message_stop seen
        self.stop_reason: str | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        # content-block index -> 0-based tool-call index, and per-tool state
        self._tools: dict[int, int] = {}
        self._tool_input: dict[int, Any] = {}  # the input given in content_block_start
        self._tool_streamed: set[int] = set()  # blocks that had input_json_delta

    def _payload(self, event: SSEEvent) -> dict[str, Any]:
        try:
            payload = json.loads(event.data)
        except ValueError as exc:
            raise self.http.error(
                "invalid_response",
                f"a {event.event!r} event is not JSON ({exc}): {event.data[:200]!r}",
                model=self.model,
            ) from None
        if not isinstance(payload, dict):
            raise self.http.error(
                "invalid_response",
                f"a {event.event!r} event is not an object: {event.data[:200]!r}",
                model=self.model,
            )
        return payload

    def feed(self, event: SSEEvent) -> StreamChunk | None:
        if event.event == "ping":
            return None
        payload = self._payload(event)
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
            raise self.http.error(
                "invalid_response",
                f"a {payload.get('type')} event without a block index: {payload!r:.200}",
                model=self.model,
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
                raise self.http.error(
                    "invalid_response",
                    f"input_json_delta for content block {index}, which is not a tool_use block",
                    model=self.model,
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
        return self.http.error_from_body(payload, model=self.model, status=status)

    def finish(self) -> list[StreamChunk]:
        """The closing usage chunk; raises if the stream was cut short."""
        if not (self.done or self.stop_reason):
            raise self.http.error(
                "connection",
                "the server ended the stream before the message finished "
                "(no message_delta stop_reason, no message_stop)",
                model=self.model,
            )
        prompt, output = self.input_tokens, self.output_tokens
        if prompt is None and output is None:
            logger.debug(
                "anthropic: %s sent no usage; estimating tokens as characters/4",
                self.http.base_url,
            )
        if prompt is None:
            prompt = -(-self.prompt_chars // 4)
        if output is None:
            output = -(-self.output_chars // 4)
        return [
            StreamChunk(
                usage=Usage(input_tokens=prompt, output_tokens=output, total_tokens=prompt + output)
            )
        ]
