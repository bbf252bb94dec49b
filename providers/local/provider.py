"""The `local` provider itself: the calls, each sent to the child process
that serves the model (process.py); which model that is and the
providerOptions are choice.py's job.

providerOptions: model_path (any .gguf; used for chat and completion),
completion_model (a catalog id), completion_model_path, n_ctx, n_threads,
completion_prefix_chars (inline completion context before the cursor, default 2000),
completion_suffix_chars (after the cursor, default 600),
chat_nice (the chat model child's nice value, default 10: "Completions first"),
chat_format (default: the GGUF's own template), startup_timeout (s),
cache_dir. `model` (chat) and a request's model (inlineCompletion.model)
take a catalog id ("qwen2.5-coder-1.5b" for chat and "qwen2.5-coder-0.5b"
for completion by default; "gemma3-270m", "smollm2-135m"), a .gguf path or an
`hf:<owner>/<repo>[:<quant or file>]` reference (hub.py, downloads.py).

Limits, honestly:
- Fill-in-the-middle only for GGUFs that declare FIM tokens (fim.py; the
  packaged Qwen2.5-Coder models do, Gemma and SmolLM2 do not), built here
  from those tokens: llama-cpp-python's `suffix` on /v1/completions is not
  FIM. get_info() reports "completion", not "fim" (it is per model).
- Tool calls: in the GGUF's own format when its chat template has one
  (Hermes/Qwen, Mistral, Llama 3: tool_format.py, chat_tools.py), several
  per reply; else a JSON-schema grammar constrains the reply to one tool
  call or one text answer (tool_grammar.py), and the user is told once per
  session. A GGUF without a chat template is refused for chat and tools.
- One request at a time per model (the server queues the rest).

A model chosen by a settings change loads in the background while the
previous one keeps serving, and never takes over if it fails (serving.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentls.core.context.tokens import LazyCounter
from agentls.core.provider.contract import (
    BaseProvider,
    CompletionOptions,
    FimChunk,
    FimPlan,
    FimRequest,
    ProviderConfig,
    ToolSpec,
)
from agentls.core.provider.progress import NullProgress, ProgressSink
from agentls.core.types.conversation import Message
from agentls.core.types.errors import ModelError
from agentls.core.types.messages import ConfigField, ModelInfo, ProviderInfo, StreamChunk
from agentls.providers.fim.budget import own_engine_budgets
from agentls.providers.fim.templates import build_fim_prompt
from agentls.providers.local.child_calls import ChildCalls
from agentls.providers.local.choice import LAST_SERVED, ModelChoice, _option
from agentls.providers.local.engine_work import PRIORITY_FIELD
from agentls.providers.local.models.catalog import (
    CATALOG,
    DEFAULT_CHAT_MODEL,
    DEFAULT_COMPLETION_MODEL,
    locate_model_file,
    runtime_error,
)
from agentls.providers.local.models.downloads import DOWNLOADS
from agentls.providers.local.models.gguf_meta import GgufError, ModelFacts, model_facts
from agentls.providers.local.models.listing import list_local_models
from agentls.providers.local.models.recommended import RECOMMENDED_CHAT
from agentls.providers.local.process import _ChildSpec, _ModelProcess, rss_bytes
from agentls.providers.local.serving import ServingModels
from agentls.providers.local.shared.link import SharedModelProcess
from agentls.providers.local.tool_calls.chat_tools import (
    decode_grammar,
    decode_native,
    grammar_notice,
    native_request,
)
from agentls.providers.local.tool_calls.constrained import CALL_TAGS, constrained_calls
from agentls.providers.local.tool_calls.grammar import to_local_messages, tool_reply_schema
from agentls.providers.local.tool_calls.native_format import NATIVE_FORMATS

logger = logging.getLogger("agentls.providers.local")

DEFAULT_CHAT_MAX_TOKENS = 512  # tiny models loop; a reply longer than this is noise
# A model with native tool calls is a real instruct model: room for a
# write_file call carrying a whole file.
DEFAULT_NATIVE_MAX_TOKENS = 2048
DEFAULT_COMPLETION_MAX_TOKENS = 128  # llama.cpp's own default (16) is too short
# Greedy, as Aider asks: with the file-blocks instructions the 1.5B passed
# 16 of 21 agent tasks at 0.0 against 13 at 0.2 (bench/README.md, "Agent
# tasks"), and a run is the same every time.
DEFAULT_TEMPERATURE = 0.0
# An answer to a failure (CompletionOptions.retry) samples wider: at 0.2 the
# 1.5B wrote its failed reply again word for word (bench/README.md,
# Exercism); pass@k's best temperature rises with k (Codex paper: 0.2 for 1,
# 0.8 for 100).
RETRY_TEMPERATURE = 0.8
_CHARS_PER_TOKEN_FLOOR = 2.5  # prefix trimming: code averages 3-4 chars a token
# The chat model's child runs this much nicer than the completion model's, so
# a completion asked while the agent decodes gets the CPU first
# (docs/local-model.md, "Completions first").
CHAT_NICE = 10
DEFAULT_HOST_IDLE_SECONDS = 300.0

class LocalProvider(BaseProvider):
    """llama.cpp in a child process; see the module docstring."""

    name = "local"

    def __init__(
        self, config: ProviderConfig, *, process_factory: type[_ModelProcess] = _ModelProcess
    ) -> None:
        super().__init__(config)
        self.choice = ModelChoice(config)
        # What runs a model's child: tests pass a _ModelProcess whose
        # worker_command() stands in a loopback fake for llama.cpp's server.
        self._process_factory = process_factory
        # The per-user model host (shared/): `local.shared` (the composition
        # root passes it as an option); a test's stand-in worker runs here.
        self._shared = config.options.get("shared") is True and process_factory is _ModelProcess
        self._host_idle = float(config.options.get("host_idle_seconds")
                                or DEFAULT_HOST_IDLE_SECONDS)
        self._told: set[str] = set()
        self._chat_nice_value = _chat_nice_option(config.options)
        # Read-only views of the options this module uses.
        self._n_threads = self.choice.n_threads
        self._startup_timeout = self.choice.startup_timeout
        self._cache_dir = self.choice.cache_dir
        # Inline completion reads these (features/inline_completion/feature.py):
        # on CPU the prompt's length is most of the latency (providers/fim/budget.py).
        self.preferred_prefix_chars, self.preferred_suffix_chars = own_engine_budgets(
            "local", config.options)
        self._progress: ProgressSink = NullProgress()
        self.models = ServingModels(self._new_process, lambda: self._progress, self._loaded)
        self._processes = self.models.processes  # the same dict: status, listing
        self.calls = ChildCalls(self.models, lambda: self._progress, self._loaded)
        self._model_facts: dict[_ChildSpec, ModelFacts | None] = {}
        # The chat model's own tokenizer per GGUF, for the context budget.
        self._counters: dict[str, LazyCounter] = {}

    def attach_progress(self, sink: ProgressSink) -> None:
        """Where downloads and slow model loads are shown (the editor's
        work-done progress, the terminal's bar); set by the composition root."""
        self._progress = sink
        self.choice.progress = sink

    def __repr__(self) -> str:
        return f"LocalProvider(model={self.default_model!r})"

    # -- model choice (choice.py) ------------------------------------------------
    @property
    def default_model(self) -> str:
        return self.choice.default_model

    @property
    def default_completion_model(self) -> str:
        return self.choice.default_completion_model

    def _spec(self, model: str | None, role: str) -> _ChildSpec:
        return self.choice.spec(model, role)

    def prepare_models(self, named: Mapping[str, str]) -> None:
        """Start the downloads of the `hf:` models the settings name (setting
        key -> model), in the background."""
        self.choice.prepare(named)

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

    def _new_process(self, spec: _ChildSpec) -> _ModelProcess:
        options: dict[str, Any] = {
            "cache_dir": self._cache_dir,
            "startup_timeout": self._startup_timeout,
            "request_timeout": self.config.request_timeout,
            "connect_timeout": self.config.connect_timeout,
        }
        if self._shared:
            return SharedModelProcess(spec, idle_seconds=self._host_idle, notify=self._tell,
                                      **options)
        return self._process_factory(spec, **options)

    def _tell(self, text: str) -> None:
        """Once per text: the model host refused, a shared child died."""
        if text in self._told and "stopped" not in text:
            return
        self._told.add(text)
        self._progress.begin("Local model").end("failed", error=text)

    def _serving(self, model: str | None, role: str) -> _ModelProcess:
        """The child for a request: the chosen model's once it runs; while it
        loads (or after it failed) the one already serving the role."""
        process = self.models.choose(lambda: self._spec(model, role), role)
        if role == "chat" and process.pid is None and not process.nice:
            process.nice = self._chat_nice(process.spec)
        return process

    def _chat_nice(self, spec: _ChildSpec) -> int:
        """CHAT_NICE (providerOptions.chat_nice) unless the chat model is
        also the completion model."""
        try:
            completion = self._spec(None, "completion")
        except ModelError:
            return self._chat_nice_value
        return 0 if completion == spec else self._chat_nice_value

    def take_over(self, previous: object) -> None:
        """A settings change replaced `previous` by this provider: keep its
        serving children (composition root, lsp/lifecycle.py), so they serve
        until the newly chosen models are ready instead of being stopped."""
        models = getattr(previous, "models", None)
        if isinstance(models, ServingModels) and models is not self.models:
            self.models.take_over(models)

    async def _loaded(self, spec: _ChildSpec, role: str) -> None:
        LAST_SERVED[role] = spec
        await self._facts(spec)

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

    def status_report(self) -> dict[str, Any]:
        """For agentls/status: each model's child (pid, RSS, n_ctx, KV-cache
        size from the GGUF's shape) and the downloads of this process."""
        models = []
        for spec, process in self._processes.items():
            pid = process.pid
            facts = self._model_facts.get(spec)
            held = process if isinstance(process, SharedModelProcess) else None
            shared = held is not None and held.shared
            models.append({
                "model": spec.alias,
                "gguf": str(process.gguf) if process.gguf else None,
                "running": pid is not None,
                "pid": pid,
                "rssBytes": rss_bytes(pid) if pid is not None else None,
                # the per-user model host (shared/): whether this child is
                # shared, by how many agentls processes, or why not
                "shared": shared,
                "clients": (held.clients if held and shared else 1) if pid is not None else 0,
                "sharedError": held.shared_error if held else None,
                "nice": process.nice,
                "nCtx": spec.n_ctx,
                "kvCacheBytes": facts.kv_cache_bytes(spec.n_ctx) if facts else None,
                "loadSeconds": process.load_seconds,
                "starts": process.starts,
                "capabilities": facts.capabilities() if facts else None,
                "fimTokens": facts.fim.family if facts and facts.fim else None,
                # the completion prompt form (fim_plan): FIM tokens or the prefix alone
                "fimForm": ("template" if facts and facts.fim else "continuation")
                if facts else None,
                "toolFormat": facts.tool_calling(spec.chat_format) if facts else None,
                # the engine's own counters per request (engine_work.py)
                "engineCounters": (f"http://127.0.0.1:{process.port}/agentls/engine"
                                   if pid is not None and process.port else None),
            })
        return {
            "localModels": models,
            "downloads": [job.to_wire() for job in DOWNLOADS.jobs.values()],
        }

    # -- calls -------------------------------------------------------------------

    async def _stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None,
        options: CompletionOptions,
    ) -> AsyncIterator[StreamChunk]:
        self._require_runtime(options.model or self.default_model)
        process = self._serving(options.model, "chat")
        spec = process.spec
        tool_list = list(tools or [])
        facts = await self._facts(spec)
        if facts is not None and facts.chat_template is None and spec.chat_format is None:
            # llama-cpp-python would fall back to a Llama-2 prompt the model
            # never saw, and the "answer" would be prose noise, never a tool call.
            raise ModelError(
                f"local: {spec.alias} has no chat template in its GGUF, so it cannot chat or "
                "call tools (it is a base/completion model). Use it for "
                "inlineCompletion.model and pick a chat model for `model`, e.g. "
                f"{RECOMMENDED_CHAT} (`agentls pull --recommended`), or set "
                "providerOptions.chat_format.",
                model=spec.alias,
                code="bad_request",
            )
        temperature = options.temperature if options.temperature is not None else (
            RETRY_TEMPERATURE if options.retry else DEFAULT_TEMPERATURE)
        # The GGUF's own tool-call format, unless chat_format overrides its template.
        tool_format = facts.tool_format if facts is not None and not spec.chat_format else "none"
        native = tool_format in NATIVE_FORMATS
        inner = dataclasses.replace(
            options,
            model=spec.alias,
            max_tokens=options.max_tokens or (
                DEFAULT_NATIVE_MAX_TOKENS if native else DEFAULT_CHAT_MAX_TOKENS),
            temperature=temperature,
            request_id=None,
            extra={**({"seed": self.choice.seed} if self.choice.seed is not None else {}),
                   **_priority(options), **options.extra},
        )
        names = [tool["name"] for tool in tool_list]
        if tool_list and facts is not None and native:
            request = native_request(facts, spec.alias, messages, tool_list, inner)

            def send(req: FimRequest) -> AsyncIterator[FimChunk]:
                return self.calls.stream(process, lambda client: client.stream_fim(req))

            raw = (constrained_calls(request, send, tool_list, tool_format)
                   if tool_format in CALL_TAGS and self.choice.tool_call_grammar
                   else send(request))
            async for chunk in decode_native(raw, tool_format, model=spec.alias,
                                             tool_names=names):
                yield chunk
            return
        local_messages = to_local_messages(messages, tool_list)
        if tool_list:
            yield StreamChunk(notice=grammar_notice(spec.alias))
            extra = {"response_format": {"type": "json_object",
                                         "schema": tool_reply_schema(tool_list)},
                     **inner.extra}
            inner = dataclasses.replace(inner, extra=extra)
        chunks = self.calls.stream(
            process, lambda client: client.stream(local_messages, options=inner))
        if not tool_list:
            async for chunk in chunks:
                yield chunk
            return
        async for chunk in decode_grammar(chunks, model=spec.alias, tool_names=names):
            yield chunk

    async def _stream_fim(self, request: FimRequest) -> AsyncIterator[FimChunk]:
        """Fill in the middle with the model's own FIM tokens when its GGUF
        declares them (fim.py); otherwise continue the prefix, and the
        suffix only serves post-processing."""
        options = request.options
        self._require_runtime(options.model or self.default_completion_model)
        process = self._serving(options.model, "completion")
        spec = process.spec
        facts = await self._facts(spec)
        max_tokens = options.max_tokens or DEFAULT_COMPLETION_MAX_TOKENS
        # Keep the prompt inside the context: drop the oldest characters.
        budget = int(max(256, spec.n_ctx - max_tokens - 16) * _CHARS_PER_TOKEN_FLOOR)
        tokens = facts.fim if facts is not None else None
        stop = tuple(options.stop)
        if tokens is not None:
            suffix = request.suffix[: budget // 4]
            prompt = build_fim_prompt(tokens, request.prefix[-(budget - len(suffix)) :], suffix)
            stop += tuple(s for s in tokens.stops if s not in stop)
        else:
            prompt = request.prefix[-budget:]
        inner = FimRequest(
            prefix=prompt,
            suffix="",
            options=dataclasses.replace(
                options,
                model=spec.alias,
                max_tokens=max_tokens,
                temperature=(
                    DEFAULT_TEMPERATURE if options.temperature is None else options.temperature
                ),
                stop=stop,
                request_id=None,
                # llama.cpp's suffix is not FIM
                extra={"suffix": None, **_priority(options), **options.extra},
            ),
        )
        async for chunk in self.calls.stream(
            process, lambda client: client.stream_fim(inner), "completion"
        ):
            yield chunk

    async def warm(self, model: str | None, role: str) -> None:
        """Ready `role`'s model before its first request (Warmable): its GGUF
        facts read and its child running (loaded here, or leased from the
        model host). Raises what the first request would (ModelError)."""
        self._require_runtime(model or (self.default_completion_model if role == "completion"
                                        else self.default_model))
        process = self._serving(model, role)
        await self._facts(process.spec)
        await self.calls.client(process, role)

    async def fim_plan(self, model: str | None = None) -> FimPlan:
        """How _stream_fim prompts the completion model, and why (for
        `agentls check`): its GGUF's FIM tokens, else the prefix alone."""
        try:
            spec = self._spec(model or None, "completion")
        except ModelError as exc:
            return FimPlan("continuation", f"the model's GGUF cannot be read: {exc.message}")
        facts = await self._facts(spec)
        if facts is not None and facts.fim is not None:
            return FimPlan("template", f"{facts.fim.family} FIM tokens declared by "
                           f"{spec.alias}'s GGUF, in a raw prompt", facts.fim.family)
        return FimPlan("continuation", f"{spec.alias}'s GGUF declares no FIM tokens: the "
                       "prefix alone (llama-cpp-python's `suffix` is not FIM)")

    async def _facts(self, spec: _ChildSpec) -> ModelFacts | None:
        """The GGUF's facts (FIM tokens, chat template, KV-cache sizes), read
        once per model off the event loop; None when the file cannot be read
        (the child's start then says why)."""
        if spec in self._model_facts:
            return self._model_facts[spec]

        def read() -> ModelFacts | None:
            try:
                path = spec.path or locate_model_file(spec.catalog_id or "",
                                                      cache_dir=self._cache_dir)
                return model_facts(path)
            except (ModelError, OSError, GgufError) as exc:
                logger.info("local: cannot read the GGUF metadata of %s: %s", spec.alias, exc)
                return None

        facts = await asyncio.to_thread(read)
        self._model_facts[spec] = facts
        return facts

    # -- metadata ----------------------------------------------------------------
    async def list_models(self) -> list[ModelInfo]:
        """The models this machine has (packaged, by path, downloaded `hf:`)
        with what each can do (from its GGUF), then the recommended ones to
        download; starts the chat model's server to prove it loads."""
        self._require_runtime(self.default_model)
        client = await self.calls.client(self._serving(None, "chat"), "chat")
        await client.list_models()
        return await list_local_models(self.choice, self._facts)

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
                    prompt=f"Chat model (completion uses {DEFAULT_COMPLETION_MODEL} unless "
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
        await self.models.aclose()


def _priority(options: CompletionOptions) -> dict[str, Any]:
    """A background request (next edits) yields to inline completions in the
    child (engine_work.py)."""
    return {PRIORITY_FIELD: "background"} if options.background else {}


def _chat_nice_option(options: Mapping[str, Any]) -> int:
    nice = _option(options, "chat_nice")  # 0: the chat child at normal priority
    if nice is None:
        return CHAT_NICE
    if isinstance(nice, bool) or not isinstance(nice, int) or not 0 <= nice <= 19:
        raise ModelError(f"local: providerOptions.chat_nice must be a whole number from 0 "
                         f"to 19, not {nice!r}", code="bad_request")
    return nice


def _gguf_tokenizer(path: Path) -> tuple[str, Callable[[str], int]]:
    from llama_cpp import Llama

    vocab = Llama(model_path=str(path), vocab_only=True, verbose=False)

    def count(text: str) -> int:
        return len(vocab.tokenize(text.encode("utf-8", errors="replace"), add_bos=False,
                                  special=False))

    return f"gguf:{path.stem}", count
