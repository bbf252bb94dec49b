"""A provider may ask inline completion for less context than
inlineCompletion.maxPrefixChars (the embedded CPU model does:
providerOptions.completion_prefix_chars, default 2000); never for more."""

from __future__ import annotations

import asyncio

from agentls.core.provider.contract import ProviderConfig
from agentls.core.settings.schema import InlineCompletionSettings
from agentls.features.inline_completion import InlineCompletionFeature, InlineRequest
from agentls.providers.scripted import ScriptedProvider

TEXT = "".join(f"value_{n} = compute({n})\n" for n in range(400)) + "result = "


def prefix_sent(preferred: int | None, max_prefix_chars: int) -> str:
    provider = ScriptedProvider(ProviderConfig(name="scripted", options={
        "script": {"fim": [{"text": "42"}]}}))
    if preferred is not None:
        provider.preferred_prefix_chars = preferred  # type: ignore[attr-defined]
    feature = InlineCompletionFeature()
    settings = InlineCompletionSettings(max_prefix_chars=max_prefix_chars, debounce_ms=0)
    request = InlineRequest(uri="file:///w/a.py", language_id="python", text=TEXT,
                            offset=len(TEXT), invoked=True)
    answer = asyncio.run(feature.complete(request, lambda: provider, settings))
    assert answer.items == ("42",)
    prefix: str = provider.requests[-1]["prefix"]
    return prefix


def test_the_providers_smaller_budget_applies() -> None:
    # At least three quarters of the budget: the window starts in steps of
    # an eighth (document.py), a line of TEXT is under 30 characters.
    assert 4500 - 30 < len(prefix_sent(None, 6000)) <= 6000
    sent = prefix_sent(500, 6000)
    assert 375 - 30 < len(sent) <= 500 and sent.endswith("result = ")


def test_a_larger_preference_does_not_raise_the_setting() -> None:
    assert len(prefix_sent(10_000, 1000)) <= 1000
