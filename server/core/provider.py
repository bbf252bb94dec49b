"""The one provider contract (ARCHITECTURE.md, "One provider contract").

Every model call in agentls goes through `Provider`: async `complete()` and
`stream()` over core `Message`s, `get_info()`, `list_models()` and
cancellation by request id. The agent_core ProviderPlugin protocol and
autogen's ChatCompletionClient are adapters over this contract.

`BaseProvider` supplies the mechanics every provider shares: request-id
tracking, cancellation that reaches the in-flight call (the task awaiting the
HTTP stream is cancelled, so the connection closes), the awaitable-or-iterable
`ChunkStream`, and `complete()` built from `stream()`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

from .errors import FinishReason, ModelError, ProviderRequestCancelled

if TYPE_CHECKING:
    # The pydantic models (seeds 000, 001, 003) are imported where they are
    # built, not here: the keystroke path (FIM through this module) must not
    # import pydantic (~75 ms and ~6 MiB of the first completion).
    from .models import ModelInfo, ModelResponse, ProviderInfo, StreamChunk, ToolCall
    from .session_types import Message

__all__ = [
    "BaseProvider",
    "ChunkStream",
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
    "ToolCallAccumulator",
    "ToolSpec",
    "collect_stream",
]

log = logging.getLogger("agentls.provider")

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

ChunkT = TypeVar("ChunkT")


class ChunkStream(Generic[ChunkT]):
    """An async iterator of chunks (StreamChunks from `stream()`, FimChunks
    from `stream_fim()`) that is also awaitable.

    orbiter's documentation iterates `async for c in await provider.stream(...)`
    while most code writes `async for c in provider.stream(...)`; both work.
    Cancellation by request id raises ProviderRequestCancelled in the consumer.
    """

    def __init__(
        self,
        source: AsyncIterator[ChunkT],
        *,
        request_id: str,
        registry: _ActiveRequests | None = None,
    ) -> None:
        self._source = source
        self.request_id = request_id
        self._registry = registry
        self._cancel_requested = False
        self._consumer: asyncio.Task[Any] | None = None
        self._reading = False  # the consumer is parked inside __anext__
        self._done = False

    def __await__(self) -> Generator[Any, None, ChunkStream[ChunkT]]:
        if False:  # pragma: no cover - makes this a generator function
            yield
        return self

    def __aiter__(self) -> ChunkStream[ChunkT]:
        return self

    async def __anext__(self) -> ChunkT:
        if self._cancel_requested:
            await self._finish()
            raise ProviderRequestCancelled(self.request_id)
        if self._done:
            raise StopAsyncIteration
        if self._consumer is None:
            self._consumer = asyncio.current_task()
            if self._registry is not None:
                self._registry.add(self.request_id, self)
        self._reading = True
        try:
            return await self._source.__anext__()
        except StopAsyncIteration:
            await self._finish()
            raise
        except asyncio.CancelledError:
            if self._cancel_requested and self._consumer is not None:
                # Our own cancel_request(): turn the task cancellation back
                # into an ordinary exception for the consumer.
                self._consumer.uncancel()
                await self._finish()
                raise ProviderRequestCancelled(self.request_id) from None
            await self._finish()
            raise
        except (ModelError, ProviderRequestCancelled):
            await self._finish()
            raise
        except Exception as exc:
            # The contract is "providers raise ModelError". A chunk a decoder
            # did not expect (`"index": "x"`, a number where text belongs)
            # raised TypeError/ValueError/ValidationError instead, which
            # escaped the turn loop as an internal error and left the session
            # marked running. Whatever the provider raised, the caller gets a
            # ModelError saying what broke; the traceback goes to the log.
            await self._finish()
            log.warning("Stream %s failed reading the response", self.request_id, exc_info=True)
            raise ModelError(
                f"The model's response could not be read ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:300] if str(exc) else 'no details'}).",
                code="invalid_response",
            ) from exc
        except BaseException:
            await self._finish()
            raise
        finally:
            self._reading = False

    def cancel(self) -> bool:
        """Cancel the in-flight read; the consumer sees ProviderRequestCancelled
        from its current (or next) read, and the source stream is closed."""
        if self._done or self._cancel_requested:
            return False
        self._cancel_requested = True
        # Only interrupt the consumer while it waits on us: a cancellation
        # landing elsewhere in its code would not be ours to translate.
        if self._reading and self._consumer is not None:
            self._consumer.cancel()
        return True

    async def aclose(self) -> None:
        await self._finish()

    async def _finish(self) -> None:
        if self._done and self._registry is None:
            return
        self._done = True
        if self._registry is not None:
            self._registry.discard(self.request_id, self)
            self._registry = None
        aclose = getattr(self._source, "aclose", None)
        if aclose is not None:
            try:
                await aclose()
            except Exception:  # closing a broken stream must not mask the real error
                pass


class _ActiveRequests:
    """Request id -> in-flight stream or task, for cancel_request()."""

    def __init__(self) -> None:
        self._streams: dict[str, ChunkStream[Any]] = {}
        self._tasks: dict[str, tuple[asyncio.Task[Any], list[bool]]] = {}

    def add(self, request_id: str, stream: ChunkStream[Any]) -> None:
        self._streams[request_id] = stream

    def discard(self, request_id: str, stream: ChunkStream[Any]) -> None:
        if self._streams.get(request_id) is stream:
            del self._streams[request_id]

    @contextmanager
    def track_task(self, request_id: str) -> Generator[list[bool], None, None]:
        task = asyncio.current_task()
        flag = [False]
        if task is not None:
            self._tasks[request_id] = (task, flag)
        try:
            yield flag
        finally:
            if task is not None and self._tasks.get(request_id, (None, None))[0] is task:
                del self._tasks[request_id]

    def cancel(self, request_id: str) -> bool:
        stream = self._streams.get(request_id)
        if stream is not None:
            return stream.cancel()
        entry = self._tasks.get(request_id)
        if entry is not None:
            task, flag = entry
            flag[0] = True
            task.cancel()
            return True
        return False

    def __len__(self) -> int:
        return len(self._streams) + len(self._tasks)


class ToolCallAccumulator:
    """Joins ToolCallDeltas (by index) into ToolCalls, as the seeds describe."""

    def __init__(self) -> None:
        self._parts: dict[int, dict[str, Any]] = {}

    def add(self, chunk: StreamChunk) -> None:
        for delta in chunk.tool_call_deltas:
            part = self._parts.setdefault(delta.index, {"id": None, "name": None, "args": ""})
            if delta.id:
                part["id"] = delta.id
            if delta.name:
                part["name"] = delta.name
            part["args"] += delta.arguments

    def __bool__(self) -> bool:
        return bool(self._parts)

    def tool_calls(self, *, model: str = "") -> list[ToolCall]:
        from .models import ToolCall

        calls = []
        for index in sorted(self._parts):
            part = self._parts[index]
            if not part["name"]:
                raise ModelError(
                    f"The model streamed a tool call (index {index}) without a name",
                    model=model,
                    code="invalid_response",
                )
            calls.append(
                ToolCall(
                    id=part["id"] or f"call_{uuid.uuid4().hex[:12]}",
                    tool=part["name"],
                    arguments=_parse_arguments(part["args"], part["name"], model),
                )
            )
        return calls


def _parse_arguments(raw: str, tool: str, model: str) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ModelError(
            f"The model sent invalid JSON arguments for tool {tool!r}: {exc.msg} "
            f"(at char {exc.pos}): {raw[:200]!r}",
            model=model,
            code="invalid_response",
        ) from exc
    if not isinstance(value, dict):
        raise ModelError(
            f"The model sent arguments for tool {tool!r} that are not a JSON object: {raw[:200]!r}",
            model=model,
            code="invalid_response",
        )
    return value


async def collect_stream(stream: AsyncIterator[StreamChunk], *, model: str = "") -> ModelResponse:
    """Fold a chunk stream into one ModelResponse (the non-streaming result)."""
    from .models import ModelResponse, Usage

    text: list[str] = []
    reasoning: list[str] = []
    calls = ToolCallAccumulator()
    usage = Usage()
    finish: FinishReason | None = None
    async for chunk in stream:
        if chunk.delta:
            text.append(chunk.delta)
        if chunk.reasoning:
            reasoning.append(chunk.reasoning)
        calls.add(chunk)
        if chunk.usage.total_tokens or chunk.usage.input_tokens or chunk.usage.output_tokens:
            usage = chunk.usage
        if chunk.finish_reason is not None:
            finish = chunk.finish_reason
    tool_calls = calls.tool_calls(model=model)
    if finish is None:
        finish = "tool_calls" if tool_calls else "stop"
    return ModelResponse(
        model=model,
        content="".join(text),
        tool_calls=tool_calls,
        usage=usage,
        finish_reason=finish,
        reasoning_content="".join(reasoning),
    )


class BaseProvider:
    """Shared mechanics; subclasses implement `_stream()` (and `get_info`).

    Subclasses may override `complete()` when the backend has a cheaper
    non-streaming call; the default folds `stream()`.
    """

    name: str = "base"

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self._active = _ActiveRequests()

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

    async def run_cancellable(self, request_id: str, call: Awaitable[Any]) -> Any:
        """Await `call` so that cancel_request(request_id) stops it with
        ProviderRequestCancelled (for non-streaming calls such as FIM)."""
        with self._active.track_task(request_id) as flag:
            try:
                return await call
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if flag[0] and task is not None:
                    task.uncancel()
                    raise ProviderRequestCancelled(request_id) from None
                raise

    def cancel_request(self, request_id: str) -> bool:
        return self._active.cancel(request_id)

    @property
    def active_requests(self) -> int:
        return len(self._active)

    async def aclose(self) -> None:
        return None
