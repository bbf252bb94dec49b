"""autogen's ChatCompletionClient over any agentls Provider (autogen_core.models).

    client = AgentlsChatCompletionClient.from_settings(provider="openai", model="gpt-4o-mini")
    client = AgentlsChatCompletionClient(provider)      # or over a Provider object
    result = await client.create([UserMessage(content="Hi", source="user")])

`ChatCompletionClient` (the abstract protocol, autogen_core.models' members) is importable
from here too. There is no autogen dependency: the types come from
`agentls.core.compat.autogen_types`, which carry autogen's names and fields. Real autogen
message objects are accepted too (through their `model_dump()`), and a caller
that passes them gets autogen's own CreateResult back, so the client works as an
autogen-agentchat AssistantAgent's model_client (see providers/autogen/interop.py).
Both `create` and `create_stream` go through `provider.stream()`, the one code
path to a model.

How autogen's surface maps onto the provider contract:

- finish reason `tool_calls` -> `function_calls`; stop, length and content_filter
  as is; anything else -> `unknown`.
- tool calls -> `CreateResult.content` as list[FunctionCall] (arguments as a JSON
  string); reasoning, and any text said next to tool calls, -> `thought`.
- `json_output=True` -> `CompletionOptions.extra["response_format"] =
  {"type": "json_object"}`; a pydantic model class -> `{"type": "json_schema", ...}`
  (OpenAI's shape; providers that understand `response_format` forward it).
- `tool_choice` (autogen 0.5+): "auto" as is; "none" sends no tools; "required"
  or a Tool -> `CompletionOptions.extra["tool_choice"]` in OpenAI's shape.
- `extra_create_args`: model, max_tokens, temperature and stop fill the
  CompletionOptions fields; every other key goes to `CompletionOptions.extra`.
- a CancellationToken calls `provider.cancel_request(request_id)` and the call
  raises asyncio.CancelledError, as autogen's clients do.
- `count_tokens` estimates (characters / 4, plus 4 per message): agentls has no
  tokenizer for arbitrary providers. `remaining_tokens` needs the context window:
  `model_info["context_window"]` (an agentls extension key) or the provider's
  ModelInfo for the model, fetched on the first call or by `load_context_window()`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, cast

from pydantic import BaseModel

from agentls.core.compat.autogen_types import (
    CancellationToken,
    CreateResult,
    FinishReasons,
    FunctionCall,
    LLMMessage,
    ModelCapabilities,
    ModelFamily,
    ModelInfo,
    RequestUsage,
    validate_model_info,
)
from agentls.core.compat.chat_completion_client import ChatCompletionClient
from agentls.core.provider.chunk_stream import ChunkStream
from agentls.core.provider.contract import CompletionOptions, Provider, ToolSpec
from agentls.core.types.conversation import Message
from agentls.core.types.errors import ProviderRequestCancelled
from agentls.core.types.messages import StreamChunk, Usage
from agentls.providers.autogen.interop import (
    as_autogen_result,
    register_with_autogen,
    speaks_autogen,
)
from agentls.providers.autogen.messages import (
    content_text,
    is_image,
    to_core_messages,
    tool_spec,
)

__all__ = ["AgentlsChatCompletionClient", "guess_family"]

_NO_ARGS: Mapping[str, Any] = MappingProxyType({})
_OPTION_FIELDS = ("model", "max_tokens", "temperature")
_FINISH: dict[str, FinishReasons] = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content_filter",
    "tool_calls": "function_calls",
}


class AgentlsChatCompletionClient(ChatCompletionClient):
    """autogen's ChatCompletionClient surface over an agentls Provider."""

    @classmethod
    def from_settings(
        cls,
        *,
        provider: str,
        model: str | None = None,
        base_url: str | None = None,
        api_key_env: str | None = None,
        model_info: ModelInfo | None = None,
        **provider_options: Any,
    ) -> AgentlsChatCompletionClient:
        """A client over the provider plugin named `provider` (openai,
        anthropic, ollama, local, or any installed plugin), configured as in
        agentls' settings: `api_key_env` names the environment variable that
        holds the key (the key itself is never passed around), and the other
        keyword arguments are its providerOptions. Invalid settings raise
        AgentlsError saying what to change."""
        from agentls.app import build_agent
        from agentls.core.settings.schema import AgentlsSettings
        from agentls.core.types.errors import AgentlsError

        try:
            settings = AgentlsSettings(
                provider=provider, model=model, base_url=base_url, api_key_env=api_key_env,
                provider_options=provider_options,
            )
        except ValueError as exc:
            raise AgentlsError(f"Invalid model client settings: {exc}") from None
        # The agent's provider, made as the editor and the CLI make theirs.
        return cls(build_agent(settings).provider, model=model, model_info=model_info)

    def __init__(
        self,
        provider: Provider,
        *,
        model_info: ModelInfo | None = None,
        model: str | None = None,
    ) -> None:
        self._provider = provider
        self._model = model
        if model_info is None:
            model_info = _derive_model_info(provider, model)
        validate_model_info(model_info)
        self._model_info = model_info
        window = cast(Mapping[str, Any], model_info).get("context_window")
        self._context_window: int | None = int(window) if window else None
        self._window_looked_up = False
        self._actual = RequestUsage(prompt_tokens=0, completion_tokens=0)
        self._total = RequestUsage(prompt_tokens=0, completion_tokens=0)
        register_with_autogen(type(self))

    # -- the calls ------------------------------------------------------------
    async def create(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Any] = (),
        tool_choice: Any = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = _NO_ARGS,
        cancellation_token: CancellationToken | None = None,
    ) -> CreateResult:
        result: CreateResult | None = None
        async for item in self.create_stream(
            messages,
            tools=tools,
            tool_choice=tool_choice,
            json_output=json_output,
            extra_create_args=extra_create_args,
            cancellation_token=cancellation_token,
        ):
            if not isinstance(item, str):
                result = item
        assert result is not None  # create_stream always ends with one
        return result

    async def create_stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Any] = (),
        tool_choice: Any = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = _NO_ARGS,
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncGenerator[str | CreateResult, None]:
        """Yield text deltas, then exactly one CreateResult (autogen's
        class when the messages are autogen's)."""
        autogen_caller = speaks_autogen(messages)
        core = to_core_messages(messages)
        specs = [] if tool_choice == "none" else [tool_spec(t) for t in tools]
        self._check_request(core, specs, json_output)
        options = _options(self._model, json_output, extra_create_args)
        if specs and tool_choice != "auto":
            options = _with_tool_choice(options, tool_choice)
        if self._context_window is None and not self._window_looked_up:
            try:
                await self.load_context_window()
            except Exception:  # optional metadata must not fail the call itself
                pass
        if cancellation_token is not None and cancellation_token.is_cancelled():
            raise asyncio.CancelledError()

        stream = self._provider.stream(core, specs or None, options=options)
        link = _CancelLink(self._provider, stream, cancellation_token)
        text: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, list[str]] = {}  # index -> [id, name, arguments] as streamed
        usage = Usage()
        finish: str | None = None
        try:
            while (chunk := await link.read()) is not None:
                for delta in chunk.tool_call_deltas:
                    call = calls.setdefault(delta.index, ["", "", ""])
                    call[0] = delta.id or call[0]
                    call[1] = delta.name or call[1]
                    call[2] += delta.arguments
                if chunk.reasoning:
                    reasoning.append(chunk.reasoning)
                if chunk.usage.input_tokens or chunk.usage.output_tokens:
                    usage = chunk.usage
                if chunk.finish_reason is not None:
                    finish = chunk.finish_reason
                if chunk.delta:
                    text.append(chunk.delta)
                    yield chunk.delta
        finally:
            link.close()
            await stream.aclose()

        request_usage = RequestUsage(usage.input_tokens, usage.output_tokens)
        self._actual = _add(self._actual, request_usage)
        self._total = _add(self._total, request_usage)
        result = _result("".join(text), "".join(reasoning), calls, finish, request_usage)
        yield as_autogen_result(result) if autogen_caller else result

    def _check_request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        json_output: bool | type[BaseModel] | None,
    ) -> None:
        # The same refusals, with the same messages, as autogen's own clients.
        info = self._model_info
        if tools and not info["function_calling"]:
            raise ValueError("Model does not support function calling")
        if json_output is True and not info["json_output"]:
            raise ValueError("Model does not support JSON output.")
        if isinstance(json_output, type) and not info.get("structured_output", False):
            raise ValueError("Model does not support structured output.")
        if not info["vision"] and any(
            is_image(part)
            for m in messages
            if m.role == "user"
            for part in m.multipart_content or []
        ):
            raise ValueError("Model does not support vision and image was provided")

    # -- usage and budget -----------------------------------------------------
    def actual_usage(self) -> RequestUsage:
        return RequestUsage(self._actual.prompt_tokens, self._actual.completion_tokens)

    def total_usage(self) -> RequestUsage:
        return RequestUsage(self._total.prompt_tokens, self._total.completion_tokens)

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Any] = ()) -> int:
        core = to_core_messages(messages)
        chars = sum(len(content_text(m.content)) + len(json.dumps(m.tool_calls)) for m in core)
        chars += sum(len(json.dumps(tool_spec(t))) for t in tools)
        return chars // 4 + 4 * len(core)

    def remaining_tokens(
        self, messages: Sequence[LLMMessage], *, tools: Sequence[Any] = ()
    ) -> int:
        if self._context_window is None:
            raise ValueError(
                "The context window of this model is unknown: pass "
                "model_info={..., 'context_window': N}, or await load_context_window() "
                "(or make a first call) so the provider's ModelInfo is read."
            )
        return self._context_window - self.count_tokens(messages, tools=tools)

    async def load_context_window(self) -> int | None:
        """Read the context window from the provider's ModelInfo for this model."""
        if self._context_window is None:
            self._window_looked_up = True
            wanted = self._model or _default_model(self._provider)
            models = await self._provider.list_models()
            match = next((m for m in models if m.id == wanted), None)
            if match is None and len(models) == 1 and not wanted:
                match = models[0]
            if match is not None and match.context_window > 0:
                self._context_window = match.context_window
        return self._context_window

    # -- description and lifecycle --------------------------------------------
    @property
    def model_info(self) -> ModelInfo:
        return self._model_info

    @property
    def capabilities(self) -> ModelCapabilities:
        info = self._model_info
        return ModelCapabilities(
            vision=info["vision"],
            function_calling=info["function_calling"],
            json_output=info["json_output"],
        )

    async def close(self) -> None:
        await self._provider.aclose()


