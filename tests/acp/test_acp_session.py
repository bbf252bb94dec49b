"""`agentls acp` session features: the commands (`available_commands_update`
after the session/new answer, `/checkpoints`, `/restore N`, the user's own
request, through the client's fs/write_text_file), the client's own MCP
servers (trusted like the user's: started without a question), the model as a
config option, and a missing provider key (the fake OpenAI backend
answers 401) answered with an error naming the setting."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from acp.schema import EnvVariable, McpServerStdio, TextContentBlock

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
from tests.fakes.http_backend import FakeBackend, Reply

pytestmark = pytest.mark.asyncio


async def test_commands_checkpoints_and_restore(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.py").write_text("x = 1\n")
    settings, _ = scripted_settings(tmp_path, [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.py",
                                                              "content": "x = 99\n"},
                         "id": "w1"}]},
        {"text": "Changed."},
    ])
    client = RecordingClient(answer=allow_once)
    async with acp_agent(client, tmp_path, agent_env(tmp_path, settings)) as (conn, _, log):
        await started(conn)
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await client.wait_for(lambda: "available_commands_update" in client.kinds(sid))
        [listed] = client.of("available_commands_update", sid)
        names = [c.name for c in listed.available_commands]
        assert {"compact", "checkpoints", "restore", "explain"} <= set(names)
        result = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("change it")),
                                        TIMEOUT)
        assert result.stop_reason == "end_turn", log.read_text()
        assert (workspace / "a.py").read_text() == "x = 99\n"

        shown = len(client.text(sid))
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("/checkpoints")), TIMEOUT)
        assert "turn 1" in client.text(sid)[shown:] and "a.py" in client.text(sid)[shown:]

        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("/restore 1")), TIMEOUT)
        assert "Restored: a.py" in client.text(sid)
        assert client.writes[-1] == (str(workspace / "a.py"), "x = 1\n")
        assert (workspace / "a.py").read_text() == "x = 1\n"

        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("/restore x")), TIMEOUT)
        assert "Usage: /restore N" in client.text(sid)


async def test_the_clients_mcp_servers_start_without_a_question(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    marker = tmp_path / "started"
    settings, _ = scripted_settings(tmp_path, [{"text": "hi"}])
    client = RecordingClient()
    server = McpServerStdio(name="mine", command=sys.executable, args=[
        "-c", "import os; open(os.environ['MARKER'], 'w').write('ok')"],
        env=[EnvVariable(name="MARKER", value=str(marker))])
    async with acp_agent(client, tmp_path, agent_env(tmp_path, settings)) as (conn, _, _log):
        await started(conn)
        await conn.new_session(cwd=str(workspace), mcp_servers=[server])
        await client.wait_for(lambda: marker.exists())
    assert client.asked == []


async def test_the_model_is_a_config_option(tmp_path: Path) -> None:
    settings, record = scripted_settings(tmp_path, [{"text": "one"}, {"text": "two"}],
                                         extra='model = "first-model"')
    client = RecordingClient()
    async with acp_agent(client, tmp_path, agent_env(tmp_path, settings)) as (conn, _, log):
        await started(conn)
        new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        [option] = new.config_options
        assert (option.id, option.category, option.current_value) == (
            "model", "model", "first-model")
        # the provider answers quickly: its models are in the answer itself
        # (acpx checks `--model X` against them)
        assert [(o.value, o.name) for o in option.options] == [
            ("first-model", "Scripted model")], option.options
        # the provider's models follow the answer, as a config_option_update
        await client.wait_for(lambda: bool(client.of("config_option_update")))
        [listed] = client.of("config_option_update")[0].config_options
        assert listed.current_value == "first-model"
        assert [o.value for o in listed.options][:1] == ["first-model"]
        changed = await conn.set_config_option(config_id="model", session_id=new.session_id,
                                               value="second-model")
        assert changed.config_options[0].current_value == "second-model"
        result = await asyncio.wait_for(conn.prompt(session_id=new.session_id,
                                                    prompt=text("hi")), TIMEOUT)
        assert result.stop_reason == "end_turn", log.read_text()
        with pytest.raises(Exception, match="model"):
            await conn.set_config_option(config_id="mode", session_id=new.session_id,
                                         value="x")
    assert [call["model"] for call in recorded(record)] == ["second-model"]


async def test_a_missing_key_names_the_setting(tmp_path: Path,
                                               fake_backend: FakeBackend) -> None:
    fake_backend.script("POST", "/v1/chat/completions",
                        Reply(401, body={"error": {"message": "no key"}}))
    settings = (f'provider = "openai"\nmodel = "gpt-test"\nbaseUrl = "{fake_backend.url}/v1"\n'
                'apiKeyEnv = "AGENTLS_TEST_MISSING_KEY"\n')
    client = RecordingClient()
    env = agent_env(tmp_path, settings)
    async with acp_agent(client, tmp_path, env) as (conn, _, _log):
        await started(conn)
        sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
        with pytest.raises(Exception, match="apiKeyEnv") as raised:
            await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("hi")), TIMEOUT)
        assert "AGENTLS_TEST_MISSING_KEY" in str(raised.value)


async def test_deletes_and_renames_happen_on_disk_after_the_gate(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "old.py").write_text("a = 1\n")
    (workspace / "gone.py").write_text("b = 2\n")
    (workspace / "kept.py").write_text("c = 3\n")
    settings, _ = scripted_settings(tmp_path, [
        {"tool_calls": [{"name": "rename_file", "arguments": {"path": "old.py",
                                                               "new_path": "new.py"},
                         "id": "m1"}]},
        {"tool_calls": [{"name": "delete_file", "arguments": {"path": "gone.py"}, "id": "d1"}]},
        {"tool_calls": [{"name": "delete_file", "arguments": {"path": "kept.py"}, "id": "d2"}]},
        {"text": "tidied"},
    ])
    answers = iter(["allow", "allow", "deny"])

    def answer(options: list[Any]) -> str | None:
        wanted = next(answers)
        return next(o.option_id for o in options
                    if (o.kind == "allow_once") == (wanted == "allow")
                    and o.kind in ("allow_once", "reject_once"))

    client = RecordingClient(answer=answer)
    async with acp_agent(client, tmp_path, agent_env(tmp_path, settings)) as (conn, _, log):
        await started(conn)
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        result = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("tidy")),
                                        TIMEOUT)
        assert result.stop_reason == "end_turn", log.read_text()
    assert [a.tool_call_id for a in client.asked] == ["m1", "d1", "d2"]
    kinds = {u.tool_call_id: u.kind for u in client.of("tool_call", sid)}
    assert kinds == {"m1": "move", "d1": "delete", "d2": "delete"}
    assert sorted(p.name for p in workspace.iterdir()) == ["kept.py", "new.py"]
    assert (workspace / "new.py").read_text() == "a = 1\n"
    assert client.writes == []  # ACP has no delete or rename: the disk


async def test_allow_always_is_remembered_for_the_session(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.py").write_text("a = 1\n")
    settings, _ = scripted_settings(tmp_path, [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.py",
                                                              "content": "a = 2\n"},
                         "id": "e1"}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.py",
                                                              "content": "a = 3\n"},
                         "id": "e2"}]},
        {"text": "done"},
    ])

    def always(options: list[Any]) -> str | None:
        return next(o.option_id for o in options if o.kind == "allow_always")

    client = RecordingClient(answer=always)
    async with acp_agent(client, tmp_path, agent_env(tmp_path, settings)) as (conn, _, log):
        await started(conn)
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        result = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("go")), TIMEOUT)
        assert result.stop_reason == "end_turn", log.read_text()
    assert [a.tool_call_id for a in client.asked] == ["e1"]  # "Allow for session"
    assert (workspace / "a.py").read_text() == "a = 3\n"


async def test_resource_links_are_mentions_and_secrets_stay_out(tmp_path: Path) -> None:
    from acp.schema import (
        EmbeddedResourceContentBlock,
        ResourceContentBlock,
        TextResourceContents,
    )

    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a b.py").write_text("MARKER_TEXT = 1\n")
    (workspace / ".env").write_text("TOKEN=do-not-send\n")
    settings, record = scripted_settings(tmp_path, [{"text": "ok"}])
    client = RecordingClient()
    async with acp_agent(client, tmp_path, agent_env(tmp_path, settings)) as (conn, _, log):
        await started(conn)
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        result = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[
            TextContentBlock(type="text", text="look at"),
            ResourceContentBlock(type="resource_link", uri=(workspace / "a b.py").as_uri(),
                                 name="a b.py"),
            ResourceContentBlock(type="resource_link", uri=(workspace / ".env").as_uri(),
                                 name=".env"),
            EmbeddedResourceContentBlock(type="resource", resource=TextResourceContents(
                uri="file:///elsewhere/notes.txt", text="EMBEDDED_TEXT"))]), TIMEOUT)
        assert result.stop_reason == "end_turn", log.read_text()
    sent = str(recorded(record)[0]["messages"][-1])
    assert "MARKER_TEXT" in sent and "EMBEDDED_TEXT" in sent
    assert "do-not-send" not in sent and "may hold secrets" in sent


async def test_compact_runs_and_can_be_cancelled(tmp_path: Path) -> None:
    settings, _ = scripted_settings(tmp_path, [
        {"text": "first answer"},
        {"text": "second answer"},
        {"text": "A summary of the talk."},  # the compaction's model call
        {"text": "third answer"},
        {"stall": True},  # the second compaction waits for the cancel
    ])
    client = RecordingClient()
    async with acp_agent(client, tmp_path, agent_env(tmp_path, settings)) as (conn, _, log):
        await started(conn)
        sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
        for prompt in ("one", "two"):
            await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text(prompt)), TIMEOUT)
        done = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("/compact")),
                                      TIMEOUT)
        assert done.stop_reason == "end_turn", log.read_text()
        assert "A summary of the talk." in client.text(sid)
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("three")), TIMEOUT)
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text("/compact")))
        record_lines = tmp_path / "script.jsonl"
        await client.wait_for(lambda: len(record_lines.read_text().splitlines()) == 5)
        await conn.cancel(session_id=sid)
        assert (await asyncio.wait_for(turn, TIMEOUT)).stop_reason == "cancelled"
