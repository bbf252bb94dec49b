"""Token counting for the context budget (core/context/tokens.py).

tiktoken itself needs its BPE file from the network on first use, which a
test machine may not have; the loader's behaviour (background, fallback to
the estimate, never on the start-up path) is tested with a stand-in module
in sys.modules, and the import discipline in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
import threading
import types
from typing import Any

import pytest

from agentls.core.context import tokens
from agentls.core.context.tokens import (
    EstimateCounter,
    TiktokenCounter,
    counter_for,
    estimate_tokens,
    is_openai_model,
)


def test_estimate_is_bytes_over_three() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abc") == 1
    assert estimate_tokens("abcd") == 2
    assert estimate_tokens("日本語") == 3  # 9 bytes: about a token per character
    assert EstimateCounter().count("x" * 300) == 100
    assert not EstimateCounter().exact


@pytest.mark.parametrize(("model", "openai"), [
    ("gpt-4o-mini", True), ("o3-mini", True), ("openai/gpt-4.1", True), ("GPT-5", True),
    ("llama3.1:8b", False), ("claude-sonnet-4-5", False), ("qwen2.5-coder", False),
    ("test-model", False), ("", False),
])
def test_openai_models_get_tiktoken(model: str, openai: bool) -> None:
    assert is_openai_model(model) is openai
    counter = counter_for("openai", model)
    assert isinstance(counter, TiktokenCounter) is openai


class FakeEncoding:
    name = "fake_base"

    def encode_ordinary(self, text: str) -> list[int]:
        return list(range(len(text.split())))


def fake_tiktoken(monkeypatch: pytest.MonkeyPatch, *, gate: threading.Event | None = None,
                  fail: bool = False) -> None:
    module: Any = types.ModuleType("tiktoken")

    def encoding_for_model(model: str) -> FakeEncoding:
        if gate is not None:
            gate.wait(5)
        if fail:
            raise ConnectionError("cannot resolve openaipublic.blob.core.windows.net")
        return FakeEncoding()

    module.encoding_for_model = encoding_for_model
    module.get_encoding = lambda name: FakeEncoding()
    monkeypatch.setitem(sys.modules, "tiktoken", module)


def test_tiktoken_loads_in_the_background_and_the_estimate_answers_meanwhile(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = threading.Event()
    fake_tiktoken(monkeypatch, gate=gate)
    counter = TiktokenCounter("gpt-4o")
    text = "one two three four five six"
    assert counter.count(text) == estimate_tokens(text)  # not blocked by the slow load
    assert not counter.exact and counter.name == "estimate"
    gate.set()
    for _ in range(500):
        if counter.exact:
            break
        threading.Event().wait(0.01)
    assert counter.exact and counter.name == "tiktoken:fake_base"
    assert counter.count(text) == 6


def test_offline_tiktoken_falls_back_to_the_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_tiktoken(monkeypatch, fail=True)
    counter = TiktokenCounter("gpt-4o")
    assert counter.load_now() is False
    assert not counter.exact
    assert counter.count("abcdef") == 2


def test_counters_are_shared_per_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "_COUNTERS", {})
    assert counter_for("openai", "gpt-4o") is counter_for("azure", "gpt-4o")
    assert counter_for("openai", "gpt-4o") is not counter_for("openai", "gpt-4o-mini")


def test_tiktoken_is_not_imported_at_start_up_or_by_a_turn_module() -> None:
    script = (
        "import sys\n"
        "import agentls.lsp.server, agentls.core.context.fitting, agentls.core.agent.orchestrator\n"
        "import agentls.features.inline_completion\n"
        "print('tiktoken' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "False"
