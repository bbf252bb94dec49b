"""A provider may ask inline completion for less context than
inlineCompletion.maxPrefixChars and maxSuffixChars (the embedded CPU model
does: providerOptions.completion_prefix_chars, default 2000, and
completion_suffix_chars, default 600); never for more."""

from __future__ import annotations

import asyncio

from agentls.core.provider.contract import ProviderConfig
from agentls.core.settings.schema import InlineCompletionSettings
from agentls.features.inline_completion import InlineCompletionFeature, InlineRequest
from agentls.providers.scripted import ScriptedProvider

TEXT = "".join(f"value_{n} = compute({n})\n" for n in range(400)) + "result = "
AFTER = "\n" + "".join(f"print(value_{n})\n" for n in range(300))


def sent(preferred: int | None, max_prefix_chars: int, *, side: str = "prefix",
         max_suffix_chars: int = 2000) -> str:
    provider = ScriptedProvider(ProviderConfig(name="scripted", options={
        "script": {"fim": [{"text": "42"}]}}))
    if preferred is not None:
        setattr(provider, f"preferred_{side}_chars", preferred)
    feature = InlineCompletionFeature()
    settings = InlineCompletionSettings(max_prefix_chars=max_prefix_chars,
                                        max_suffix_chars=max_suffix_chars, debounce_ms=0)
    request = InlineRequest(uri="file:///w/a.py", language_id="python", text=TEXT + AFTER,
                            offset=len(TEXT), invoked=True)
    answer = asyncio.run(feature.complete(request, lambda: provider, settings))
    assert answer.items == ("42",)
    text: str = provider.requests[-1][side]
    return text


def test_the_providers_smaller_budget_applies() -> None:
    # At least three quarters of the budget: the window starts in steps of
    # an eighth (document.py), a line of TEXT is under 30 characters.
    assert 4500 - 30 < len(sent(None, 6000)) <= 6000
    prefix = sent(500, 6000)
    assert 375 - 30 < len(prefix) <= 500 and prefix.endswith("result = ")


def test_a_larger_preference_does_not_raise_the_setting() -> None:
    assert len(sent(10_000, 1000)) <= 1000


def test_the_providers_smaller_suffix_budget_applies_and_never_raises_the_setting() -> None:
    assert 2000 - 20 < len(sent(None, 6000, side="suffix")) <= 2000
    suffix = sent(600, 6000, side="suffix")
    assert 600 - 20 < len(suffix) <= 600 and suffix.endswith("\n")  # whole lines
    assert len(sent(10_000, 6000, side="suffix", max_suffix_chars=800)) <= 800
