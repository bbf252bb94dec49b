"""Stops a model's output stream that has run away.

Two guards, both pure logic fed with the streamed text:

- an output cap: small models, or servers that ignore the request's
  max_tokens, can stream for minutes. The cap is passed to the provider as
  max_tokens *and* enforced here on the stream, counting the tokens the
  provider reports when it does and about four characters per token when it
  does not;
- a degeneration detector: a stream whose tail is one short unit repeated
  over and over (`.x.x.x.x`, the same line again and again) will not recover,
  so waiting for the cap wastes the user's time (seen with Gemma 3 270M on
  llama.cpp's server, still streaming `.x.x.x` after 120 s).

The detector looks only at the tail: the last `min_chars` characters (more
for long units) must all repeat with one period of at most `max_period`
characters, at least `min_repeats` times (units longer than SHORT_PERIOD
need LONG_REPEATS: Qwen2.5-Coder-0.5B repeated a 297-character pair of
JSON lines 21 times). Thresholds are chosen so that ordinary output does
not trip it: a `====` separator or a markdown table rule is far shorter
than 1024 characters, and rows of a real table or lines of real code differ
from each other.

Only periods at which the tail's last characters occur again are tried
(found with str.rfind, in C), nearest first, so a check costs a few
searches and comparisons of the window rather than one per possible period:
periods of a few KB cost no more than short ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["CHARS_PER_TOKEN", "StreamGuard", "StreamStop", "repeating_tail", "window_chars"]

# Tokens-from-characters estimate for providers that report no usage while
# streaming. English text and code average 3.5-4.5 characters a token; 5 is
# deliberately high so that a server honouring max_tokens ends the reply
# itself and this backstop only stops servers that ignore it.
CHARS_PER_TOKEN = 5

# Detector thresholds (see the module docstring).
MIN_REPEAT_CHARS = 1024
MIN_REPEATS = 10
SHORT_PERIOD = 256  # units up to this long must repeat MIN_REPEATS times
LONG_REPEATS = 4  # longer units (whole lines, JSON objects) this many times
MAX_PERIOD = 4096
# The tail whose reappearance gives the candidate periods, and how many
# candidates one check tries at most (whitespace-heavy code can repeat the
# needle often without being periodic).
NEEDLE_CHARS = 32
MAX_CANDIDATES = 256
# Re-check after this many new characters: doing it per delta would be
# wasteful and doing it rarely lets little junk through.
CHECK_EVERY = 128


def min_repeats_for(period: int) -> int:
    return MIN_REPEATS if period <= SHORT_PERIOD else LONG_REPEATS


def window_chars(max_period: int = MAX_PERIOD) -> int:
    """How much of the tail the detector needs to see."""
    return max(MIN_REPEAT_CHARS, min_repeats_for(max_period) * max_period,
               MIN_REPEATS * SHORT_PERIOD) + max_period


def repeating_tail(
    text: str,
    *,
    min_chars: int = MIN_REPEAT_CHARS,
    min_repeats: int | None = None,
    max_period: int = MAX_PERIOD,
) -> str | None:
    """The repeated unit when `text` ends in a degenerate repetition, else None.

    True when, for some period p <= max_period, the last
    max(min_chars, repeats * p) characters all equal the character p
    positions before them, where repeats is `min_repeats` when given, else
    min_repeats_for(p). The smallest such p is returned (so `.x.x` gives
    `.x`, not `.x.x`)."""
    size = len(text)
    needle_size = min(NEEDLE_CHARS, size // 2)
    if needle_size == 0:
        return None
    needle = text[size - needle_size:]
    # An occurrence of the needle ending p characters before the end gives
    # the candidate period p; the nearest occurrence is the smallest p.
    end = size - 1
    for _ in range(MAX_CANDIDATES):
        at = text.rfind(needle, 0, end)
        if at < 0:
            return None
        period = size - needle_size - at
        if period > max_period:
            return None
        end = at + needle_size - 1
        repeats = min_repeats if min_repeats is not None else min_repeats_for(period)
        span = max(min_chars, repeats * period)
        if size < span + period:
            continue  # a longer period needs even more text, but a shorter one may not
        if text.endswith(text[size - span - period:size - period]):
            return text[-period:]
    return None


_WINDOW = window_chars()


@dataclass(frozen=True)
class StreamStop:
    """Why a stream was stopped: finish reason `length`, and a sentence for the user."""

    reason: str  # "output_cap" | "degenerate"
    message: str
    finish_reason: Literal["length"] = "length"


class StreamGuard:
    """Fed every streamed delta; says when to stop the stream."""

    def __init__(self, max_output_tokens: int | None, *, setting: str = "session.maxOutputTokens"):
        self.max_output_tokens = max_output_tokens
        self.setting = setting
        self._window = ""  # only the tail is kept: the detector needs no more
        self._chars = 0
        self._since_check = 0
        self._reported_tokens = 0

    def feed(
        self, delta: str, *, other_chars: int = 0, reported_output_tokens: int = 0
    ) -> StreamStop | None:
        """Account for `delta` (streamed text or reasoning, checked for
        repetition), `other_chars` (tool-call argument text, counted against
        the cap only) and the provider's running output-token count, if any;
        a StreamStop when the stream must end."""
        self._chars += len(delta) + other_chars
        self._reported_tokens = max(self._reported_tokens, reported_output_tokens)
        cap = self.max_output_tokens
        if cap is not None and self.output_tokens() >= cap:
            return StreamStop(
                "output_cap",
                f"The reply was cut off at about {cap} output tokens ({self.setting}). "
                "Ask the agent to continue, or raise the setting.",
            )
        if not delta:
            return None
        self._window = (self._window + delta)[-_WINDOW:]
        self._since_check += len(delta)
        if self._since_check < CHECK_EVERY:
            return None
        self._since_check = 0
        unit = repeating_tail(self._window)
        if unit is None:
            return None
        shown = unit if len(unit) <= 20 else unit[:20] + "…"
        return StreamStop(
            "degenerate",
            f"Stopped the reply: the model kept repeating {shown!r}. This happens with "
            "small models; try again, rephrase, or use a larger model.",
        )

    def output_tokens(self) -> int:
        """Output tokens so far: the provider's running count, or the
        estimate from characters when that is higher (some providers report
        a count once, early, and never again while streaming)."""
        return max(self._reported_tokens, self._chars // CHARS_PER_TOKEN)
