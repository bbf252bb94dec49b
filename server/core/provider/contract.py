"""The one provider contract (docs/architecture.md, "One provider contract").

Every model call in agentls goes through `Provider`: async `complete()` and
`stream()` over core `Message`s, `get_info()`, `list_models()` and
cancellation by request id. The agent_core ProviderPlugin protocol and
autogen's ChatCompletionClient are adapters over this contract.

`BaseProvider` supplies the mechanics every provider shares: request-id
tracking, cancellation that reaches the in-flight call (the task awaiting the
HTTP stream is cancelled, so the connection closes), the awaitable-or-iterable
`ChunkStream` (chunk_stream.py), and `complete()` built from `stream()`
(stream_collect.py).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

# ChunkStream (chunk_stream.py) and the stream's fold (stream_collect.py) are
# part of this contract; importable from here as they always were.
from agentls.core.provider.chunk_stream import ActiveRequests, ChunkStream
from agentls.core.provider.stream_collect import collect_stream
from agentls.core.types.errors import FinishReason, ModelError

if TYPE_CHECKING:
    # The pydantic models (core/types/) are imported where they are
    # built, not here: the keystroke path (FIM through this module) must not
    # import pydantic (~75 ms and ~6 MiB of the first completion).
    from agentls.core.types.conversation import Message
    from agentls.core.types.messages import ModelInfo, ModelResponse, ProviderInfo, StreamChunk

__all__ = [
    "BaseProvider",
    "CompletionOptions",
    "FimChoice",
    "FimChunk",
    "FimForm",
    "FimPlan",
    "FimRequest",
    "FimUnsupported",
    "FimUsage",
    "Provider",
    "ProviderConfig",
    "ProviderFactory",
    "ToolSpec",
]

# A tool offered to the model, in the flat form every provider translates:
# {"name": str, "description": str, "parameters": <JSON schema object>}.
ToolSpec = dict[str, Any]


@dataclass(frozen=True)
class ProviderConfig:
    """What a provider factory receives (built from AgentlsSettings).

    The API key itself is never here: providers read it from the environment
    variable `api_key_env` names, at call time, so it never lands in settings,
    logs or sessions.
    """

    name: str
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    request_timeout: float = 60.0
    connect_timeout: float = 10.0
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CompletionOptions:
    """Per-call knobs shared by all providers (None = provider/model default)."""

    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    stop: tuple[str, ...] = ()
    request_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Nobody is typing against it (next edits): a provider whose engine serves
    # one request at a time lets an inline completion go first (local).
    background: bool = False
    # The model's last answer in this turn failed (a call or the tests
    # failed, a note sent it back): a provider that samples near-greedily
    # samples wider, so the next answer is not the same one again (local).
    retry: bool = False


@dataclass(frozen=True)
class FimRequest:
    """A fill-in-the-middle request (inline completion with a FIM-capable model)."""

    prefix: str
    suffix: str
    options: CompletionOptions = CompletionOptions()


@dataclass(frozen=True, slots=True)
class FimUsage:
    """Token counts of a fill-in-the-middle stream (Usage's fields)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0


@dataclass(frozen=True, slots=True)
class FimChunk:
    """One piece of a fill-in-the-middle stream: what `stream_fim()` yields.

    StreamChunk's text fields without pydantic: an inline completion reads
    only the text, the finish reason and the usage, and building a pydantic
    model per chunk, with pydantic imported before the first completion, is
    what the keystroke path cannot afford. Consumers read only these three
    attributes, so a third-party provider that still yields StreamChunks
    from `_stream_fim` keeps working.
    """

    delta: str = ""
    finish_reason: FinishReason | None = None
    usage: FimUsage = FimUsage()


class FimUnsupported(ModelError):
    """stream_fim() learnt (before any text) that the server has no
    fill-in-the-middle for this model: the caller sends its chat prompt
    instead. Providers raise it only while finding out (a probe), never for
    a FIM the user forced with providerOptions.fim, so it is never a
    failure the user has to see."""


FimForm = Literal["suffix", "template", "continuation", "none"]


@dataclass(frozen=True, slots=True)
class FimPlan:
    """How a provider sends fill-in-the-middle requests for one model, and
    why (shown by agentls/status and `agentls check`):

    - "suffix": the engine's own FIM (`suffix` on the request), used only
      once a known-answer probe showed the engine honours the suffix;
    - "template": the model's FIM tokens laid out in a raw prompt (`family`
      names them), with the family's stop tokens;
    - "continuation": the prefix alone; the suffix serves post-processing;
    - "none": no raw completion for this model: chat prompts.
    """

    form: FimForm
    why: str
    family: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {"form": self.form, "family": self.family, "why": self.why}


class FimChoice:
    """Whether a feature sends a model fill-in-the-middle (continuation)
    prompts or chat prompts, remembered for the last provider and model:
    the per-keystroke paths ask on every request.

    A provider that asks its server says so through `fim_supported(model)`
    (ollama, openai), one that knows through `model_supports_fim(model)`;
    otherwise its capabilities decide, where "completion" (a raw
    continuation endpoint, such as the embedded model's) counts too: the FIM
    path, with the suffix used only by post-processing, beats asking a base
    model to chat. A FimUnsupported from the stream is `refused()`.
    """

    def __init__(self) -> None:
        self._known: tuple[Any, str | None, bool] | None = None

    async def decide(self, provider: Any, model: str | None) -> bool:
        known = self._known
        if known is not None and known[0] is provider and known[1] == model:
            return known[2]
        value = False
        if callable(getattr(provider, "stream_fim", None)):
            ask = getattr(provider, "fim_supported", None)
            check = getattr(provider, "model_supports_fim", None)
            if callable(ask):
                value = bool(await ask(model))
            elif callable(check):
                value = bool(check(model))
            else:
                capabilities = provider.get_info().capabilities
                value = "fim" in capabilities or "completion" in capabilities
        self._known = (provider, model, value)
        return value

    def refused(self, provider: Any, model: str | None) -> None:
        """The provider found out (its probe) that the server has no FIM for
        this model: chat prompts from now on."""
        self._known = (provider, model, False)


@runtime_checkable
class Provider(Protocol):
    """The canonical async provider contract."""

    name: str

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None = None,
        *,
        options: CompletionOptions | None = None,
    ) -> ChunkStream[StreamChunk]: ...

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None = None,
        *,
        options: CompletionOptions | None = None,
    ) -> ModelResponse: ...

    def get_info(self) -> ProviderInfo: ...

    async def list_models(self) -> list[ModelInfo]: ...

    def cancel_request(self, request_id: str) -> bool: ...

    async def aclose(self) -> None: ...