class _CancelLink:
    """Reads a provider stream so that a CancellationToken can stop it.

    The token fires `provider.cancel_request(request_id)`, which interrupts the
    read in flight; a provider that does not know the request (it has not
    started yet, or does not track ids) is stopped by cancelling the reading
    task instead. Either way the reader sees asyncio.CancelledError.
    """

    def __init__(
        self, provider: Provider, stream: ChunkStream[StreamChunk], token: CancellationToken | None
    ) -> None:
        self._provider = provider
        self._stream = stream
        self._loop = asyncio.get_running_loop()
        self._reader: asyncio.Task[Any] | None = None
        self._open = True
        self.cancelled = False
        if token is not None:
            token.add_callback(self._fire)

    async def read(self) -> StreamChunk | None:
        if self.cancelled:
            raise asyncio.CancelledError()
        self._reader = asyncio.current_task()
        try:
            return await self._stream.__anext__()
        except StopAsyncIteration:
            return None
        except ProviderRequestCancelled:
            raise asyncio.CancelledError() from None
        finally:
            self._reader = None

    def _fire(self) -> None:  # any thread: CancellationToken.cancel() runs us in place
        if not self._open:
            return
        self.cancelled = True
        try:
            on_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self._cancel()
        else:
            try:
                self._loop.call_soon_threadsafe(self._cancel)
            except RuntimeError:  # the loop is gone: nothing left to cancel
                pass

    def _cancel(self) -> None:
        if not self._open:
            return
        if not self._provider.cancel_request(self._stream.request_id) and self._reader:
            self._reader.cancel()

    def close(self) -> None:
        self._open = False  # token callbacks cannot be removed; they turn into no-ops


