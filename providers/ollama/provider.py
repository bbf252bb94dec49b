"""The `ollama` provider: Ollama's native API.

    POST {base}/api/chat       chat, NDJSON stream (text, thinking, tool calls)
    POST {base}/api/generate   fill in the middle (`prompt` + `suffix`)
    POST {base}/api/show       a model's capabilities (is FIM possible?)
    GET  {base}/api/tags       list_models

baseUrl is the server root (default http://127.0.0.1:11434), without /v1;
Ollama's OpenAI-compatible /v1 is what the `openai` provider is for.

Ollama streams one JSON object per line. Text arrives in
`message.content` (chat) or `response` (generate), reasoning in
`message.thinking`, tool calls whole (arguments as an object, no id, usually
all in one line); the last line has `"done": true`, `done_reason` and the
token counts `prompt_eval_count` / `eval_count`. A failure after the 200
status is a line `{"error": "..."}`.

No API key by default (a local server). When apiKeyEnv is set (Ollama behind
an authenticating proxy), its value goes out as a bearer token.

Options, from ProviderConfig.options (providerOptions, snake_case or
camelCase): `fim` (true/false overrides what the server says, below),
`keep_alive` (sent with every request), `num_ctx` (sent in `options`, and
reported as the models' context window). Per call, CompletionOptions.extra
entries that are top-level /api/chat fields (keep_alive, think, format, ...)
go top-level; anything else goes into `options` (num_ctx, top_p, seed, ...);
a None value removes a field.

The chat wire format (messages, tools, /api/chat lines) is in
ollama_chat.py, imported by the first chat request: the FIM path, which
inline completion takes on every keystroke, imports no pydantic model.
What both streams share (errors, the `done` line, token counts, the FIM
chunks) is read by ollama_stream.py.

Fill in the middle is decided by asking the server, not by the model's
name (a `my-coder:latest` tag or a renamed base model would defeat any
name pattern): POST /api/show lists `capabilities`, and `insert` means the
model's template takes `suffix`. Servers older than `capabilities` (before
Ollama 0.6) still return the template, and a template using `.Suffix` is
the same thing. A server that answers neither, or not within
SHOW_TIMEOUT, gets chat prompts: a wrong "yes" sends `suffix` to a model
that ignores it, a wrong "no" only costs FIM quality. `providerOptions.fim`
(true/false) overrides the server. Answers are cached per model (at most
SHOW_CACHE_SIZE), and concurrent first requests share one /api/show call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from agentls.core.provider.contract import (
    CompletionOptions,
    FimChunk,
    FimPlan,
    FimRequest,
    ProviderConfig,
    ToolSpec,
)
from agentls.core.types.errors import ModelError
from agentls.providers.fim.probe import PROBE_MAX_TOKENS, FimSupport, name_family
from agentls.providers.fim.templates import (
    PROBE_PREFIX,
    PROBE_SUFFIX,
    FimTokens,
    build_fim_prompt,
    family_by_name,
    family_in_text,
)
from agentls.providers.http.provider import HttpProvider
from agentls.providers.ollama.stream import LineReader

if TYPE_CHECKING:
    from agentls.core.types.conversation import Message
    from agentls.core.types.messages import ModelInfo, ProviderInfo, StreamChunk

__all__ = ["OllamaProvider"]

logger = logging.getLogger("agentls.providers.ollama.provider")

DEFAULT_BASE_URL = "http://127.0.0.1:11434"
DEFAULT_MODEL = "qwen2.5-coder:1.5b"
# /api/tags says nothing about context sizes, and what counts is the server's
# num_ctx (Ollama's default is 4096 tokens; it silently truncates longer
# prompts), not the model's trained window. So models report num_ctx when
# providerOptions sets it (and then it is sent with every request), else
# Ollama's default, so prompt budgets never overflow it.
DEFAULT_CONTEXT_WINDOW = 4096
DEFAULT_MAX_OUTPUT_TOKENS = 2048

# /api/show is asked before the first inline completion of a model, so it
# must not hold that request up for long; a model already loaded answers in
# milliseconds.
SHOW_TIMEOUT = 2.0
SHOW_CACHE_SIZE = 64

# Top-level /api/chat and /api/generate fields; other `extra` keys are model
# options (num_ctx, top_p, seed, ...) and go under `options`.
_TOP_LEVEL = frozenset(
    {"keep_alive", "think", "format", "raw", "template", "system", "context", "images"}
)

_HINTS = {
    "not_found": "Model {model!r} is not on the Ollama server at {base_url}: run "
    "`ollama pull {model}` there, or set `model` to one it has (agentls/models, i.e. "
    "GET {base_url}/api/tags). baseUrl is the server root, without /v1.",
    "connection": "Check baseUrl ({base_url}) and that Ollama is running there (`ollama serve`).",
    "invalid_response": "Check that baseUrl ({base_url}) is an Ollama server root "
    "(without /v1; use provider `openai` for Ollama's /v1).",
    "auth": "The server (a proxy in front of Ollama?) refused the bearer token in "
    "{env}; check it, or set apiKeyEnv to the variable that holds the right one.",
    "auth_missing": "The server (a proxy in front of Ollama?) wants credentials: set "
    "apiKeyEnv to the name of an environment variable holding a bearer token "
    "(currently {env}).",
}


class OllamaProvider(HttpProvider):
    name = "ollama"
    default_base_url = DEFAULT_BASE_URL
    default_model_id = DEFAULT_MODEL
    hints = _HINTS

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        # model -> its /api/show capabilities (None: the server did not say)
        self._show: OrderedDict[str, frozenset[str] | None] = OrderedDict()
        self._show_pending: dict[str, asyncio.Future[frozenset[str] | None]] = {}
        # model -> its FIM tokens as /api/show shows them (template, names)
        self._show_tokens: dict[str, tuple[FimTokens | None, str] | None] = {}
        self.fim = FimSupport("ollama", config.options.get("fim"),
                              suffix_blocked=self._fim_suffix_blocked, probe=self._fim_probe,
                              find_tokens=self._fim_tokens)

    # -- chat ----------------------------------------------------------------
    async def _stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None,
        options: CompletionOptions,
    ) -> AsyncIterator[StreamChunk]:
        from agentls.providers.ollama.chat import (
            ChatLineReader,
            to_ollama_messages,
            to_ollama_tools,
        )

        model = options.model or self.default_model
        body: dict[str, Any] = {
            "model": model,
            "messages": to_ollama_messages(messages, model=model),
            "stream": True,
        }
        if tools:
            body["tools"] = to_ollama_tools(tools)
        self._apply_options(body, options)
        prompt_chars = len(json.dumps(body["messages"])) + len(json.dumps(body.get("tools", [])))
        reader = ChatLineReader(self._http, model, prompt_chars=prompt_chars)
        async with self._http.stream_ndjson("POST", "/api/chat", model=model, body=body) as lines:
            async for chunk in reader.chunks(lines, reader.chat_chunk):
                yield chunk
        yield reader.finish()

    # -- fill in the middle ---------------------------------------------------
    async def _stream_fim(self, request: FimRequest) -> AsyncIterator[FimChunk]:
        options = request.options
        model = options.model or self.default_model
        plan = await self.fim_plan(model)
        tokens = self.fim.tokens(model)
        body: dict[str, Any] = {"model": model, "stream": True}
        stop = options.stop
        if plan.form == "suffix" and request.suffix:
            # `suffix` needs the model's template, which raw skips
            body.update(prompt=request.prefix, suffix=request.suffix, raw=False)
        elif plan.form == "template" and tokens is not None and request.suffix:
            body.update(prompt=build_fim_prompt(tokens, request.prefix, request.suffix),
                        raw=True)
            stop = stop + tuple(s for s in tokens.stops if s not in stop)
        else:  # the prefix alone, as the model continues text (no chat template)
            body.update(prompt=request.prefix, raw=True)
        self._apply_options(body, dataclasses.replace(options, stop=stop))
        reader = LineReader(self._http, model, prompt_chars=len(request.prefix + request.suffix))
        async with self._http.stream_ndjson(
            "POST", "/api/generate", model=model, body=body
        ) as lines:
            async for chunk in reader.chunks(lines, reader.generate_chunk):
                yield chunk
        yield reader.fim_finish()

    async def fim_plan(self, model: str | None = None) -> FimPlan:
        """How FIM requests for the model are sent, and why (fim_probe.py):
        the model's own template with `suffix` when a known-answer probe
        shows it fills by the suffix, else its FIM tokens in a raw prompt
        (from its template, else its name), else the prefix alone. A server
        that does not answer /api/show gets chat prompts (asked again next
        time)."""
        model = model or self.default_model
        if self.fim.override is None and self.fim.known(model) is None:
            if await self.model_capabilities(model) is None:
                return FimPlan("none", f"{self._http.base_url}/api/show gave no answer for "
                               f"{model}: chat prompts")
        return await self.fim.plan(model)

    async def _fim_suffix_blocked(self, model: str) -> str | None:
        capabilities = await self.model_capabilities(model)
        if capabilities is None or "insert" not in capabilities:
            return "the model's template takes no suffix (/api/show lists no `insert`)"
        return None

    async def _fim_probe(self, model: str) -> str:
        """The known-answer probe through the model's template and `suffix`."""
        body = {"model": model, "prompt": PROBE_PREFIX, "suffix": PROBE_SUFFIX,
                "stream": False, "raw": False,
                "options": {"num_predict": PROBE_MAX_TOKENS, "temperature": 0}}
        payload = await self._http.request_json("POST", "/api/generate", model=model, body=body,
                                                max_attempts=1)
        text = payload.get("response") if isinstance(payload, dict) else None
        return text if isinstance(text, str) else ""

    async def _fim_tokens(self, model: str) -> tuple[FimTokens | None, str]:
        await self.model_capabilities(model)
        return self._show_tokens.get(model) or name_family(model)

    def _apply_options(self, body: dict[str, Any], options: CompletionOptions) -> None:
        model_options: dict[str, Any] = {}
        num_ctx = _int_option(self.config.options, "num_ctx", "numCtx")
        if num_ctx is not None:
            model_options["num_ctx"] = num_ctx
        keep_alive = self.config.options.get("keep_alive", self.config.options.get("keepAlive"))
        if keep_alive is not None:
            body["keep_alive"] = keep_alive
        if options.max_tokens is not None:
            model_options["num_predict"] = options.max_tokens
        if options.temperature is not None:
            model_options["temperature"] = options.temperature
        if options.stop:
            model_options["stop"] = list(options.stop)
        for key, value in options.extra.items():
            items: Iterable[tuple[str, Any]]
            if key == "options" and isinstance(value, dict):
                items = value.items()  # extra={"options": {...}}: merged into options
            elif key in _TOP_LEVEL:
                if value is None:
                    body.pop(key, None)
                else:
                    body[key] = value
                continue
            else:
                items = [(key, value)]
            for name, item in items:
                if item is None:
                    model_options.pop(name, None)
                else:
                    model_options[name] = item
        if model_options:
            body["options"] = model_options

    # -- capabilities (/api/show) --------------------------------------------------
    def model_supports_fim(self, model: str | None = None) -> bool:
        """Without waiting: the override, else what was found out (False
        until then; see fim_supported)."""
        model = model or self.default_model
        plan = self.fim.known(model)
        if plan is not None:
            return plan.form in ("suffix", "template")
        capabilities = self._show.get(model)  # not found out yet: what /api/show said
        return capabilities is not None and (
            "insert" in capabilities or self._show_tokens.get(model) is not None)

    async def fim_supported(self, model: str | None = None) -> bool:
        """Whether inline completion sends the model raw completion (FIM,
        template or continuation) rather than chat prompts."""
        return (await self.fim_plan(model)).form != "none"

    def status_report(self) -> dict[str, Any]:
        return {"fim": self.fim.status()}

    async def model_capabilities(self, model: str) -> frozenset[str] | None:
        """The model's capabilities per POST /api/show (cached), or None
        when the server does not say or does not answer within SHOW_TIMEOUT."""
        if model in self._show:
            self._show.move_to_end(model)
            return self._show[model]
        pending = self._show_pending.get(model)
        if pending is None:
            pending = asyncio.ensure_future(self._fetch_capabilities(model))
            self._show_pending[model] = pending
            pending.add_done_callback(lambda _: self._show_pending.pop(model, None))
        # shield: one caller giving up must not cancel the others' answer.
        return await asyncio.shield(pending)

    async def _fetch_capabilities(self, model: str) -> frozenset[str] | None:
        try:
            payload = await asyncio.wait_for(
                self._http.request_json("POST", "/api/show", model=model, body={"model": model}),
                SHOW_TIMEOUT,
            )
        except (ModelError, TimeoutError) as exc:
            # Not cached: a server that was down or busy is asked again next time.
            logger.info("ollama: /api/show for %s gave no answer (%s); no FIM", model, exc)
            return None
        capabilities = _capabilities_of(payload)
        self._show[model] = capabilities
        self._show_tokens[model] = _fim_tokens_of(payload, model)
        while len(self._show_tokens) > SHOW_CACHE_SIZE:
            self._show_tokens.pop(next(iter(self._show_tokens)))
        while len(self._show) > SHOW_CACHE_SIZE:
            self._show.popitem(last=False)
        return capabilities

    # -- metadata ----------------------------------------------------------------
    async def list_models(self) -> list[ModelInfo]:
        from agentls.core.types.messages import ModelInfo

        payload = await self._http.request_json("GET", "/api/tags", model=self.default_model)
        entries = payload.get("models") if isinstance(payload, dict) else None
        if not isinstance(entries, list):
            raise self._http.error(
                "invalid_response",
                "GET /api/tags returned no `models` list",
                model=self.default_model,
                url=self._http.url("/api/tags"),
            )
        window = self._context_window()
        names = [
            e.get("name") or e.get("model") for e in entries if isinstance(e, dict)
        ]
        # Ask /api/show about the listed models (all at once, each bounded by
        # SHOW_TIMEOUT), so their capabilities say which can do FIM.
        await asyncio.gather(*(
            self.model_capabilities(n) for n in names[:SHOW_CACHE_SIZE] if isinstance(n, str) and n
        ))
        models = []
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            name = entry.get("name") or entry.get("model")
            if not isinstance(name, str) or not name:
                continue
            raw_details = entry.get("details")
            details: dict[str, Any] = raw_details if isinstance(raw_details, dict) else {}
            size = details.get("parameter_size")
            defaults = {
                key: details[key]
                for key in ("family", "parameter_size", "quantization_level", "format")
                if isinstance(details.get(key), str) and details[key]
            }
            models.append(
                ModelInfo(
                    id=name,
                    display_name=f"{name} ({size})" if isinstance(size, str) and size else name,
                    context_window=window,
                    max_output_tokens=min(DEFAULT_MAX_OUTPUT_TOKENS, window),
                    capabilities=self._capabilities(name),
                    defaults=defaults,
                )
            )
        return sorted(models, key=lambda m: m.id)

    def get_info(self) -> ProviderInfo:
        from agentls.core.types.messages import ConfigField, ProviderInfo

        env = self._http.api_key_env
        return ProviderInfo(
            id="ollama",
            display_name="Ollama",
            credential_env_vars=[env] if env else [],
            capabilities=self._capabilities(self.default_model),
            defaults={
                "model": self.default_model,
                "base_url": self._http.base_url,
                "context_window": self._context_window(),
            },
            config_fields=[
                ConfigField(
                    id="baseUrl",
                    display_name="Base URL",
                    prompt="Ollama server root, without /v1 (e.g. http://127.0.0.1:11434)",
                    required=False,
                    default=DEFAULT_BASE_URL,
                ),
                ConfigField(
                    id="model",
                    display_name="Model",
                    prompt="Model name as `ollama list` shows it (pull it first)",
                    required=False,
                    default=DEFAULT_MODEL,
                ),
                ConfigField(
                    id="apiKeyEnv",
                    display_name="Bearer token variable",
                    prompt="Only for a proxy in front of Ollama: the environment variable "
                    "holding its bearer token",
                    required=False,
                ),
            ],
        )

    def _context_window(self) -> int:
        return _int_option(self.config.options, "num_ctx", "numCtx") or DEFAULT_CONTEXT_WINDOW

    def _capabilities(self, model: str) -> list[str]:
        return ["streaming", "tools", *(["fim"] if self.model_supports_fim(model) else [])]


