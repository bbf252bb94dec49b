"""Context that fits and project instructions, through the real server
(subprocess over LSP) and the openai provider against the loopback fake
backend, which answers like a model: a prompt "read <path>" gets a
read_file call, a tool result gets a short answer, a compaction request
gets a summary, and (ContextLimit) a request over N tokens gets OpenAI's
real context_length_exceeded error.

Covered: a 30-turn session that reads a file every turn keeps working, the
context_length retry path is exercised and every stored message survives;
agentls/compact (and its errors); the root AGENTS.md in every system
prompt, re-read after a change, capped at 32 KB with a note; a subfolder's
AGENTS.md once a file under it is read; the instruction files named in the
messages the chat views show.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.test_chat import agentls, wait_until
from tests.fakes.http_backend import (
    SSE_DONE,
    ContextLimit,
    FakeBackend,
    RecordedRequest,
    Reply,
    openai_chunk,
    openai_usage_chunk,
    request_tokens,
    sse,
    sse_reply,
)

COMPACT_MARK = "You compact the conversation"


def text_reply(text: str) -> Reply:
    return sse_reply([sse(openai_chunk(text)), sse(openai_chunk(finish_reason="stop")),
                      sse(openai_usage_chunk(100, 5)), SSE_DONE])


def like_a_model(request: RecordedRequest) -> Reply:
    messages = request.json["messages"]
    if messages[0]["content"].startswith(COMPACT_MARK):
        prompts = messages[-1]["content"].count("User: ")
        return text_reply(f"Summary: the user had {prompts} more files read.")
    last = messages[-1]
    if last["role"] == "user":
        match = re.search(r"read (\S+)", last["content"])
        if match:
            n = len(request.json["messages"])
            call = {"index": 0, "id": f"call_{n}", "type": "function",
                    "function": {"name": "read_file",
                                 "arguments": json.dumps({"path": match.group(1)})}}
            return sse_reply([sse(openai_chunk(tool_calls=[call])),
                              sse(openai_chunk(finish_reason="tool_calls")), SSE_DONE])
    return text_reply("Done.")


def chat_requests(backend: FakeBackend) -> list[dict[str, Any]]:
    return [r.json for r in backend.requests_to("/v1/chat/completions")]


def settings_for(backend: FakeBackend, **extra: Any) -> dict[str, Any]:
    # The prompts name the files the scripted model then reads: attached to
    # the prompt as well (features/prompt/named_files.py), each read would answer
    # that the text is above; these tests are about the reads' own results.
    return {"provider": "openai", "baseUrl": backend.url + "/v1", "model": "test-model",
            "features": {"disabled": ["named-files"]}, **extra}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "docs").mkdir(parents=True)
    for n in range(1, 31):
        line = f"File {n}: notes about part {n} of the project. "
        (root / "docs" / f"f{n}.txt").write_text((line * 60)[:2400] + "\n")
    return root


# --------------------------------------------------------------------------- budget


async def test_thirty_turns_keep_working_through_a_small_window(
    tmp_path: Path, workspace: Path
) -> None:
    with FakeBackend(hard_timeout=170) as backend:
        # agentls is told 16000 tokens; the server really takes 6000, says so
        # in its error, and agentls must learn it and keep working.
        limit = ContextLimit(6000, like_a_model)
        backend.respond("POST", "/v1/chat/completions", limit)
        async with agentls(workspace, tmp_path / "state",
                           settings_for(backend, contextWindow=16000)) as s:
            sid = None
            for n in range(1, 31):
                params: dict[str, Any] = {"prompt": f"Please read docs/f{n}.txt"}
                if sid:
                    params["sessionId"] = sid
                result = await s.chat(**params)
                assert result["status"] == "completed", (n, result.get("error"))
                sid = result["sessionId"]
                tool = next(m for m in result["messages"] if m["role"] == "tool")
                assert f"File {n}:" in tool["content"]
            stored = await s.request("agentls/session", {"sessionId": sid})
        # The retry path ran: rejected once, compacted, retried, learned the limit.
        assert 1 <= len(limit.rejected) <= 2, limit.rejected
        assert all(tokens <= 6000 for tokens in limit.accepted)
        summaries = [m for m in stored["messages"]
                     if (m.get("metadata") or {}).get("source") == "compaction"]
        assert summaries and any(m["metadata"]["reason"] == "context_length" for m in summaries)
        originals = [m for m in stored["messages"] if m not in summaries]
        assert len(originals) == 30 * 4  # every original message is stored
        assert [m["content"] for m in originals if m["role"] == "user"] == [
            f"Please read docs/f{n}.txt" for n in range(1, 31)]
        # The summaries were announced like any message.
        announced = [m["message"] for m in s.messages
                     if (m["message"].get("metadata") or {}).get("source") == "compaction"]
        assert announced == summaries
        # The last request: the newest prompt and its tool result whole, the
        # summary in the system prompt, not the first turns.
        last = chat_requests(backend)[-1]
        assert "Summary: the user had" in last["messages"][0]["content"]
        assert last["messages"][-3]["content"] == "Please read docs/f30.txt"
        assert last["messages"][-1]["content"] == (workspace / "docs/f30.txt").read_text()
        assert not any("docs/f1.txt" in json.dumps(m) for m in last["messages"][1:])


async def test_a_named_file_read_again_is_sent_once_and_successive_turns_fit(
    tmp_path: Path, workspace: Path
) -> None:
    """The prompt names big.txt (attached) and the model reads it anyway: the
    read answers that the text is above, so no request holds it twice; when
    later turns overflow the window, the older turns' attachments go first."""
    big = "".join(f"line {n:03d} of the big file, nothing to see here.\n"
                  for n in range(100))[:5000]
    (workspace / "big.txt").write_text(big)
    with FakeBackend() as backend:
        limit = ContextLimit(6000, like_a_model)  # 24,000 bytes of messages and tools
        backend.respond("POST", "/v1/chat/completions", limit)
        settings = {"provider": "openai", "baseUrl": backend.url + "/v1", "model": "test-model",
                    "contextWindow": 16000}  # the fake rejects first, and agentls learns
        async with agentls(workspace, tmp_path / "state", settings) as s:
            sid = None
            for n in range(1, 7):
                params: dict[str, Any] = {"prompt": "Please read big.txt"}
                if sid:
                    params["sessionId"] = sid
                result = await s.chat(**params)
                assert result["status"] == "completed", (n, result.get("error"))
                sid = result["sessionId"]
                tool = next(m for m in result["messages"] if m["role"] == "tool")
                assert "big.txt is unchanged: its whole text is already above" in tool["content"]
                assert big.strip() in result["messages"][0]["content"]  # attached
    requests = chat_requests(backend)
    (rejected,) = limit.rejected  # the window overflowed once, and agentls learned it
    retry = requests[[request_tokens(r) for r in backend.requests_to("/v1/chat/completions")
                      ].index(rejected) + 1]
    for request in requests:  # no read result repeats an attached text
        assert not any(big.strip() in str(m.get("content")) for m in request["messages"]
                       if m["role"] == "tool")
    for messages in (requests[-1]["messages"], retry["messages"]):
        copies = [m for m in messages if big.strip() in str(m.get("content"))]
        assert [m["role"] for m in copies] == ["user"]  # only the newest turn's attachment
    # The retry after the window's error left out the older turns' attachments
    # and was not compacted (compaction came later, when that was not enough).
    sent = retry["messages"]
    assert sum('<file path="big.txt" omitted="true"/>' in str(m["content"]) for m in sent) == 3
    assert "Summary of the earlier part" not in sent[0]["content"]