# -- request and result --------------------------------------------------------


def _options(
    model: str | None,
    json_output: bool | type[BaseModel] | None,
    extra_create_args: Mapping[str, Any],
) -> CompletionOptions:
    args = dict(extra_create_args)
    fields: dict[str, Any] = {k: args.pop(k) for k in _OPTION_FIELDS if k in args}
    fields.setdefault("model", model)
    if "stop" in args:
        stop = args.pop("stop")
        fields["stop"] = (stop,) if isinstance(stop, str) else tuple(stop or ())
    if json_output is True:
        args.setdefault("response_format", {"type": "json_object"})
    elif isinstance(json_output, type):
        args.setdefault(
            "response_format",
            {
                "type": "json_schema",
                "json_schema": {
                    "name": json_output.__name__,
                    "schema": json_output.model_json_schema(),
                    "strict": True,
                },
            },
        )
    return CompletionOptions(request_id=uuid.uuid4().hex, extra=args, **fields)


def _with_tool_choice(options: CompletionOptions, choice: Any) -> CompletionOptions:
    """autogen's tool_choice ("required" or a Tool) in OpenAI's request shape."""
    if choice == "required":
        wire: Any = "required"
    else:
        wire = {"type": "function", "function": {"name": tool_spec(choice)["name"]}}
    return dataclasses.replace(options, extra={**options.extra, "tool_choice": wire})


