"""Which model serves a request: the `local` provider's providerOptions,
its chat and completion defaults, and a model named by catalog id, `.gguf`
path or `hf:` reference turned into the spec of the child that runs it.

An `hf:` model not yet in the HF cache starts downloading (downloads.py)
and, meanwhile, the model that last served the same role keeps serving
(else the packaged default for the role).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import agentls.providers.local.models.hub as hub
from agentls.core.provider.contract import ProviderConfig
from agentls.core.provider.progress import NullProgress, ProgressSink
from agentls.core.types.errors import ModelError
from agentls.providers.local.models.catalog import (
    CATALOG,
    DEFAULT_CHAT_MODEL,
    DEFAULT_COMPLETION_MODEL,
    _model_installed,
    _unknown_model,
)
from agentls.providers.local.models.downloads import DOWNLOADS
from agentls.providers.local.process import _ChildSpec

DEFAULT_STARTUP_TIMEOUT = 60.0

# role ("chat", "completion") -> the spec that last loaded for it in this
# process: it keeps serving while a newly chosen model downloads, across
# the provider being rebuilt by a settings change.
LAST_SERVED: dict[str, _ChildSpec] = {}


def default_n_ctx(available: int | None = None) -> int:
    """Context for a model outside the catalog, from the memory left: the
    KV cache of a 1-8B model at 8k tokens is 0.1-1 GiB."""
    available = hub.available_memory() if available is None else available
    if available is None:
        return 4096
    gib = available / (1 << 30)
    return 8192 if gib >= 12 else 4096 if gib >= 4 else 2048


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


class ModelChoice:
    """The providerOptions that pick and size models, and the choice itself."""

    def __init__(self, config: ProviderConfig) -> None:
        options = config.options
        self.config_model = config.model
        self.model_path = _path_option(options, "model_path")
        self.completion_model_path = _path_option(options, "completion_model_path")
        completion_model = _option(options, "completion_model")
        self.completion_model = str(completion_model) if completion_model else None
        self.n_ctx = _int_option(options, "n_ctx")
        self.n_threads = _int_option(options, "n_threads") or _default_threads()
        chat_format = _option(options, "chat_format")
        self.chat_format = str(chat_format) if chat_format else None
        timeout = _option(options, "startup_timeout")
        self.startup_timeout = float(timeout) if timeout is not None else DEFAULT_STARTUP_TIMEOUT
        self.cache_dir = _path_option(options, "cache_dir")
        # Tool calls decoded under the tools' grammar (constrained_calls.py).
        self.tool_call_grammar = _option(options, "tool_call_grammar") is not False
        # The sampler's seed on every chat request (None: llama.cpp picks one):
        # the same prompt then gets the same reply, as a test or a bench needs.
        self.seed = _int_option(options, "seed")
        self.progress: ProgressSink = NullProgress()
        # hf: references this choice has started (or retried) a download for
        self.download_tried: set[str] = set()
        # hf: reference -> its file in the HF cache, once found there
        self.resolved: dict[str, Path] = {}
        # model -> the setting that names it (`model`, `inlineCompletion.model`
        # ...), so a failed download says which setting to change
        self.named_by: dict[str, list[str]] = {}

    @property
    def default_model(self) -> str:
        if self.config_model:
            return self.config_model
        if self.model_path is not None:
            return self.model_path.stem
        # No fallback to Gemma when SmolLM2 is missing: the base model answers
        # chat with noise, and an error naming the install command is better.
        return DEFAULT_CHAT_MODEL

    @property
    def default_completion_model(self) -> str:
        path = self.completion_model_path or self.model_path
        if path is not None:
            return path.stem
        return self.completion_model or DEFAULT_COMPLETION_MODEL

    def spec(self, model: str | None, role: str) -> _ChildSpec:
        custom = self.model_path
        if role == "completion":
            custom = self.completion_model_path or self.model_path
            wanted = model or self.default_completion_model
        else:
            wanted = model or self.default_model
        path: Path | None = None
        alias: str | None = None
        if custom is not None and wanted in (custom.stem, str(custom)):
            path = custom
        elif hub.is_hf_reference(wanted):
            ready = self._hf_file(wanted, self._setting_of(wanted, role))
            if ready is None:  # downloading: the previous model keeps serving
                return self._fallback(wanted, role)
            path, alias = ready, hub.parse_hf_reference(wanted).display
        elif wanted.endswith(".gguf"):
            path = Path(wanted).expanduser()
        elif wanted not in CATALOG:
            raise _unknown_model(wanted)
        entry = CATALOG.get(wanted)
        return _ChildSpec(
            alias=alias or (path.stem if path is not None else wanted),
            catalog_id=None if path is not None else wanted,
            path=path,
            n_ctx=self.n_ctx or (entry.n_ctx if entry else default_n_ctx()),
            n_threads=self.n_threads,
            chat_format=self.chat_format or (entry.chat_format if entry else None),
        )

    def prepare(self, named: Mapping[str, str]) -> None:
        """Start the downloads of the `hf:` models the settings name (setting
        key -> model) now, in the background. On the event loop."""
        for setting, name in named.items():
            self.named_by.setdefault(name, []).append(setting)
        for name in named.values():
            if hub.is_hf_reference(name):
                self._hf_file(name, self.named_by[name])

    def _setting_of(self, wanted: str, role: str) -> list[str]:
        """The setting that names `wanted`: as prepared, else the role's own
        (a chat model comes from `model`, a completion model from
        `inlineCompletion.model`, or `nextEdit.model` that falls back to it)."""
        if wanted in self.named_by:
            return self.named_by[wanted]
        return ["model" if role == "chat" else "inlineCompletion.model"]

    def _hf_file(self, wanted: str, settings: list[str]) -> Path | None:
        """The downloaded file of an `hf:` reference, or None while its
        download (started here, in the background, if needed) runs. The
        download's own failure was shown through progress; a provider built
        after a settings change tries a failed download once more."""
        known = self.resolved.get(wanted)
        if known is not None and known.is_file():  # the hot path: one stat
            return known
        ref = hub.parse_hf_reference(wanted)
        cached = hub.cached_path(ref)
        if cached is not None:
            self.resolved[wanted] = cached
            return cached
        job = DOWNLOADS.start(
            ref,
            settings=settings,
            sink=self.progress,
            retry=ref.display not in self.download_tried,
        )
        self.download_tried.add(ref.display)
        return job.path if job.state == "ready" else None

    def _fallback(self, wanted: str, role: str) -> _ChildSpec:
        """What serves while `wanted` downloads: the model that last served
        this role in this process, else the packaged default for the role."""
        previous = LAST_SERVED.get(role)
        if previous is not None:
            return previous
        default = DEFAULT_COMPLETION_MODEL if role == "completion" else DEFAULT_CHAT_MODEL
        job = DOWNLOADS.job(hub.parse_hf_reference(wanted))
        if _model_installed(default):
            return self.spec(default, role)
        if job is not None and job.error is not None and job.state == "failed":
            raise job.error
        progress = f" ({job.percentage}%)" if job is not None and job.percentage is not None else ""
        raise ModelError(
            f"local: {wanted} is still downloading{progress} and no other local model is "
            "installed to serve meanwhile; it is used as soon as it is ready.",
            model=wanted,
            code="loading",
        )

