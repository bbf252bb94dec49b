"""A keystroke's request stopped by the next keystroke keeps the cache the
one after it needs: the real llama.cpp engine (llama-cpp-python) with the
packaged Qwen2.5-Coder-0.5B, in this process, with the child's own
instrumentation (providers/local/engine_work.py, prompt_reuse.py).

Typing sends a request per key and each supersedes the one before. When a
request was stopped before its first batch, llama-cpp-python had already cut
the cache back to the prompt's common prefix (and the moved suffix with it),
so the next keystroke evaluated the whole suffix again: 4-6 s pauses in the
middle of a line in the typing replay (bench/README.md, "Typing replay")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import require_completion_model

local = require_completion_model()

from agentls.providers.local import engine_work, prompt_reuse  # noqa: E402
from agentls.providers.local.models.catalog import locate_model_file  # noqa: E402

pytestmark = pytest.mark.slow

SOURCE = Path(prompt_reuse.__file__).read_text(encoding="utf-8")
PREFIX, SUFFIX = SOURCE[:1500], SOURCE[1500:2700]  # ~700 tokens in all, ~280 after the cursor


@pytest.fixture(scope="module")
def llama() -> Iterator[Any]:
    import llama_cpp
    from llama_cpp import llama_cpp as lib

    class Engine(llama_cpp.Llama):  # the child's patches, on a class of this test's own
        pass

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lib, "llama_context_default_params",
                      prompt_reuse.reuse_params(lib.llama_context_default_params))
        engine_work.install(Engine, lib)
        model = Engine(model_path=str(locate_model_file(local.DEFAULT_COMPLETION_MODEL)),
                       n_ctx=2048, n_batch=256, n_ubatch=256, n_threads=2, verbose=False)
    yield model
    model.close()


def keystroke(llama: Any, typed: str, *, gone: bool = False) -> engine_work.Work:
    """One request whose prompt has `typed` at the cursor; `gone`: its client
    went before the engine started on it."""
    work = engine_work.Work(1, "/v1/completions", 0.0)
    if gone:
        work.gone.set()
    prompt = llama.tokenize(f"<|fim_prefix|>{PREFIX}{typed}<|fim_suffix|>{SUFFIX}<|fim_middle|>"
                            .encode(), special=True)
    token = engine_work._CURRENT.set(work)
    try:
        for produced, _ in enumerate(llama.generate(prompt, temp=0.0)):
            if produced >= 1:
                break
    except engine_work.Superseded:
        work.outcome = "stopped"
    finally:
        engine_work._CURRENT.reset(token)
    return work


def test_a_request_gone_before_or_while_its_keys_are_evaluated_leaves_the_suffix_cached(
    llama: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    cold = keystroke(llama, "")
    assert cold.prompt_evaluated > 500  # the whole prompt, once
    first = keystroke(llama, "x")
    assert first.prompt_moved > 200 and first.prompt_evaluated <= 8, first

    # Superseded before the engine started on it: nothing evaluated, nothing lost.
    skipped = keystroke(llama, "xy", gone=True)
    assert skipped.outcome == "stopped" and skipped.prompt_evaluated == 0
    after_skipped = keystroke(llama, "xyz")
    assert after_skipped.prompt_moved > 200, after_skipped
    assert after_skipped.prompt_evaluated <= 8, after_skipped  # not the ~280 after the cursor

    # Superseded while its typed tokens were evaluated: they are few, so the
    # suffix is moved behind them before the request stops.
    decode = prompt_reuse.PromptReuse.decode

    def superseded_meanwhile(self: Any, tokens: Any, position: int) -> None:
        current = engine_work._CURRENT.get()
        if current is not None:
            current.gone.set()
        decode(self, tokens, position)

    monkeypatch.setattr(prompt_reuse.PromptReuse, "decode", superseded_meanwhile)
    stopped = keystroke(llama, "xyzw")
    monkeypatch.undo()
    assert stopped.outcome == "stopped" and stopped.generated == 0
    after_stopped = keystroke(llama, "xyzwv")
    assert after_stopped.prompt_moved > 200, after_stopped
    assert after_stopped.prompt_evaluated <= 8, after_stopped
