"""Reads through an ACP client are bounded before they are asked: a file
larger on disk than a read keeps is read from the disk (as far as the
reader's limit), never sent whole by the client; each `fs/read_text_file`
carries a `limit`; an answer larger than the limit is refused for the
disk's text. Naming a file in the prompt and `read_file` alike. And a
mention with a NUL byte is refused alone, the user told."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from acp.schema import ReadTextFileResponse

from tests.acp.harness import (
    TIMEOUT,
    RecordingClient,
    acp_agent,
    agent_env,
    allow_once,
    recorded,
    scripted_settings,
    started,
    text,
)

pytestmark = pytest.mark.asyncio

HEAD = "the first line of a huge log\n" * 300


@dataclass
class LimitedClient(RecordingClient):
    """Answers fs/read_text_file from a map (never from a huge file) and
    records each request's limit."""

    answers: dict[str, str] = field(default_factory=dict)
    limits: list[tuple[str, int | None]] = field(default_factory=list)

    async def read_text_file(self, path: str, session_id: str, limit: int | None = None,
                             line: int | None = None, **kwargs: Any) -> ReadTextFileResponse:
        self.reads.append(path)
        self.limits.append((Path(path).name, limit))
        return ReadTextFileResponse(content=self.answers.get(Path(path).name, "client text"))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    with open(folder / "huge.log", "wb") as handle:  # 2 GB, sparse after its first lines
        handle.write(HEAD.encode())
        handle.truncate(2 * 1024 ** 3)
    (folder / "small.py").write_text("x = 1\n")
    (folder / "grown.txt").write_text("the disk's text\n")
    return folder


async def test_a_huge_file_is_never_asked_of_the_client_and_every_read_has_a_limit(
        tmp_path: Path, workspace: Path) -> None:
    settings, record = scripted_settings(tmp_path, [
        {"text": "Reading.", "tool_calls": [
            {"name": "read_file", "arguments": {"path": "huge.log"}, "id": "c1"},
            {"name": "read_file", "arguments": {"path": "small.py"}, "id": "c2"},
            {"name": "read_file", "arguments": {"path": "grown.txt"}, "id": "c3"}]},
        {"text": "Done."},
    ])
    client = LimitedClient(answer=allow_once, answers={
        "small.py": "x = 1  # unsaved\n", "grown.txt": "B" * (2 * 1024 * 1024)})
    async with acp_agent(client, tmp_path, agent_env(tmp_path, settings)) as (conn, _, log):
        await started(conn)
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        answer = await asyncio.wait_for(conn.prompt(
            session_id=new.session_id, prompt=text("What do huge.log and small.py say?")),
            TIMEOUT)
        assert answer.stop_reason == "end_turn", log.read_text()
    assert "huge.log" not in {name for name, _ in client.limits}
    assert client.limits and all(limit is not None for _, limit in client.limits), client.limits
    sent = recorded(record)
    results = [m for m in sent[1]["messages"] if m["role"] == "tool"]
    huge, small, grown = (str(m["content"]) for m in results)
    assert huge.startswith(HEAD) and "truncated" in huge  # the disk's, cut at read_file's limit
    assert small == "x = 1  # unsaved\n"  # the client's buffer, as before
    assert grown == "the disk's text\n"  # the oversized answer refused


async def test_a_mention_with_a_nul_byte_is_refused_alone_and_the_user_is_told(
        tmp_path: Path, workspace: Path) -> None:
    settings, record = scripted_settings(tmp_path, [{"text": "Done."}])
    client = RecordingClient(answer=allow_once)
    async with acp_agent(client, tmp_path, agent_env(tmp_path, settings)) as (conn, _, log):
        await started(conn, fs=False)
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        answer = await asyncio.wait_for(conn.prompt(
            session_id=new.session_id,
            prompt=text('Compare @file:"b\x00ad.py" with @file:small.py')), TIMEOUT)
        assert answer.stop_reason == "end_turn", log.read_text()
    told = client.text(new.session_id)
    assert "not attached: b\\x00ad.py" in told and "NUL byte" in told
    sent = str(recorded(record)[0]["messages"])
    assert "x = 1" in sent and "NUL byte" in sent  # the other mention went through
