"""Counting tokens for the context budget (core/context.py).

A real tokenizer where one is known: tiktoken for OpenAI models. It is
imported and loaded lazily, in a background thread, the first time an
OpenAI-model request is budgeted: never at start-up and never on the
inline-completion path; and tiktoken fetches its BPE file over the network
on first use, so until it is ready (or when it cannot load, offline) the
estimate below answers instead.

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
from typing import Any, Protocol

__all__ = [
    "BYTES_PER_TOKEN",
    "EstimateCounter",
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


class TiktokenCounter:
    """tiktoken's encoding for `model`, loaded in the background; the
    estimate answers until then, and for good when tiktoken cannot load."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.name = "estimate"
        self._encoding: Any = None
        self._failed = False
        self._lock = threading.Lock()
        self._started = False

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._load, name="agentls-tiktoken", daemon=True).start()

    def load_now(self) -> bool:
        """Load in this thread (tests and benchmarks); True when tiktoken answers."""
        with self._lock:
            self._started = True
        self._load()
        return self._encoding is not None

    def _load(self) -> None:
        try:
            import tiktoken

            try:
                encoding = tiktoken.encoding_for_model(self.model)
            except KeyError:  # a model tiktoken does not know yet: the newest encoding
                encoding = tiktoken.get_encoding("o200k_base")
            encoding.encode_ordinary("warm up")
        except Exception as exc:  # not installed, offline, corrupt cache
            log.info("tiktoken is not available for %s (%s); estimating tokens instead",
                     self.model, exc)
            self._failed = True
            return
        self._encoding = encoding
        self.name = f"tiktoken:{encoding.name}"

    def count(self, text: str) -> int:
        encoding = self._encoding
        if encoding is None:
            if not self._started and not self._failed:
                self.start()
            return estimate_tokens(text)
        if not text:
            return 0
        # encode_ordinary: text that happens to spell a special token
        # ("<|endoftext|>") is counted as text, not refused.
        return len(encoding.encode_ordinary(text))

    @property
    def exact(self) -> bool:
        return self._encoding is not None


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
