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
takes on every keystroke, imports no pydantic model. What both streams
share (errors sent in the stream, usage, finish reasons, the FIM chunks)
is read by openai_stream.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentls.core.provider.contract import (
    CompletionOptions,
    FimChunk,
    FimPlan,
    FimRequest,
    FimUnsupported,
    FimUsage,
    ProviderConfig,
    ToolSpec,
)
from agentls.core.support.loopback import is_loopback_url
from agentls.core.types.errors import ModelError
from agentls.providers.fim.budget import own_engine_budgets
from agentls.providers.fim.probe import (
    PROBE_MAX_TOKENS,
    PROPS_TIMEOUT,
    FimSupport,
    name_family,
    props_say_llama_cpp,
    server_root,
    tokenizer_family,
)
from agentls.providers.fim.templates import PROBE_PREFIX, PROBE_SUFFIX, FimTokens, build_fim_prompt
from agentls.providers.http.provider import HttpProvider, apply_extra
from agentls.providers.openai.stream import SseChunkReader

if TYPE_CHECKING:
    from agentls.core.types.conversation import Message
    from agentls.core.types.messages import ModelInfo, ProviderInfo, StreamChunk

__all__ = ["OpenAIProvider"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_MODEL = "gpt-4o-mini"
# /models says nothing about sizes on most servers; these are deliberately
# small so that prompt budgets never overflow a local server's context.
DEFAULT_CONTEXT_WINDOW = 8192
DEFAULT_MAX_OUTPUT_TOKENS = 4096

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
    # Warmable only for a server on this machine (set in __init__): the
    # cursor's prompt is then evaluated ahead; a paid API would bill each move.
    warm: Callable[[str | None, str], Awaitable[None]]

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        if is_loopback_url(self._http.base_url):
            self.warm = self._warm_own_engine
            # Inline completion sends an engine of the user's own less text
            # (providers/fim/budget.py): on a CPU the prompt is the wait.
            self.preferred_prefix_chars, self.preferred_suffix_chars = own_engine_budgets(
                "openai", config.options)
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
        from agentls.providers.openai.chat import (
            ChatChunkReader,
            prompt_chars,
            to_openai_messages,
            to_openai_tools,
        )

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
            async for chunk in reader.sse_chunks(events, reader.chat_chunk):
                yield chunk
        yield reader.usage_chunk()

    async def _warm_own_engine(self, model: str | None, role: str) -> None:
        """Warmable: the server holds its model already; what the first
        keystroke would still wait for is how FIM is sent (GET /props,
        /tokenize, the probe), found out now."""
        if role == "completion":
            await self.fim.plan(model or self.default_model)

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
            async for chunk in reader.sse_chunks(events, reader.text_chunk):
                yield chunk
        yield FimChunk(usage=FimUsage(*reader.token_counts()))

    # -- metadata ----------------------------------------------------------------
    async def list_models(self) -> list[ModelInfo]:
        from agentls.core.types.messages import ModelInfo

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
        from agentls.core.types.messages import ConfigField, ProviderInfo

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
    apply_extra(body, options.extra)
