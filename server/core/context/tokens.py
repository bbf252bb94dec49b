"""Counting tokens for the context budget (core/context/fitting.py).

A real tokenizer where one is known: tiktoken for OpenAI models, and the
GGUF's own tokenizer for the embedded local model (its provider offers it
through `token_counter(model)`). Both are imported and loaded lazily, in a
background thread, the first time a request for that model is budgeted:
never at start-up and never on the inline-completion path; tiktoken
fetches its BPE file over the network on first use, so until a tokenizer
is ready (or when it cannot load, offline) the estimate below answers.

Everywhere else a conservative estimate: UTF-8 bytes / 3. The embedded
model's tokenizer (SmolLM2) averages 3.3-3.6 bytes per token on this
repository's code and docs (bench/bench_token_estimate.py, figures in
bench/README.md), so bytes / 3 over-counts by 10-20% overall; a single file
can come out up to ~10% under, which the budget's margin and the
context_length retry absorb. A CJK character is 3 bytes and about one
token. The context manager also scales the estimate up when a provider
reports more input tokens than were estimated (ContextManager.calibrate),
so an unusual tokenizer is learned.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from typing import Protocol

__all__ = [
    "BYTES_PER_TOKEN",
    "EstimateCounter",
    "LazyCounter",
    "TiktokenCounter",
    "TokenCounter",
    "counter_for",
    "estimate_tokens",
    "is_openai_model",
]

log = logging.getLogger("agentls.tokens")

BYTES_PER_TOKEN = 3.0


class TokenCounter(Protocol):
    """Counts the tokens of one text. `exact` says whether a real tokenizer answered."""

    name: str

    def count(self, text: str) -> int: ...

    @property
    def exact(self) -> bool: ...


def estimate_tokens(text: str) -> int:
    if not text:
        return 0
    if text.isascii():
        size = len(text)
    else:
        size = len(text.encode("utf-8", errors="replace"))
    return math.ceil(size / BYTES_PER_TOKEN)


class EstimateCounter:
    name = "estimate"

    def count(self, text: str) -> int:
        return estimate_tokens(text)

    @property
    def exact(self) -> bool:
        return False


_OPENAI_PREFIXES = ("gpt-", "chatgpt-", "o1", "o3", "o4", "text-davinci", "davinci", "codex-")


def is_openai_model(model: str) -> bool:
    name = model.lower().rsplit("/", 1)[-1]
    return name.startswith(_OPENAI_PREFIXES)


class LazyCounter:
    """A real tokenizer that `load` builds in a background thread (it may
    import a library or read a file); the estimate answers until it is
    ready, and for good when it cannot load. `load` returns the counter's
    name and a function counting the tokens of one text."""

    def __init__(self, what: str, load: Callable[[], tuple[str, Callable[[str], int]]]) -> None:
        self.what = what
        self.name = "estimate"
        self._load_fn = load
        self._count: Callable[[str], int] | None = None
        self._failed = False
        self._lock = threading.Lock()
        self._started = False

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._load, name="agentls-tokenizer", daemon=True).start()

    def load_now(self) -> bool:
        """Load in this thread (tests and benchmarks); True when the tokenizer answers."""
        with self._lock:
            self._started = True
        self._load()
        return self._count is not None

    def _load(self) -> None:
        try:
            name, count = self._load_fn()
            count("warm up")
        except Exception as exc:  # not installed, offline, unreadable file
            log.info("No tokenizer for %s (%s: %s); estimating tokens instead",
                     self.what, type(exc).__name__, str(exc)[:200])
            self._failed = True
            return
        self._count = count
        self.name = name

    def count(self, text: str) -> int:
        count = self._count
        if count is None:
            if not self._started and not self._failed:
                self.start()
            return estimate_tokens(text)
        return count(text) if text else 0

    @property
    def exact(self) -> bool:
        return self._count is not None


class TiktokenCounter(LazyCounter):
    """tiktoken's encoding for an OpenAI model."""

    def __init__(self, model: str) -> None:
        super().__init__(f"tiktoken for {model}", lambda: _load_tiktoken(model))
        self.model = model


def _load_tiktoken(model: str) -> tuple[str, Callable[[str], int]]:
    import tiktoken

    try:
        encoding = tiktoken.encoding_for_model(model)
    except KeyError:  # a model tiktoken does not know yet: the newest encoding
        encoding = tiktoken.get_encoding("o200k_base")
    # encode_ordinary: text that happens to spell a special token
    # ("<|endoftext|>") is counted as text, not refused.
    return f"tiktoken:{encoding.name}", lambda text: len(encoding.encode_ordinary(text))


_COUNTERS: dict[str, TiktokenCounter] = {}
_ESTIMATE = EstimateCounter()


def counter_for(provider: str, model: str) -> TokenCounter:
    """The best counter for a provider's model (one per OpenAI model, shared)."""
    # By the model's name, whichever provider serves it (Azure, proxies).
    if model and is_openai_model(model):
        counter = _COUNTERS.get(model)
        if counter is None:
            counter = _COUNTERS[model] = TiktokenCounter(model)
        return counter
    return _ESTIMATE