ProviderFactory = Callable[[ProviderConfig], Provider]


class BaseProvider:
    """Shared mechanics; subclasses implement `_stream()` (and `get_info`).

    Subclasses may override `complete()` when the backend has a cheaper
    non-streaming call; the default folds `stream()`.
    """

    name: str = "base"

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self._active = ActiveRequests()

    # -- to implement -------------------------------------------------------
    def _stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None,
        options: CompletionOptions,
    ) -> AsyncIterator[StreamChunk]:
        raise NotImplementedError

    def _stream_fim(self, request: FimRequest) -> AsyncIterator[FimChunk]:
        raise ModelError(
            f"Provider {self.name!r} has no fill-in-the-middle endpoint",
            model=request.options.model or self.default_model,
            code="bad_request",
        )

    def get_info(self) -> ProviderInfo:
        raise NotImplementedError

    async def list_models(self) -> list[ModelInfo]:
        return []

    # -- shared -------------------------------------------------------------
    @property
    def default_model(self) -> str:
        return self.config.model or ""

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None = None,
        *,
        options: CompletionOptions | None = None,
    ) -> ChunkStream[StreamChunk]:
        options = options or CompletionOptions()
        request_id = options.request_id or uuid.uuid4().hex
        return ChunkStream(
            self._stream(messages, tools, options), request_id=request_id, registry=self._active
        )

    @property
    def supports_fim(self) -> bool:
        """True when the provider (and its configured model) can do FIM."""
        return "fim" in self.get_info().capabilities

    def stream_fim(self, request: FimRequest) -> ChunkStream[FimChunk]:
        """Stream a fill-in-the-middle completion (prefix + suffix -> middle)."""
        request_id = request.options.request_id or uuid.uuid4().hex
        return ChunkStream(self._stream_fim(request), request_id=request_id, registry=self._active)

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None = None,
        *,
        options: CompletionOptions | None = None,
    ) -> ModelResponse:
        options = options or CompletionOptions()
        return await collect_stream(
            self.stream(messages, tools, options=options),
            model=options.model or self.default_model,
        )

    def cancel_request(self, request_id: str) -> bool:
        return self._active.cancel(request_id)

    @property
    def active_requests(self) -> int:
        return len(self._active)

    async def aclose(self) -> None:
        return None
