"""Memory under huge messages (docs/security.md), against the real server.

Before the caps a 50 MB chat prompt was accepted and stored, and every later
turn loaded it, re-sent it and grew the server's RSS by about 50 MiB. Now a
prompt over session.maxPromptChars is refused with -32602 before anything is
stored, and tool results over session.maxToolResultChars keep head and tail,
so the per-turn working set stays bounded. The model is the real openai
provider talking to a loopback fake (tests/fakes/http_backend.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.http_backend import FakeBackend, Reply, openai_chunk, sse
from tests.reliability.harness import LspProcess
from tests.reliability.wires import OPENAI

MIB = 1024  # rss_kib() is in KiB


@pytest.fixture
def fake_backend() -> Iterator[FakeBackend]:
    # Eleven turns with a server under load can outlast the default 30 s.
    with FakeBackend(hard_timeout=600) as backend:
        yield backend


def tool_call_reply(call_id: str, path: str) -> Reply:
    arguments = json.dumps({"path": path})
    return OPENAI.reply([
        sse(openai_chunk(tool_calls=[{"index": 0, "id": call_id, "type": "function",
                                      "function": {"name": "read_file", "arguments": ""}}])),
        sse(openai_chunk(tool_calls=[{"index": 0, "function": {"arguments": arguments}}])),
        sse(openai_chunk(finish_reason="tool_calls")),
        *OPENAI.tail[1:],
    ])


def start(tmp_path: Path, workspace: Path, backend: FakeBackend, **session: Any) -> Any:
    # A window big enough for every capped result: this is about the caps,
    # not the context budget (tests/e2e/test_context.py), which would
    # otherwise cut older results and compact for the fake's 8192 tokens.
    settings = OPENAI.settings(backend.url, session=session, contextWindow=1_000_000)
    return LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                            settings=settings, env={"OPENAI_API_KEY": "sk-test-memory"},
                            timeout=60)


def test_a_50_mb_prompt_is_refused_clearly_and_nothing_is_stored(
    tmp_path: Path, workspace: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", OPENAI.route, OPENAI.healthy("Fine."))
    with start(tmp_path, workspace, fake_backend) as lsp:
        before = lsp.rss_kib()
        huge = "lorem ipsum " * (50 * 1024 * 1024 // 12)
        response = lsp.request("agentls/chat", {"prompt": huge}, timeout=120)
        error = response.get("error")
        assert error is not None and error["code"] == -32602, response
        message = error["message"]
        assert "262,144" in message and "session.maxPromptChars" in message, message
        assert len(message) < 500  # the prompt is not echoed back
        assert lsp.result("agentls/sessions", {})["sessions"] == []
        assert fake_backend.requests_to(OPENAI.route) == []
        # The server still works, and does not keep the refused prompt around.
        ok = lsp.result("agentls/chat", {"prompt": "Hello"}, timeout=60)
        assert ok["status"] == "completed", ok
        after = lsp.rss_kib()
        # Reading a 50 MB JSON-RPC message costs memory while it is parsed;
        # what must not happen is the prompt staying resident (stored, copied
        # into history). Generous: the 50 MB text alone would exceed it twice.
        assert after - before < 120 * MIB, (before, after)


def test_large_tool_results_are_capped_and_rss_growth_stays_bounded(
    tmp_path: Path, workspace: Path, fake_backend: FakeBackend
) -> None:
    big = "".join(f"line {i:07d}: " + "x" * 80 + "\n" for i in range(20_000))  # ~1.8 MB
    (workspace / "big.log").write_text(big)
    turns = 11
    replies: list[Reply] = []
    for turn in range(turns):
        replies += [tool_call_reply(f"call-{turn}", "big.log"), OPENAI.healthy(f"Turn {turn}.")]
    fake_backend.script("POST", OPENAI.route, *replies)

    with start(tmp_path, workspace, fake_backend, maxToolResultChars=20_000) as lsp:
        session_id = None
        rss: list[int] = []
        for turn in range(turns):
            params: dict[str, Any] = {"prompt": f"Read big.log ({turn})."}
            if session_id:
                params["sessionId"] = session_id
            result = lsp.result("agentls/chat", params, timeout=60)
            assert result["status"] == "completed", result
            session_id = result["sessionId"]
            rss.append(lsp.rss_kib())

        stored = lsp.result("agentls/session", {"sessionId": session_id})["messages"]
        tools = [m for m in stored if m["role"] == "tool"]
        assert len(tools) == turns
        for message in tools:
            assert len(message["content"]) < 21_000
            assert "session.maxToolResultChars" in message["content"]
            assert message["content"].startswith("line 0000000")  # head kept
        # What the model was sent is capped too: the last request carries all
        # eleven results, each capped.
        last = fake_backend.requests_to(OPENAI.route)[-1].json
        sent = [m for m in last["messages"] if m["role"] == "tool"]
        assert len(sent) == turns and all(len(m["content"]) < 21_000 for m in sent)
        # Bounded per-turn working set: from turn 2 to turn 11 RSS may grow
        # with the (capped) history, not by megabytes per turn.
        growth = rss[-1] - rss[1]
        assert growth < 40 * MIB, rss