async def test_compact_on_request(tmp_path: Path, workspace: Path) -> None:
    with FakeBackend() as backend:
        backend.respond("POST", "/v1/chat/completions", like_a_model)
        async with agentls(workspace, tmp_path / "state", settings_for(backend)) as s:
            first = await s.chat(prompt="Please read docs/f1.txt")
            sid = first["sessionId"]
            await s.chat(prompt="Please read docs/f2.txt", sessionId=sid)
            answer = await s.request("agentls/compact", {"sessionId": sid})
            assert answer["compacted"] is True and answer["compactedThrough"] == 8
            assert answer["message"]["metadata"]["source"] == "compaction"
            assert answer["message"]["content"] == "Summary: the user had 2 more files read."
            await wait_until(lambda: any(
                m["message"] == answer["message"] and m["index"] == 8 for m in s.messages),
                "the summary announced")
            again = await s.request("agentls/compact", {"sessionId": sid})
            assert again["compacted"] is False and "Nothing to compact" in again["reason"]

            third = await s.chat(prompt="What now?", sessionId=sid)
            assert third["status"] == "completed"
            sent = chat_requests(backend)[-1]["messages"]
            assert "Summary: the user had 2 more files read." in sent[0]["content"]
            assert [m["role"] for m in sent] == ["system", "user"]
            stored = await s.request("agentls/session", {"sessionId": sid})
            assert len(stored["messages"]) == 8 + 1 + 2

            for params, words in (({}, "sessionId"), ({"sessionId": "nope"}, "Unknown")):
                with pytest.raises(JsonRpcException, match=words):
                    await s.request("agentls/compact", params)


