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

The request conversion is in anthropic_messages.py, the stream's events in
anthropic_stream.py; this module is the provider: headers, limits, models.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from agentls.core.provider.contract import CompletionOptions, ProviderConfig, ToolSpec
from agentls.core.types.conversation import Message
from agentls.core.types.messages import ConfigField, ModelInfo, ProviderInfo, StreamChunk
from agentls.providers.anthropic.messages import (
    apply_options,
    prompt_chars,
    to_anthropic_messages,
    to_anthropic_tools,
    used_tools,
)
from agentls.providers.anthropic.stream import AnthropicEventReader
from agentls.providers.http.provider import HttpProvider

__all__ = ["AnthropicProvider", "model_limits"]

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
        elif used := used_tools(converted):
            # The API refuses tool_use/tool_result blocks in a request that
            # defines no tools; a turn may offer none (file-blocks with files
            # attached): declare those the history used, and allow no call.
            body["tools"] = [{"name": name, "input_schema": {"type": "object"}}
                             for name in used]
            body["tool_choice"] = {"type": "none"}
        apply_options(body, options)
        reader = AnthropicEventReader(self._http, model, prompt_chars=prompt_chars(body))
        async with self._http.stream_sse(
            "POST", "/v1/messages", model=model, body=body, headers=self._headers()
        ) as events:
            async for chunk in reader.chunks(events, reader.feed):
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
