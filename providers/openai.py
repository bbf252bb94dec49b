"""The `openai` provider: any OpenAI-compatible chat completions endpoint
(OpenAI, vLLM, llama.cpp server, LM Studio, LiteLLM, Ollama's /v1).

baseUrl includes /v1, as OpenAI's SDKs have it. No key is fine for local
servers: then no Authorization header is sent at all.

Fill in the middle (`POST /completions` with `suffix`) is decided by asking
the server, not by the model's name (fim_probe.py): `providerOptions.fim`
true/false overrides; else llama.cpp's `GET /props` says "no"; else the
first inline request is the probe, and a server that turns it down gets
the chat prompt for that request (FimUnsupported) and from then on.

The chat wire format (messages, tools, chat chunks) is in openai_chat.py,
imported by the first chat request: the FIM path, which inline completion
takes on every keystroke, imports no pydantic model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from agentls.core.errors import FinishReason, ModelError
from agentls.core.provider import (
    CompletionOptions,
    FimChunk,
    FimPlan,
    FimRequest,
    FimUnsupported,
    FimUsage,
    ProviderConfig,
    ToolSpec,
)

from .fim_probe import (
    PROBE_MAX_TOKENS,
    PROPS_TIMEOUT,
    FimSupport,
    name_family,
    props_say_llama_cpp,
    server_root,
    tokenizer_family,
)
from .fim_templates import PROBE_PREFIX, PROBE_SUFFIX, FimTokens, build_fim_prompt
from .http import HttpClient
from .http_provider import HttpProvider

if TYPE_CHECKING:
    from agentls.core.models import ModelInfo, ProviderInfo, StreamChunk
    from agentls.core.session_types import Message

__all__ = ["OpenAIProvider"]

logger = logging.getLogger("agentls.providers.openai")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_MODEL = "gpt-4o-mini"
# /models says nothing about sizes on most servers; these are deliberately
# small so that prompt budgets never overflow a local server's context.
DEFAULT_CONTEXT_WINDOW = 8192
DEFAULT_MAX_OUTPUT_TOKENS = 4096

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}

_Chunk = TypeVar("_Chunk")

_HINTS = {
    "not_found": "Model {model!r} or the endpoint does not exist at {base_url}: list the "
    "models the server offers (agentls/models, i.e. GET {base_url}/models) and set `model` "
    "to one of them; baseUrl must include /v1.",
    "invalid_response": "Check that baseUrl ({base_url}) is an OpenAI-compatible API "
    "ending in /v1.",
}


class OpenAIProvider(HttpProvider):
    name = "openai"
    default_base_url = DEFAULT_BASE_URL
    default_api_key_env = DEFAULT_API_KEY_ENV
    default_model_id = DEFAULT_MODEL
    hints = _HINTS

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        self._llama_cpp: bool | None = None  # GET /props said so; None: not asked yet
        # The server's tokenizer route; "": none answered; None: not asked yet
        self._tokenize_route: str | None = None
        self.fim = FimSupport("openai", config.options.get("fim"),
                              suffix_blocked=self._fim_suffix_blocked, probe=self._fim_probe,
                              find_tokens=self._fim_tokens)

    # -- chat ----------------------------------------------------------------
    async def _stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None,
        options: CompletionOptions,
    ) -> AsyncIterator[StreamChunk]:
        from .openai_chat import ChatChunkReader, prompt_chars, to_openai_messages, to_openai_tools

        model = options.model or self.default_model
        body: dict[str, Any] = {
            "model": model,
            "messages": to_openai_messages(messages, model=model),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = to_openai_tools(tools)
        _apply_options(body, options)
        reader = ChatChunkReader(self._http, model, prompt_chars=prompt_chars(body))
        async with self._http.stream_sse(
            "POST", "/chat/completions", model=model, body=body
        ) as events:
            async for chunk in reader.chunks(events, reader.chat_chunk):
                yield chunk
        yield reader.usage_chunk()

    # -- fill in the middle ---------------------------------------------------
    def model_supports_fim(self, model: str | None = None) -> bool:
        """Without asking: the override, else what the server showed (False
        until found out; see fim_supported)."""
        plan = self.fim.known(model or self.default_model)
        return plan is not None and plan.form in ("suffix", "template")

    async def fim_supported(self, model: str | None = None) -> bool:
        """Whether inline completion should send the model raw completion
        (FIM, template or continuation) rather than chat prompts; found out
        once per model (fim_probe.py)."""
        return (await self.fim_plan(model)).form != "none"

    async def fim_plan(self, model: str | None = None) -> FimPlan:
        """How FIM requests for the model are sent, and why."""
        return await self.fim.plan(model or self.default_model)

    def status_report(self) -> dict[str, Any]:
        return {"fim": self.fim.status()}

    async def _fim_suffix_blocked(self, model: str) -> str | None:
        if self._llama_cpp is None:
            self._llama_cpp = await props_say_llama_cpp(self._http)
        if self._llama_cpp:
            return "llama.cpp's server (GET /props) takes no `suffix` on /v1/completions"
        return None

    async def _fim_probe(self, model: str) -> str:
        """The known-answer probe through `suffix` (not retried: a failure is an answer)."""
        body = {"model": model, "prompt": PROBE_PREFIX, "suffix": PROBE_SUFFIX,
                "max_tokens": PROBE_MAX_TOKENS, "temperature": 0, "stream": False}
        payload = await self._http.request_json("POST", "/completions", model=model, body=body,
                                                max_attempts=1)
        choices = payload.get("choices") if isinstance(payload, dict) else None
        first = choices[0] if isinstance(choices, list) and choices else None
        text = first.get("text") if isinstance(first, dict) else None
        return text if isinstance(text, str) else ""

    async def _fim_tokens(self, model: str) -> tuple[FimTokens | None, str]:
        """The model's FIM family from the server's tokenizer (llama.cpp
        and vLLM /tokenize, llama-cpp-python /extras/tokenize), else its name."""
        root = server_root(self._http.base_url)
        if self._tokenize_route == "":
            return name_family(model)
        routes = ([self._tokenize_route] if self._tokenize_route
                  else [root + "/tokenize", root + "/extras/tokenize"])
        for route in routes:

            async def count(text: str, route: str = route) -> int | None:
                return await self._token_count(route, model, text)

            tokens, answered = await tokenizer_family(count)
            if answered:
                self._tokenize_route = route
                where = route.removeprefix(root)
                return tokens, (f"the server's tokenizer ({where})" if tokens else
                                f"the server's tokenizer ({where}) has no FIM tokens")
        self._tokenize_route = ""
        return name_family(model)

    async def _token_count(self, url: str, model: str, text: str) -> int | None:
        # llama.cpp reads `content`, vLLM `prompt`, llama-cpp-python `input`;
        # special tokens are parsed as the completion path parses them.
        body = {"model": model, "content": text, "prompt": text, "input": text,
                "add_special": False, "add_special_tokens": False, "parse_special": True}
        try:
            payload = await asyncio.wait_for(self._http.request_json(
                "POST", url, model=model, body=body, max_attempts=1), PROPS_TIMEOUT)
        except (ModelError, TimeoutError):
            return None
        tokens = payload.get("tokens") if isinstance(payload, dict) else None
        return len(tokens) if isinstance(tokens, list) else None

    async def _stream_fim(self, request: FimRequest) -> AsyncIterator[FimChunk]:
        options = request.options
        model = options.model or self.default_model
        plan = await self.fim.plan(model)
        if plan.form == "none" and self.fim.override is None:
            raise FimUnsupported(f"openai: {self._http.base_url} has no raw completion "
                                 f"for {model}: {plan.why}", model=model, code="bad_request")
        body: dict[str, Any] = {"model": model, "stream": True,
                                "stream_options": {"include_usage": True}}
        tokens = self.fim.tokens(model)
        stop = options.stop
        if not request.suffix or plan.form in ("continuation", "none"):
            body["prompt"] = request.prefix
        elif plan.form == "template" and tokens is not None:
            body["prompt"] = build_fim_prompt(tokens, request.prefix, request.suffix)
            stop = stop + tuple(s for s in tokens.stops if s not in stop)
        else:
            body["prompt"] = request.prefix
            body["suffix"] = request.suffix
        _apply_options(body, dataclasses.replace(options, stop=stop))
        reader = SseChunkReader(self._http, model,
                                prompt_chars=len(request.prefix + request.suffix))
        async with self._http.stream_sse("POST", "/completions", model=model,
                                         body=body) as events:
            async for chunk in reader.chunks(events, reader.text_chunk):
                yield chunk
        yield FimChunk(usage=FimUsage(*reader.token_counts()))

    # -- metadata ----------------------------------------------------------------
    async def list_models(self) -> list[ModelInfo]:
        from agentls.core.models import ModelInfo

        payload = await self._http.request_json("GET", "/models", model=self.default_model)
        entries = payload.get("data") if isinstance(payload, dict) else payload
        if not isinstance(entries, list):
            raise self._http.error(
                "invalid_response", "GET /models returned no `data` list", model=self.default_model
            )
        models = []
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                continue
            model_id = entry["id"]
            # vLLM reports max_model_len; some proxies context_length/context_window.
            window = next(
                (
                    entry[key]
                    for key in ("max_model_len", "context_length", "context_window")
                    if isinstance(entry.get(key), int)
                ),
                DEFAULT_CONTEXT_WINDOW,
            )
            models.append(
                ModelInfo(
                    id=model_id,
                    display_name=model_id,
                    context_window=window,
                    max_output_tokens=min(DEFAULT_MAX_OUTPUT_TOKENS, window),
                    capabilities=self._capabilities(model_id),
                )
            )
        return sorted(models, key=lambda m: m.id)

    def get_info(self) -> ProviderInfo:
        from agentls.core.models import ConfigField, ProviderInfo

        env = self._http.api_key_env or DEFAULT_API_KEY_ENV
        return ProviderInfo(
            id="openai",
            display_name="OpenAI-compatible",
            credential_env_vars=[env],
            capabilities=self._capabilities(self.default_model),
            defaults={"model": self.default_model, "base_url": self._http.base_url},
            config_fields=[
                ConfigField(
                    id="baseUrl",
                    display_name="Base URL",
                    prompt="Endpoint including /v1 (e.g. http://127.0.0.1:8000/v1 for vLLM)",
                    required=False,
                    default=DEFAULT_BASE_URL,
                ),
                ConfigField(
                    id="apiKeyEnv",
                    display_name="API key variable",
                    prompt="Name of the environment variable holding the API key",
                    required=False,
                    default=DEFAULT_API_KEY_ENV,
                ),
                ConfigField(
                    id="apiKey",
                    display_name="API key",
                    field_type="secret",
                    prompt="Not needed for local servers",
                    env_var=env,
                    required=False,
                ),
                ConfigField(
                    id="model",
                    display_name="Model",
                    prompt="Model id as the server names it (see agentls/models)",
                    required=False,
                    default=DEFAULT_MODEL,
                ),
            ],
        )

    def _capabilities(self, model: str) -> list[str]:
        return ["streaming", "tools", *(["fim"] if self.model_supports_fim(model) else [])]


# --------------------------------------------------------------------------- requests


def _apply_options(body: dict[str, Any], options: CompletionOptions) -> None:
    if options.max_tokens is not None:
        body["max_tokens"] = options.max_tokens
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if options.stop:
        body["stop"] = list(options.stop)
    # `extra` wins; a None value removes a field a server chokes on
    # (e.g. {"stream_options": None} for servers that reject it).
    for key, value in options.extra.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value


# --------------------------------------------------------------------------- responses


class SseChunkReader:
    """Reads a stream's SSE payloads: errors sent in the stream, the usage
    counts, whether the stream ended properly. `text_chunk` decodes the
    /completions (FIM) stream; openai_chat.ChatChunkReader adds the chat's."""

    def __init__(self, http: HttpClient, model: str, *, prompt_chars: int) -> None:
        self.http = http
        self.model = model
        self.prompt_chars = prompt_chars
        self.output_chars = 0
        self.done = False
        self.finished = False
        # (prompt_tokens, completion_tokens, total_tokens) as the server said
        self.usage: tuple[int, int, int] | None = None
        self.saw_tool_calls = False

    async def chunks(
        self, events: AsyncIterator[Any], decode: Callable[[str], _Chunk | None]
    ) -> AsyncIterator[_Chunk]:
        """The decoded chunks of an SSE stream up to its `[DONE]`; what
        follows is read and dropped so the connection can be reused."""
        async for event in events:
            if self.done:
                continue
            if event.data.strip() == "[DONE]":
                self.done = True
                continue
            chunk = decode(event.data)
            if chunk is not None:
                yield chunk

    def payload(self, data: str) -> dict[str, Any]:
        try:
            payload = json.loads(data)
        except ValueError as exc:
            raise self.http.error(
                "invalid_response",
                f"a stream chunk is not JSON ({exc}): {data[:200]!r}",
                model=self.model,
            ) from None
        if not isinstance(payload, dict):
            raise self.http.error(
                "invalid_response",
                f"a stream chunk is not an object: {data[:200]!r}",
                model=self.model,
            )
        if payload.get("error"):  # vLLM, LiteLLM and others report failures in-stream
            raise self.http.error_from_body(payload, model=self.model, status=200)
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
            raise self.http.error(
                "connection",
                "the server ended the stream before it finished (no finish_reason, no [DONE])",
                model=self.model,
            )
        if self.usage is not None:
            return self.usage
        prompt, output = -(-self.prompt_chars // 4), -(-self.output_chars // 4)
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