def _capabilities_of(payload: Any) -> frozenset[str] | None:
    """Capabilities from an /api/show body: its `capabilities` list, else
    (servers before Ollama 0.6) `insert` when the template uses `.Suffix`."""
    if not isinstance(payload, dict):
        return None
    listed = payload.get("capabilities")
    if isinstance(listed, list):
        return frozenset(c for c in listed if isinstance(c, str))
    template = payload.get("template")
    if isinstance(template, str) and template:
        return frozenset({"completion", *(["insert"] if ".Suffix" in template else [])})
    return None


def _fim_tokens_of(payload: Any, model: str) -> tuple[FimTokens | None, str] | None:
    """The FIM family an /api/show body shows: FIM tokens in the model's
    template, else a code model's name (the tag, general.basename), else None."""
    if not isinstance(payload, dict):
        return None
    template = payload.get("template")
    tokens = family_in_text(template) if isinstance(template, str) else None
    if tokens is not None:
        return tokens, "the model's template (/api/show)"
    info = payload.get("model_info")
    names = [model, *(str(info.get(key) or "") for key in ("general.basename", "general.name"))
             ] if isinstance(info, dict) else [model]
    tokens = family_by_name(*names)
    return (tokens, "from the model's name") if tokens else None


def _int_option(options: dict[str, Any], snake: str, camel: str) -> int | None:
    value = options.get(snake, options.get(camel))
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None
