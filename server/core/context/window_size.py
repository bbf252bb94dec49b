"""How large a model's context window is, for core/context/fitting.py: the
published and default windows, the provider's own list, the limit a
context_length error names, and the `Budget` a window leaves for input.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass

from agentls.core.provider.contract import Provider

__all__ = [
    "DEFAULT_WINDOWS",
    "FALLBACK_WINDOW",
    "OPENAI_WINDOWS",
    "Budget",
    "learned_window",
    "lookup_window",
]

log = logging.getLogger("agentls.context")

# Used when neither the setting nor the provider names a window.
DEFAULT_WINDOWS: dict[str, int] = {
    "local": 8192,
    "ollama": 4096,
    "openai": 8192,
    "anthropic": 200_000,
    "scripted": 32_768,
}
FALLBACK_WINDOW = 8192
# OpenAI's models: /models carries no sizes, so the openai provider reports a
# small default for every model. Their published windows (platform.openai.com
# model pages), most specific prefix first; a server that names a smaller
# model so still gets it right after its first context_length error.
OPENAI_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("chatgpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-5", 400_000),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-4", 8_192),
    ("o1-mini", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
)


@dataclass(frozen=True)
class Budget:
    window: int
    output_reserve: int

    @property
    def margin(self) -> int:
        # Slack for what no estimate sees (chat template tokens, tool-schema framing).
        return max(64, self.window // 20)

    @property
    def input_limit(self) -> int:
        return max(0, self.window - self.output_reserve - self.margin)

    @classmethod
    def for_window(cls, window: int, output_cap: int | None) -> Budget:
        reserve = min(output_cap or 4096, max(256, window // 4))
        return cls(window, reserve)


_WINDOW_PATTERNS = (
    r"maximum context length is (\d[\d,]*)",
    r"context (?:size|window|length) (?:is |of )?\(?(\d[\d,]*) tokens",
    r"> (\d[\d,]*) maximum",
    r"exceeds? (?:the )?(?:available )?context (?:size|window|length) \((\d[\d,]*)",
)
_USED_PATTERNS = (
    r"resulted in (\d[\d,]*) tokens",
    r"\((\d[\d,]*) in the messages",
    r"prompt is too long: (\d[\d,]*) tokens",
    r"requested (\d[\d,]*) tokens",
)


def learned_window(error: str) -> tuple[int | None, int | None]:
    """(the window, the tokens the request had) as a context-length error
    states them, where it does (OpenAI, vLLM, llama.cpp, Anthropic, Ollama)."""
    return _first_number(_WINDOW_PATTERNS, error), _first_number(_USED_PATTERNS, error)


def _first_number(patterns: tuple[str, ...], text: str) -> int | None:
    for pattern in patterns:
        match = re.search(pattern, text, re.IGNORECASE)
        if match:
            return int(match.group(1).replace(",", ""))
    return None


async def lookup_window(provider: Provider, model: str) -> int:
    """The model's window as published (OpenAI's models), else as the
    provider lists it, else the provider's default."""
    name = model.lower().rsplit("/", 1)[-1]
    published = next((w for prefix, w in OPENAI_WINDOWS if name.startswith(prefix)), None)
    if published is not None and getattr(provider, "name", "") == "openai":
        return published
    default = DEFAULT_WINDOWS.get(getattr(provider, "name", ""), FALLBACK_WINDOW)
    try:
        models = await asyncio.wait_for(provider.list_models(), 15)
    except Exception as exc:  # unreachable, no /models route: the default
        # Not the message: a server may echo the API key in it.
        log.info("No model list for the context window (%s %s); using %d",
                 type(exc).__name__, getattr(exc, "code", ""), default)
        return default
    for info in models:
        if info.id == model and info.context_window > 0:
            return info.context_window
    if len(models) == 1 and models[0].context_window > 0:
        return models[0].context_window
    return default
