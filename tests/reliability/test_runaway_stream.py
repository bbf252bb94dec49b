"""A model reply that never ends, through the real server:
the openai provider streams from a loopback fake that repeats `.x` forever
(what Gemma 3 270M did on llama.cpp's server) or streams ever-new text past
session.maxOutputTokens. The turn ends promptly as `length`, the user is
told why, and the HTTP call is closed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.http_backend import STALL, FakeBackend, openai_chunk, sse, sse_reply
from tests.reliability.harness import LspProcess
from tests.reliability.wires import OPENAI


@pytest.fixture
def fake_backend() -> Iterator[FakeBackend]:
    with FakeBackend(hard_timeout=300) as backend:
        yield backend


def endless(piece: Any) -> Any:
    return sse_reply([sse(openai_chunk(piece(i))) for i in range(100_000)] + [STALL])


def run(tmp_path: Path, workspace: Path, backend: FakeBackend, **session: Any
        ) -> tuple[dict[str, Any], list[str]]:
    settings = OPENAI.settings(backend.url, session=session)
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace, settings=settings,
                          env={"OPENAI_API_KEY": "sk-test-runaway"}, timeout=60) as lsp:
        result = lsp.result("agentls/chat", {
            "prompt": "In one sentence: what does calc.py contain?"}, timeout=60)
        stored = lsp.result("agentls/session", {"sessionId": result["sessionId"]})
        return {"result": result, "stored": stored["messages"]}, lsp.shown_messages()


def test_a_repeating_stream_is_stopped_and_the_user_told(
    tmp_path: Path, workspace: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", OPENAI.route, endless(lambda i: ".x"))
    seen, shown = run(tmp_path, workspace, fake_backend)
    assert seen["result"]["status"] == "completed", seen["result"]
    answer = seen["stored"][-1]
    assert answer["role"] == "assistant" and answer["content"].startswith(".x.x")
    assert len(answer["content"]) < 5_000
    assert answer["metadata"]["finish_reason"] == "length"
    assert answer["metadata"]["stopped"]["reason"] == "degenerate"
    assert any("kept repeating" in m for m in shown), shown
    assert fake_backend.wait_for_disconnect(fake_backend.requests_to(OPENAI.route)[0], 10)


def test_unique_text_past_the_output_cap_ends_at_the_cap(
    tmp_path: Path, workspace: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", OPENAI.route, endless(lambda i: f"w{i} "))
    seen, shown = run(tmp_path, workspace, fake_backend, maxOutputTokens=100)
    answer = seen["stored"][-1]
    assert answer["metadata"]["finish_reason"] == "length"
    assert answer["metadata"]["stopped"]["reason"] == "output_cap"
    assert 400 <= len(answer["content"]) <= 520
    assert any("session.maxOutputTokens" in m for m in shown), shown
    assert fake_backend.wait_for_disconnect(fake_backend.requests_to(OPENAI.route)[0], 10)


# A pair of JSON lines, 297 characters: what Qwen2.5-Coder-0.5B repeated 21
# times until the token limit in an agent turn; longer than the old 256-character
# limit on the repeated unit.
_LINES = ('{"name": "read_inventory.py", "arguments": {"path": "inventory.py", "mode": "r", '
          '"lines": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "why": "to list the methods"}}\n'
          '{"name": "list_methods", "arguments": {"class": "Inventory", "file": "inventory.py", '
          '"sorted": true, "why": "%s"}}\n')
PAIR = _LINES % ("asked" + "." * (297 - len(_LINES % "asked")))


def test_a_long_repeated_unit_is_stopped_too(
    tmp_path: Path, workspace: Path, fake_backend: FakeBackend
) -> None:
    assert len(PAIR) == 297
    fake_backend.script("POST", OPENAI.route, endless(lambda i: PAIR[i % 99 * 3:i % 99 * 3 + 3]))
    seen, shown = run(tmp_path, workspace, fake_backend)
    answer = seen["stored"][-1]
    assert answer["metadata"]["stopped"]["reason"] == "degenerate"
    assert answer["content"].startswith(PAIR)
    assert len(answer["content"]) < 8 * len(PAIR)  # after a few repeats, not 21 or more
    assert any("kept repeating" in m for m in shown), shown
    assert fake_backend.wait_for_disconnect(fake_backend.requests_to(OPENAI.route)[0], 10)