# --------------------------------------------------------------------------- instructions


async def test_project_instructions_reach_the_system_prompt(
    tmp_path: Path, workspace: Path
) -> None:
    (workspace / "AGENTS.md").write_text("Always run ROOT-RULE-1 before committing.\n")
    (workspace / "pkg").mkdir()
    (workspace / "pkg" / "mod.py").write_text("x = 1\n")
    (workspace / "pkg" / "AGENTS.md").write_text("In pkg, PKG-RULE applies.\n")
    with FakeBackend() as backend:
        backend.respond("POST", "/v1/chat/completions", like_a_model)
        async with agentls(workspace, tmp_path / "state", settings_for(backend)) as s:
            first = await s.chat(prompt="Hello")
            sid = first["sessionId"]
            system = chat_requests(backend)[0]["messages"][0]["content"]
            assert "ROOT-RULE-1" in system and '<instructions file="AGENTS.md">' in system
            assert "PKG-RULE" not in system
            # The chat views are told which files were used.
            assert first["messages"][0]["metadata"]["instructions"] == ["AGENTS.md"]
            assert first["messages"][1]["metadata"]["instructions"] == ["AGENTS.md"]

            # Changed on disk: the next turn reads the new text.
            (workspace / "AGENTS.md").write_text("Now ROOT-RULE-22 holds instead.\n")
            await s.chat(prompt="Hello again", sessionId=sid)
            system = chat_requests(backend)[-1]["messages"][0]["content"]
            assert "ROOT-RULE-22" in system and "ROOT-RULE-1 " not in system

            # A file under pkg/ is read: pkg/AGENTS.md applies from then on.
            count = len(chat_requests(backend))
            third = await s.chat(prompt="Please read pkg/mod.py", sessionId=sid)
            before, after = chat_requests(backend)[count:count + 2]
            assert "PKG-RULE" not in before["messages"][0]["content"]
            assert "PKG-RULE" in after["messages"][0]["content"]
            assert third["messages"][-1]["metadata"]["instructions"] == [
                "AGENTS.md", "pkg/AGENTS.md"]
            await s.chat(prompt="And?", sessionId=sid)
            assert "PKG-RULE" in chat_requests(backend)[-1]["messages"][0]["content"]


async def test_instruction_files_are_capped_at_32_kb(tmp_path: Path, workspace: Path) -> None:
    (workspace / "CLAUDE.md").write_text("HEAD-MARK\n" + "x" * 40_000 + "\nTAIL-MARK\n")
    with FakeBackend() as backend:
        backend.respond("POST", "/v1/chat/completions", like_a_model)
        settings = settings_for(backend, instructions={"files": ["AGENTS.md", "CLAUDE.md"]},
                                contextWindow=64000)
        async with agentls(workspace, tmp_path / "state", settings) as s:
            result = await s.chat(prompt="Hello")
            assert result["status"] == "completed"
        system = chat_requests(backend)[0]["messages"][0]["content"]
        assert "HEAD-MARK" in system and "TAIL-MARK" not in system
        assert "CLAUDE.md is 40,021 bytes; only its first 32 KB are included" in system
        assert 32 * 1024 < len(system) < 32 * 1024 + 4000
