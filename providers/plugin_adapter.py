"""Run an agent_core ProviderPlugin as an agentls Provider.

agent_core's provider protocol is synchronous and speaks native messages:
init -> to_native_messages -> initialize_request -> stream_api -> process_chunk
per chunk -> finalize, with from_native_messages to read the results back.
call_api answers instead when the plugin has no stream_api or its stream was
empty. `ProviderPluginAdapter` drives that pipeline on a worker thread
per request and turns what it yields into StreamChunks:

- partial assistant messages carry the text so far (or just the new piece);
  only the part not yet emitted becomes `StreamChunk.delta`;
- final assistant messages add any text the partials did not show, and their
  tool calls (metadata.tool_calls in core form, or OpenAI-style `tool_calls`
  on the native message) become ToolCallDeltas;
- usage comes from a final's `metadata.usage` (or native `usage`), else it is
  estimated as characters / 4.

`init(config)` runs once, in the constructor; the state it returns is handed
to every request and replaced by the state the request ends with (concurrent
requests on one adapter therefore race on it, last finisher wins).
`cancel_request(request_id)` forwards to the plugin's `cancel_request` and
interrupts the consumer; a plugin that ignores cancellation leaves its worker
thread (a daemon) running until its call returns, but nobody waits for it.
Plugins may implement only some methods: the protocol defaults fill the rest,
and keyword arguments a plugin's method does not declare (request_id,
context: agent_core's own EchoProvider omits them) are not passed.

Server integration: an `agentls.providers` entry point normally names a
factory(ProviderConfig) -> Provider. It may instead name an agent_core
ProviderPlugin class or instance (something with `stream_api` or `call_api`
and no `stream`). The server passes whatever the registry loaded through
`as_provider_factory()`, which returns a factory for both kinds:

    factory = as_provider_factory(registry.provider_factory(name))
    provider = factory(config)

`as_provider_factory` lives in provider_factory.py (import it from there),
so that building an ordinary provider does not import this module.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

from agentls.core.plugins.protocols import ProviderPlugin, plugin_call, plugin_name
from agentls.core.provider.chunk_stream import ChunkStream
from agentls.core.provider.contract import BaseProvider, CompletionOptions, ProviderConfig, ToolSpec
from agentls.core.types.conversation import Message
from agentls.core.types.errors import FinishReason, ModelError, ProviderRequestCancelled
from agentls.core.types.messages import ModelInfo, ProviderInfo, StreamChunk, ToolCallDelta, Usage

__all__ = ["ProviderPluginAdapter"]

log = logging.getLogger("agentls.providers.plugin_adapter")

Native = dict[str, Any]
_FINISH: dict[str, FinishReason] = {
    "stop": "stop", "end_turn": "stop", "stop_sequence": "stop",
    "tool_calls": "tool_calls", "tool_use": "tool_calls",
    "length": "length", "max_tokens": "length", "content_filter": "content_filter",
}  # fmt: skip


class ProviderPluginAdapter(BaseProvider):
    """An agent_core ProviderPlugin behind the agentls provider contract."""

    def __init__(self, plugin: Any, config: ProviderConfig) -> None:
        super().__init__(config)
        self.plugin = plugin
        self.name = plugin_name(plugin)
        self._streaming = _implements(plugin, "stream_api")
        if not self._streaming and not _implements(plugin, "call_api"):
            raise TypeError(
                f"Provider plugin {self.name!r} implements neither stream_api nor call_api"
            )
        self._plugin_config = _plugin_config(config)
        self._state: dict[str, Any] = _call(plugin, "init", self._plugin_config) or {}
        self._workers: dict[str, _Worker] = {}

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None = None,
        *,
        options: CompletionOptions | None = None,
    ) -> ChunkStream[StreamChunk]:
        # _stream() must know the request id to hand it to the plugin.
        options = options or CompletionOptions()
        if options.request_id is None:
            options = replace(options, request_id=uuid.uuid4().hex)
        return super().stream(messages, tools, options=options)

    async def _stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None,
        options: CompletionOptions,
    ) -> AsyncIterator[StreamChunk]:
        request_id = options.request_id or uuid.uuid4().hex
        context = {
            "config": self._plugin_config,
            "request_id": request_id,
            "tools": [dict(t) for t in tools or []],
            "available_tools": [t.get("name") for t in tools or []],
            "options": {k: v for k, v in asdict(options).items() if k != "request_id"},
        }
        worker = _Worker(self.plugin, request_id, self._streaming, asyncio.get_running_loop())
        self._workers[request_id] = worker
        worker.start([m.to_dict() for m in messages], self._state, context)
        text = _TextTracker()
        finals: list[tuple[Native, dict[str, Any]]] = []
        try:
            while True:
                kind, payload = await worker.queue.get()
                if kind == "error":
                    raise _as_model_error(payload, self.name, request_id, self.default_model)
                if kind == "done":
                    self._state = payload
                    break
                partials, new_finals = payload
                for chunk in text.update(partials, new_finals):
                    yield chunk
                finals.extend(new_finals)
            yield _closing_chunk(finals, text.emitted, worker.input_chars)
        finally:
            self._workers.pop(request_id, None)
            if not worker.finished:  # cancelled, abandoned or failed: stop the plugin too
                self._stop(worker)

    def cancel_request(self, request_id: str) -> bool:
        worker = self._workers.get(request_id)
        if worker is not None and not worker.finished:
            self._stop(worker)
        return super().cancel_request(request_id) or worker is not None

    def _stop(self, worker: _Worker) -> None:
        if worker.stopped.is_set():
            return
        worker.stopped.set()
        try:
            _call(self.plugin, "cancel_request", worker.request_id)
        except Exception:  # best effort, as the protocol says
            log.exception("cancel_request of provider plugin %r failed", self.name)

    def get_info(self) -> ProviderInfo:
        # Tools reach every plugin through the request context and tool calls
        # come back from its finals, so "tools" holds whatever the plugin is.
        capabilities = ["streaming", "tools"] if self._streaming else ["tools"]
        return ProviderInfo(
            id=self.name,
            display_name=str(getattr(self.plugin, "display_name", None) or self.name),
            capabilities=capabilities,
            defaults={"model": self.default_model} if self.default_model else {},
        )

    async def list_models(self) -> list[ModelInfo]:
        found = await asyncio.to_thread(_call, self.plugin, "get_models", self._plugin_config)
        models = []
        for entry in found or []:
            model_id = entry.get("id") or entry.get("name") if isinstance(entry, Mapping) else None
            if not model_id:
                continue
            models.append(
                ModelInfo(
                    id=str(model_id),
                    display_name=str(entry.get("display_name") or entry.get("name") or model_id),
                    context_window=int(entry.get("context_window") or 0),
                    max_output_tokens=int(entry.get("max_output_tokens") or 0),
                    capabilities=list(entry.get("capabilities") or []),
                )
            )
        return models


class _Worker:
    """One request's plugin calls, on a daemon thread: the plugin API is
    synchronous and may block on I/O; the event loop only reads the queue."""

    def __init__(
        self, plugin: Any, request_id: str, streaming: bool, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.plugin = plugin
        self.request_id = request_id
        self.streaming = streaming
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.stopped = threading.Event()
        self.finished = False  # set on the loop side when "done" or "error" is read
        self.input_chars = 0
        self._loop = loop
        self._seen_finals: list[Native] = []

    def start(self, messages: list[dict[str, Any]], state: dict[str, Any], context: Any) -> None:
        thread = threading.Thread(
            target=self._run,
            args=(messages, state, context),
            name=f"agentls-plugin-{self.request_id[:8]}",
            daemon=True,  # a plugin ignoring cancellation must not block shutdown
        )
        thread.start()

    def _post(self, kind: str, payload: Any) -> None:
        if kind in ("done", "error"):
            self._loop.call_soon_threadsafe(self._mark_finished)
        try:
            self._loop.call_soon_threadsafe(self.queue.put_nowait, (kind, payload))
        except RuntimeError:  # the loop is closed: nobody is listening any more
            pass

    def _mark_finished(self) -> None:
        self.finished = True

    def _run(self, messages: list[dict[str, Any]], state: dict[str, Any], context: Any) -> None:
        plugin, rid = self.plugin, self.request_id
        try:
            native = _call(plugin, "to_native_messages", messages, state, context=context)
            native, state = _call(
                plugin, "initialize_request", native, state, request_id=rid, context=context
            )
            self.input_chars = sum(len(_text(m.get("content"))) for m in native)
            streamed = False
            if self.streaming:
                chunks = _call(plugin, "stream_api", native, state, request_id=rid)
                try:
                    for chunk in chunks:
                        if self.stopped.is_set():
                            return
                        streamed = True
                        partials, finals, native, state = _call(
                            plugin, "process_chunk", chunk, native, state
                        )
                        self._emit(partials, finals, state, context)
                finally:
                    close = getattr(chunks, "close", None)
                    if callable(close):
                        close()
            # agent_core's own EchoProvider has a stream_api that yields nothing and
            # answers through call_api: an empty stream falls back to call_api.
            if not streamed and _implements(plugin, "call_api") and not self.stopped.is_set():
                partials, finals, native, state = _call(
                    plugin, "call_api", native, state, request_id=rid
                )
                self._emit(partials, finals, state, context)
            if self.stopped.is_set():
                return
            finals, native, state = _call(plugin, "finalize", native, state, context=context)
            self._emit([], finals, state, context)
            self._post("done", state)
        except BaseException as exc:  # everything reaches the consumer, nothing is lost here
            self._post("error", exc)

    def _emit(
        self, partials: list[Native], finals: list[Native], state: Any, context: Any
    ) -> None:
        # finalize() may repeat finals process_chunk already gave: keep one of each.
        new = [f for f in finals or [] if isinstance(f, dict) and f not in self._seen_finals]
        self._seen_finals.extend(new)
        core: list[Any] = []
        if new:
            core = _call(self.plugin, "from_native_messages", new, state, context=context) or []
        pairs = [(n, core[i] if len(core) == len(new) else {}) for i, n in enumerate(new)]
        if partials or pairs:
            self._post("update", ([p for p in partials or [] if isinstance(p, dict)], pairs))


class _TextTracker:
    """Partial/final assistant contents -> new-text deltas.

    Partials are keyed by metadata id (else position); each may carry the
    text so far or only the new piece. A final shows only what its partial
    (the one at the same position) has not already shown; text already
    streamed cannot be taken back, so a final that rewrites it adds nothing.
    """

    def __init__(self) -> None:
        self._shown: dict[Any, str] = {}
        self.emitted: list[str] = []

    def update(
        self, partials: list[Native], finals: list[tuple[Native, dict[str, Any]]]
    ) -> list[StreamChunk]:
        chunks: list[StreamChunk] = []
        if finals:
            shown = list(self._shown.values())
            ordinal = 0
            for native, core in finals:
                if _role(native, core) != "assistant":
                    continue
                content = _text((core or native).get("content"))
                seen = shown[ordinal] if ordinal < len(shown) else ""
                ordinal += 1
                new = content[len(seen):] if content.startswith(seen) else ""
                reasoning = _reasoning(native, core)
                if new or reasoning:
                    chunks.append(StreamChunk(delta=new, reasoning=reasoning))
                    self.emitted.append(new)
            self._shown.clear()  # the partials became finals; what follows is new
        for index, partial in enumerate(partials):
            if partial.get("role", "assistant") != "assistant":
                continue
            key = (partial.get("metadata") or {}).get("id", index)
            content = _text(partial.get("content"))
            seen = self._shown.get(key, "")
            if content.startswith(seen):
                new, self._shown[key] = content[len(seen):], content
            else:  # a delta-style partial
                new, self._shown[key] = content, seen + content
            if new:
                chunks.append(StreamChunk(delta=new))
                self.emitted.append(new)
        return chunks


def _closing_chunk(
    finals: list[tuple[Native, dict[str, Any]]], emitted: list[str], input_chars: int
) -> StreamChunk:
    deltas: list[ToolCallDelta] = []
    usage: Usage | None = None
    finish: FinishReason = "stop"
    for native, core in finals:
        if _role(native, core) != "assistant":
            continue
        calls = _tool_calls((core.get("metadata") or {}).get("tool_calls")) or _native_calls(native)
        for name, arguments, call_id in calls:
            index = len(deltas)
            call_id = call_id or f"call_{index}"
            deltas.append(ToolCallDelta(index=index, id=call_id, name=name, arguments=arguments))
        usage = _usage(native, core) or usage
        reason = _meta(native, core, "finish_reason") or _meta(native, core, "stop_reason")
        finish = _FINISH.get(str(reason), finish) if reason else finish
    if deltas:
        finish = "tool_calls"
    if usage is None:  # the plugin did not say: estimate like the rest of agentls
        prompt = max(1, input_chars // 4)
        completion = max(1, sum(len(t) for t in emitted) // 4)
        usage = Usage(
            input_tokens=prompt, output_tokens=completion, total_tokens=prompt + completion
        )
    return StreamChunk(tool_call_deltas=deltas, finish_reason=finish, usage=usage)


def _native_calls(native: Native) -> list[tuple[str, str, str | None]]:
    return _tool_calls(native.get("tool_calls")) or _tool_calls(
        (native.get("metadata") or {}).get("tool_calls")
    )


def _tool_calls(raw: Any) -> list[tuple[str, str, str | None]]:
    """Core {"tool"|"name", "arguments", "id"} or OpenAI {"id", "function": {...}}
    tool calls -> (name, JSON arguments, id)."""
    calls = []
    for call in raw if isinstance(raw, list) else []:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        source = function if isinstance(function, Mapping) else call
        name = source.get("name") or call.get("tool")
        if not name:
            continue
        arguments = source.get("arguments", call.get("input", {}))
        text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
        calls.append((str(name), text, str(call["id"]) if call.get("id") else None))
    return calls


def _usage(native: Native, core: dict[str, Any]) -> Usage | None:
    raw = _meta(native, core, "usage") or native.get("usage")
    if not isinstance(raw, Mapping):
        return None
    prompt = int(raw.get("input_tokens", raw.get("prompt_tokens", 0)) or 0)
    completion = int(raw.get("output_tokens", raw.get("completion_tokens", 0)) or 0)
    total = int(raw.get("total_tokens") or prompt + completion)
    return Usage(input_tokens=prompt, output_tokens=completion, total_tokens=total)


def _meta(native: Native, core: dict[str, Any], key: str) -> Any:
    return (core.get("metadata") or {}).get(key) or (native.get("metadata") or {}).get(key)


def _reasoning(native: Native, core: dict[str, Any]) -> str:
    for key in ("reasoning", "reasoning_content", "thinking"):
        value = _meta(native, core, key) or native.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _role(native: Native, core: dict[str, Any]) -> str:
    return str(core.get("role") or native.get("role") or "assistant")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks: keep the text ones
        return "".join(
            str(b.get("text", "")) for b in content if isinstance(b, Mapping) and "text" in b
        )
    return ""


def _as_model_error(exc: BaseException, name: str, request_id: str, model: str) -> BaseException:
    if isinstance(exc, ModelError | ProviderRequestCancelled):
        return exc
    if type(exc).__name__ == "ProviderRequestCancelled":  # agent_core's own class
        return ProviderRequestCancelled(request_id)
    if not isinstance(exc, Exception):
        return exc
    error = ModelError(
        f"Provider plugin {name!r} failed: {type(exc).__name__}: {exc}",
        model=model,
        code="server_error",
    )
    error.__cause__ = exc
    return error


# -- calling plugins -------------------------------------------------------------


def _call(plugin: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    """plugin_call with the protocol default, passing only the keyword
    arguments the plugin's own method declares."""
    bound = getattr(plugin, method, None)
    if kwargs and callable(bound):
        accepted = _keywords(bound)
        if accepted is not None:
            kwargs = {k: v for k, v in kwargs.items() if k in accepted}
    return plugin_call(plugin, ProviderPlugin, method, *args, **kwargs)


def _keywords(function: Callable[..., Any]) -> frozenset[str] | None:
    """Names `function` accepts by keyword; None when it takes **kwargs."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in parameters if p.kind in named)


def _implements(plugin: Any, method: str) -> bool:
    """True when `plugin` has its own `method`, not the protocol's no-op default."""
    attr = getattr(plugin, method, None)
    return callable(attr) and getattr(attr, "__func__", attr) is not getattr(ProviderPlugin, method)


def _plugin_config(config: ProviderConfig) -> dict[str, Any]:
    values = {
        "model": config.model,
        "base_url": config.base_url,
        "api_key_env": config.api_key_env,
        "request_timeout": config.request_timeout,
        "connect_timeout": config.connect_timeout,
    }
    return {**{k: v for k, v in values.items() if v is not None}, **config.options}

