"""A path with control characters or a bidi override over ACP (docs/security.md,
"Long questions"), through the real `agentls acp`: the tool call's titles,
the pending call's content the client shows next to the permission
question, and the question itself show `<U+001B>` / `<U+202E>`, never the
raw characters."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tests.acp.harness import (
    TIMEOUT,
    RecordingClient,
    acp_agent,
    agent_env,
    reject,
    scripted_settings,
    started,
    text,
)

pytestmark = [pytest.mark.asyncio,
              pytest.mark.skipif(sys.platform == "win32", reason="POSIX file names")]

NAME = "a\x1b[2Kb\u202etxt.exe"


async def test_titles_and_questions_escape_the_path(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    settings, _ = scripted_settings(tmp_path, [
        {"tool_calls": [{"name": "write_file", "id": "w1",
                         "arguments": {"path": NAME, "content": "x\n"}}]}, {"text": "done"}])
    client = RecordingClient(answer=reject)
    async with acp_agent(client, tmp_path, agent_env(tmp_path, settings)) as (conn, _, log):
        await started(conn)
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        result = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("go")),
                                        TIMEOUT)
        assert result.stop_reason == "end_turn", log.read_text()
    shown = [a.text for a in client.asked] + [a.title or "" for a in client.asked]
    for update in [*client.of("tool_call", sid), *client.of("tool_call_update", sid)]:
        shown.append(update.title or "")
        if update.status == "pending":  # what is shown with the question (results are data)
            for content in update.content or []:
                shown.append(getattr(getattr(content, "content", None), "text", "") or "")
    assert client.asked
    for item in shown:
        assert "\x1b" not in item and "\u202e" not in item, json.dumps(item)
    assert any("a<U+001B>[2Kb<U+202E>txt.exe" in item for item in shown)
