"""A fill asked for while the user types that takes long ends at its next
complete line: after FIRST_LINES_SECONDS the suggestion is the whole lines
read so far (a laptop CPU writes a multi-line fill for seconds); a fast
backend's fill, and one the user invoked and waits for, is whole."""

from __future__ import annotations

import asyncio

import pytest

from agentls.core.provider.contract import ProviderConfig
from agentls.core.settings.schema import InlineCompletionSettings
from agentls.features.inline_completion import InlineCompletionFeature, InlineRequest
from agentls.features.inline_completion import feature as feature_module
from agentls.providers.scripted import ScriptedProvider

TEXT = "def totals(rows):\n    "
LINES = ["result = []\n", "    for row in rows:\n", "        result.append(sum(row))\n",
         "    return result\n"]


def suggestion(delay: float, *, invoked: bool = False) -> str:
    provider = ScriptedProvider(ProviderConfig(name="scripted", options={"script": {
        "fim": [{"chunks": LINES, "delay": delay}]}}))
    feature = InlineCompletionFeature()
    settings = InlineCompletionSettings(debounce_ms=0)
    request = InlineRequest(uri="file:///w/a.py", language_id="python", text=TEXT,
                            offset=len(TEXT), invoked=invoked)
    answer = asyncio.run(feature.complete(request, lambda: provider, settings))
    (item,) = answer.items
    return item


def test_a_fast_fill_is_whole() -> None:
    assert suggestion(0.0) == "".join(LINES).rstrip()


def test_a_slow_fill_ends_at_the_line_it_was_on_when_time_ran_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(feature_module, "FIRST_LINES_SECONDS", 0.15)
    text = suggestion(0.1)  # a line every 0.1 s: time runs out during the second
    assert text == "result = []\n    for row in rows:"
    assert suggestion(0.1, invoked=True) == "".join(LINES).rstrip()
