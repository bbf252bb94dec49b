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
characters, at least `min_repeats` times. Thresholds are chosen so that
ordinary output does not trip it: a `====` separator or a markdown table
rule is far shorter than 1024 characters, and rows of a real table or lines
of real code differ from each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["CHARS_PER_TOKEN", "StreamGuard", "StreamStop", "repeating_tail"]

# Tokens-from-characters estimate for providers that report no usage while
# streaming. English text and code average 3.5-4.5 characters a token; 5 is
# deliberately high so that a server honouring max_tokens ends the reply
# itself and this backstop only stops servers that ignore it.
CHARS_PER_TOKEN = 5

# Detector thresholds (see the module docstring).
MIN_REPEAT_CHARS = 1024
MIN_REPEATS = 10
MAX_PERIOD = 256
# Re-check after this many new characters: the check costs O(MAX_PERIOD *
# window) character comparisons (done in C by slice equality), so doing it
# per delta would be wasteful and doing it rarely lets little junk through.
CHECK_EVERY = 128


def repeating_tail(
    text: str,
    *,
    min_chars: int = MIN_REPEAT_CHARS,
    min_repeats: int = MIN_REPEATS,
    max_period: int = MAX_PERIOD,
) -> str | None:
    """The repeated unit when `text` ends in a degenerate repetition, else None.

    True when, for some period p <= max_period, the last
    max(min_chars, min_repeats * p) characters all equal the character p
    positions before them. The smallest such p is returned (so `.x.x` gives
    `.x`, not `.x.x`)."""
    for period in range(1, max_period + 1):
        span = max(min_chars, min_repeats * period)
        if len(text) < span + period:
            # Longer periods need even more text; nothing further can match.
            break
        tail = text[-(span + period):]
        if tail[period:] == tail[:-period]:
            return text[-period:]
    return None


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
        keep = MIN_REPEATS * MAX_PERIOD + MAX_PERIOD
        self._window = (self._window + delta)[-keep:]
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
