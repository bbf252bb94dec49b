"""The `local` provider itself: model choice, providerOptions, and the calls,
each sent to the child process that serves the model (process.py).

providerOptions: model_path (any .gguf; used for chat and completion),
completion_model (a catalog id), completion_model_path, n_ctx, n_threads,
chat_format (default: the GGUF's own template), startup_timeout (s),
cache_dir. `model` picks the chat model: "gemma3-270m" or "smollm2-135m".

Limits, honestly:
- No fill-in-the-middle: neither model was trained for FIM, and
  llama-cpp-python's `suffix` handling on /v1/completions is not FIM either.
  stream_fim() continues the prefix and ignores the suffix; get_info()
  reports the capability "completion", not "fim".
- Tool calls: these models cannot produce native tool calls; a JSON-schema
  grammar constrains the reply to one tool call or one text answer, so at
  most one tool call per reply (tool_grammar.py).
- One request at a time per model (the server queues the rest).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentls.core.models import (
    ConfigField,
    FinishReason,
    ModelError,
    ModelInfo,
    ProviderInfo,
    StreamChunk,
)
from agentls.core.provider import (
    BaseProvider,
    ChunkStream,
    CompletionOptions,
    FimRequest,
    ProviderConfig,
    ToolSpec,
)
from agentls.core.session_types import Message
from agentls.core.tokens import LazyCounter

from .catalog import (
    CATALOG,
    DEFAULT_CHAT_MODEL,
    DEFAULT_COMPLETION_MODEL,
    _model_installed,
    _unknown_model,
    locate_model_file,
    runtime_error,
)
from .process import _ChildSpec, _describe_exit, _LoopbackOpenAI, _ModelProcess
from .tool_grammar import ToolReplyDecoder, to_local_messages, tool_reply_schema

DEFAULT_STARTUP_TIMEOUT = 60.0
DEFAULT_CHAT_MAX_TOKENS = 512  # tiny models loop; a reply longer than this is noise
DEFAULT_COMPLETION_MAX_TOKENS = 128  # llama.cpp's own default (16) is too short
DEFAULT_TEMPERATURE = 0.2
_CHARS_PER_TOKEN_FLOOR = 2.5  # prefix trimming: code averages 3-4 chars a token


def _option(options: Mapping[str, Any], snake: str) -> Any:
    head, *rest = snake.split("_")
    camel = head + "".join(word.capitalize() for word in rest)
    value = options.get(snake, options.get(camel))
    return None if value in (None, "") else value


def _int_option(options: Mapping[str, Any], snake: str) -> int | None:
    value = _option(options, snake)
    if value is None:
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ModelError(
            f"local: providerOptions.{snake} must be a whole number, not {value!r}",
            code="bad_request",
        ) from None
    if number < 1:
        raise ModelError(f"local: providerOptions.{snake} must be >= 1", code="bad_request")
    return number


def _path_option(options: Mapping[str, Any], snake: str) -> Path | None:
    value = _option(options, snake)
    return Path(str(value)).expanduser() if value is not None else None


def _default_threads() -> int:
    """Decode threads. Generating with a tiny model is memory-bound and
    llama.cpp's threads synchronise on every operation, so a thread that
    another process preempts stalls the rest: on a 2-core machine shared with
    the editor one thread was both faster and steadier than two
    (bench/README.md). Above that, leave one core free, at most 4 threads."""
    cores = os.cpu_count() or 1
    return 1 if cores <= 2 else min(4, cores - 1)


class LocalProvider(BaseProvider):
    """llama.cpp in a child process; see the module docstring."""

    name = "local"

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        options = config.options
        self._model_path = _path_option(options, "model_path")
        self._completion_model_path = _path_option(options, "completion_model_path")
        completion_model = _option(options, "completion_model")
        self._completion_model = str(completion_model) if completion_model else None
        self._n_ctx = _int_option(options, "n_ctx")
        self._n_threads = _int_option(options, "n_threads") or _default_threads()
        chat_format = _option(options, "chat_format")
        self._chat_format = str(chat_format) if chat_format else None
        timeout = _option(options, "startup_timeout")
        self._startup_timeout = float(timeout) if timeout is not None else DEFAULT_STARTUP_TIMEOUT
        cache_dir = _path_option(options, "cache_dir")
        self._cache_dir = cache_dir
        self._processes: dict[_ChildSpec, _ModelProcess] = {}
        self._counters: dict[str, LazyCounter] = {}

    def __repr__(self) -> str:
        return f"LocalProvider(model={self.default_model!r})"

    # -- model choice ----------------------------------------------------------
    @property
    def default_model(self) -> str:
        if self.config.model:
            return self.config.model
        if self._model_path is not None:
            return self._model_path.stem
        # No fallback to Gemma when SmolLM2 is missing: the base model answers
        # chat with noise, and an error naming the install command is better.
        return DEFAULT_CHAT_MODEL

    @property
    def default_completion_model(self) -> str:
        path = self._completion_model_path or self._model_path
        if path is not None:
            return path.stem
        return self._completion_model or DEFAULT_COMPLETION_MODEL

    def _spec(self, model: str | None, role: str) -> _ChildSpec:
        custom = self._model_path
        if role == "completion":
            custom = self._completion_model_path or self._model_path
            wanted = model or self.default_completion_model
        else:
            wanted = model or self.default_model
        path: Path | None = None
        if custom is not None and wanted in (custom.stem, str(custom)):
            path = custom
        elif wanted.endswith(".gguf"):
            path = Path(wanted).expanduser()
        elif wanted not in CATALOG:
            raise _unknown_model(wanted)
        entry = CATALOG.get(wanted)
        return _ChildSpec(
            alias=path.stem if path is not None else wanted,
            catalog_id=None if path is not None else wanted,
            path=path,
            n_ctx=self._n_ctx or (entry.n_ctx if entry else 4096),
            n_threads=self._n_threads,
            chat_format=self._chat_format or (entry.chat_format if entry else None),
        )

    def token_counter(self, model: str | None = None) -> LazyCounter | None:
        """The chat model's own tokenizer for the context budget (read from
        its GGUF, vocabulary only, in a background thread of this process;
        the model itself runs in the child). None when the model is unknown."""
        try:
            spec = self._spec(model or None, "chat")
        except ModelError:
            return None
        key = str(spec.path or spec.catalog_id)
        counter = self._counters.get(key)
        if counter is None:
            cache_dir = self._cache_dir

            def load() -> tuple[str, Callable[[str], int]]:
                path = spec.path or locate_model_file(spec.catalog_id or "", cache_dir=cache_dir)
                return _gguf_tokenizer(path)

            counter = self._counters[key] = LazyCounter(f"the GGUF of {spec.alias}", load)
        return counter

    def _process(self, spec: _ChildSpec) -> _ModelProcess:
        process = self._processes.get(spec)
        if process is None:
            process = _ModelProcess(
                spec,
                cache_dir=self._cache_dir,
                startup_timeout=self._startup_timeout,
                request_timeout=self.config.request_timeout,
                connect_timeout=self.config.connect_timeout,
            )
            self._processes[spec] = process
        return process

    def _require_runtime(self, model: str) -> None:
        error = runtime_error(model)
        if error is not None:
            raise error

    def child_pids(self) -> dict[str, int]:
        """Model id -> pid of each running child (for status, tests, benchmarks)."""
        return {
            spec.alias: pid
            for spec, process in self._processes.items()
            if (pid := process.pid) is not None
        }

    def process_stats(self) -> dict[str, dict[str, Any]]:
        """Model id -> {pid, starts, load_seconds, gguf} of each known child."""
        return {
            spec.alias: {
                "pid": process.pid,
                "starts": process.starts,
                "load_seconds": process.load_seconds,
                "gguf": str(process.gguf) if process.gguf else None,
            }
            for spec, process in self._processes.items()
        }

    # -- calls -------------------------------------------------------------------
    async def _guarded(
        self, process: _ModelProcess, open_stream: Callable[[_LoopbackOpenAI], ChunkStream]
    ) -> AsyncIterator[StreamChunk]:
        """Stream from the child. When it turns out dead before anything was
        streamed (it died between requests and we raced its exit), it is
        started again and the request sent once more; a death mid-answer
        becomes server_error ("crashed and was restarted")."""
        for attempt in (1, 2):
            client = await process.client()
            mark = process.log_offset()
            stream = open_stream(client)
            streamed = False
            try:
                async for chunk in stream:
                    streamed = True
                    yield chunk
                return
            except ModelError as exc:
                if attempt == 1 and not streamed and await self._died(process, exc) is not None:
                    continue  # nothing was said yet: process.client() restarts it
                explained = await self._explain(process, exc, mark)
                if explained is exc:
                    raise
                raise explained from exc
            finally:
                await stream.aclose()

    async def _died(self, process: _ModelProcess, exc: ModelError) -> int | None:
        """The child's exit code if it is dead. A connection cut is how a
        crash looks from here: give the dying child a moment to be reaped."""
        wait = 1.0 if exc.code in ("connection", "invalid_response", "server_error") else 0.0
        return await process.exit_code(wait)

    async def _explain(self, process: _ModelProcess, exc: ModelError, mark: int) -> ModelError:
        code = await self._died(process, exc)
        alias = process.spec.alias
        if code is None:
            log = process.log_text(mark)
            if "exceed context window" in log or "exceeds the context" in log:
                return ModelError(
                    f"local: the request does not fit {alias}'s context window "
                    f"(n_ctx={process.spec.n_ctx}): start a new session, send less context, "
                    "or raise providerOptions.n_ctx.",
                    model=alias,
                    code="context_length",
                )
            return exc
        tail = process.log_text()
        try:
            await process.client()
            restarted = "and was restarted; try again"
        except ModelError as again:
            restarted = f"and could not be restarted: {again.message}"
        return ModelError(
            f"local: the local model {alias} crashed ({_describe_exit(code)}) while answering, "
            f"{restarted}. Its last output:\n{tail or '(nothing)'}",
            model=alias,
            code="server_error",
        )

    async def _stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None,
        options: CompletionOptions,
    ) -> AsyncIterator[StreamChunk]:
        self._require_runtime(options.model or self.default_model)
        spec = self._spec(options.model, "chat")
        process = self._process(spec)
        tool_list = list(tools or [])
        local_messages = to_local_messages(messages, tool_list)
        extra = dict(options.extra)
        if tool_list:
            extra.setdefault(
                "response_format", {"type": "json_object", "schema": tool_reply_schema(tool_list)}
            )
        inner = dataclasses.replace(
            options,
            model=spec.alias,
            max_tokens=options.max_tokens or DEFAULT_CHAT_MAX_TOKENS,
            temperature=DEFAULT_TEMPERATURE if options.temperature is None else options.temperature,
            request_id=None,
            extra=extra,
        )
        chunks = self._guarded(process, lambda client: client.stream(local_messages, options=inner))
        if not tool_list:
            async for chunk in chunks:
                yield chunk
            return
        decoder = ToolReplyDecoder((tool["name"] for tool in tool_list), model=spec.alias)
        finish: FinishReason | None = None
        closing: list[StreamChunk] = []
        async for chunk in chunks:
            for out in decoder.feed(chunk.delta):
                yield out
            if chunk.finish_reason is not None:
                finish = chunk.finish_reason
            if chunk.usage.total_tokens or chunk.usage.output_tokens:
                closing.append(StreamChunk(usage=chunk.usage))
        for out in decoder.finish(finish):
            yield out
        for out in closing:
            yield out

    async def _stream_fim(self, request: FimRequest) -> AsyncIterator[StreamChunk]:
        """Continue `request.prefix` (the suffix is not used: see the module doc)."""
        options = request.options
        self._require_runtime(options.model or self.default_completion_model)
        spec = self._spec(options.model, "completion")
        process = self._process(spec)
        max_tokens = options.max_tokens or DEFAULT_COMPLETION_MAX_TOKENS
        # Keep the prompt inside the context: drop the oldest characters.
        budget = int(max(256, spec.n_ctx - max_tokens - 16) * _CHARS_PER_TOKEN_FLOOR)
        prefix = request.prefix[-budget:]
        inner = FimRequest(
            prefix=prefix,
            suffix="",
            options=dataclasses.replace(
                options,
                model=spec.alias,
                max_tokens=max_tokens,
                temperature=(
                    DEFAULT_TEMPERATURE if options.temperature is None else options.temperature
                ),
                request_id=None,
                extra={"suffix": None, **options.extra},  # llama.cpp's suffix is not FIM
            ),
        )
        async for chunk in self._guarded(process, lambda client: client.stream_fim(inner)):
            yield chunk

    # -- metadata ----------------------------------------------------------------
    async def list_models(self) -> list[ModelInfo]:
        """The installed models; starts the chat model's server to prove it loads."""
        self._require_runtime(self.default_model)
        spec = self._spec(None, "chat")
        client = await self._process(spec).client()
        await client.list_models()
        models = []
        for entry in CATALOG.values():
            if _model_installed(entry.id):
                models.append(
                    ModelInfo(
                        id=entry.id,
                        display_name=entry.display_name,
                        context_window=self._n_ctx or entry.n_ctx,
                        max_output_tokens=DEFAULT_CHAT_MAX_TOKENS,
                        capabilities=self._capabilities(),
                        defaults={"use": entry.use, "trained_context": entry.context_window},
                    )
                )
        for path in {p for p in (self._model_path, self._completion_model_path) if p}:
            models.append(
                ModelInfo(
                    id=path.stem,
                    display_name=path.name,
                    context_window=self._n_ctx or 4096,
                    max_output_tokens=DEFAULT_CHAT_MAX_TOKENS,
                    capabilities=self._capabilities(),
                    defaults={"path": str(path)},
                )
            )
        return models

    def _capabilities(self) -> list[str]:
        return ["streaming", "completion", "tools"]

    def get_info(self) -> ProviderInfo:
        return ProviderInfo(
            id="local",
            display_name="Local (llama.cpp)",
            credential_env_vars=[],
            capabilities=self._capabilities(),
            defaults={
                "model": self.default_model,
                "completion_model": self.default_completion_model,
                "n_threads": self._n_threads,
                "installed": runtime_error() is None,
            },
            config_fields=[
                ConfigField(
                    id="model",
                    display_name="Model",
                    field_type="choice",
                    choices=sorted(CATALOG),
                    prompt="Chat model (completion uses gemma3-270m unless "
                    "providerOptions.completion_model says otherwise)",
                    required=False,
                    default=DEFAULT_CHAT_MODEL,
                ),
                ConfigField(
                    id="providerOptions.model_path",
                    display_name="GGUF file",
                    prompt="Any .gguf model file, instead of the packaged models",
                    required=False,
                ),
            ],
        )

    async def aclose(self) -> None:
        processes = list(self._processes.values())
        self._processes.clear()
        await asyncio.gather(*(process.stop() for process in processes))


def _gguf_tokenizer(path: Path) -> tuple[str, Callable[[str], int]]:
    from llama_cpp import Llama

    vocab = Llama(model_path=str(path), vocab_only=True, verbose=False)

    def count(text: str) -> int:
        return len(vocab.tokenize(text.encode("utf-8", errors="replace"), add_bos=False,
                                  special=False))

    return f"gguf:{path.stem}", count