def _result(
    text: str,
    reasoning: str,
    calls: dict[int, list[str]],
    finish: str | None,
    usage: RequestUsage,
) -> CreateResult:
    # Arguments stay the string the model sent, as in autogen: a call with
    # broken JSON reaches the tool runner, which reports the error to the model.
    content = [
        FunctionCall(id=call_id or f"call_{i}", arguments=arguments or "{}", name=name)
        for i, (call_id, name, arguments) in sorted(calls.items())
    ]
    if content:
        thought = "\n".join(t for t in (reasoning, text) if t) or None
        return CreateResult(
            finish_reason="function_calls",
            content=content,
            usage=usage,
            cached=False,
            thought=thought,
        )
    return CreateResult(
        finish_reason=_FINISH.get(finish or "stop", "unknown"),
        content=text,
        usage=usage,
        cached=False,
        thought=reasoning or None,
    )


def _add(a: RequestUsage, b: RequestUsage) -> RequestUsage:
    return RequestUsage(
        a.prompt_tokens + b.prompt_tokens, a.completion_tokens + b.completion_tokens
    )


def _default_model(provider: Provider) -> str:
    return str(getattr(provider, "default_model", "") or "")


def _derive_model_info(provider: Provider, model: str | None) -> ModelInfo:
    """autogen ModelInfo from the provider's declared capabilities."""
    try:
        capabilities = set(provider.get_info().capabilities)
    except Exception:  # a provider without get_info: claim nothing
        capabilities = set()
    return ModelInfo(
        vision="vision" in capabilities,
        function_calling=bool({"tools", "function_calling"} & capabilities),
        json_output=bool({"json_output", "json"} & capabilities),
        family=guess_family(model or _default_model(provider)),
        structured_output="structured_output" in capabilities,
    )


_FAMILIES = sorted(
    (v for k, v in vars(ModelFamily).items() if k.isupper() and isinstance(v, str)),
    key=len,
    reverse=True,
)


def guess_family(model: str) -> str:
    """The longest ModelFamily constant the model id starts with ("gpt-4o-mini"
    -> gpt-4o, "gpt-4.1" -> gpt-41, "claude-3-5-sonnet-2024..." -> claude-3-5-sonnet)."""
    name = model.lower().rsplit("/", 1)[-1]
    # Dotless first: "gpt-4.1" must become gpt-41, not stop at gpt-4.
    for candidate in (name.replace(".", ""), name):
        for family in _FAMILIES:
            if family != ModelFamily.UNKNOWN and candidate.startswith(family):
                return family
    return str(ModelFamily.UNKNOWN)
