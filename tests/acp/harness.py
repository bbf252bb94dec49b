"""Driving `agentls acp` as a real subprocess with the ACP SDK's client side
(`spawn_agent_process`). The SDK passes no environment of its own beyond a
trimmed default and reads no stderr: `acp_agent` gives the agent a test
environment (its own state dir and user config, no AGENTLS_* leaking in)
and sends stderr to a file the test can read.

`RecordingClient` plays the editor: it records every session/update, every
permission question and every fs/* call; it answers permission questions
with `answer(options)` (an option id, or None for `cancelled`), reads files
from disk and writes what fs/write_text_file sends to disk, as an editor
saving its buffer would.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import spawn_agent_process
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    PermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TextContentBlock,
    WriteTextFileResponse,
)

TIMEOUT = 60.0

Answer = Callable[[list[PermissionOption]], "str | None"]


def text(value: str) -> list[TextContentBlock]:
    """A prompt of one text block."""
    return [TextContentBlock(type="text", text=value)]


def allow_once(options: list[PermissionOption]) -> str | None:
    return next(o.option_id for o in options if o.kind == "allow_once")


def reject(options: list[PermissionOption]) -> str | None:
    return next(o.option_id for o in options if o.kind.startswith("reject"))


def cancelled(options: list[PermissionOption]) -> str | None:
    return None


@dataclass
class Asked:
    session_id: str
    tool_call_id: str
    title: str | None
    text: str
    options: list[PermissionOption]


@dataclass
class RecordingClient:
    answer: Answer = allow_once
    updates: list[tuple[str, Any]] = field(default_factory=list)
    asked: list[Asked] = field(default_factory=list)
    writes: list[tuple[str, str]] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def request_permission(self, options: list[PermissionOption], session_id: str,
                                 tool_call: Any, **kwargs: Any) -> RequestPermissionResponse:
        text = "".join(getattr(getattr(c, "content", None), "text", "") or ""
                       for c in tool_call.content or [])
        self.asked.append(Asked(session_id, tool_call.tool_call_id, tool_call.title, text,
                                list(options)))
        self._changed()
        chosen = self.answer(list(options))
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected",
                                                                option_id=chosen))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self._changed()

    async def write_text_file(self, content: str, path: str, session_id: str,
                              **kwargs: Any) -> WriteTextFileResponse:
        self.writes.append((path, content))
        await asyncio.to_thread(Path(path).write_text, content, encoding="utf-8")
        return WriteTextFileResponse()

    async def read_text_file(self, path: str, session_id: str, limit: int | None = None,
                             line: int | None = None, **kwargs: Any) -> ReadTextFileResponse:
        self.reads.append(path)
        text = await asyncio.to_thread(Path(path).read_text, encoding="utf-8")
        return ReadTextFileResponse(content=text)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None

    def _changed(self) -> None:
        self.changed.set()

    # -- reading what was received ------------------------------------------------------
    def kinds(self, session_id: str | None = None) -> list[str]:
        return [u.session_update for sid, u in self.updates
                if session_id is None or sid == session_id]

    def of(self, kind: str, session_id: str | None = None) -> list[Any]:
        return [u for sid, u in self.updates
                if u.session_update == kind and (session_id is None or sid == session_id)]

    def text(self, session_id: str | None = None) -> str:
        return "".join(u.content.text for u in self.of("agent_message_chunk", session_id))

    async def wait_for(self, check: Callable[[], bool], timeout: float = TIMEOUT) -> None:
        async def loop() -> None:
            # woken by every message from the agent; polls too, for checks on
            # the disk (a file an MCP server writes)
            while not check():
                self.changed.clear()
                try:
                    await asyncio.wait_for(self.changed.wait(), 0.1)
                except TimeoutError:
                    pass

        await asyncio.wait_for(loop(), timeout)


def capabilities(*, fs: bool = True) -> ClientCapabilities:
    return ClientCapabilities(fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs),
                              terminal=False)


def agent_env(tmp_path: Path, settings_toml: str = "", **extra: str) -> dict[str, str]:
    """The agent's environment: a private state dir, a user config with
    `settings_toml`, nothing of the developer's AGENTLS_* settings."""
    config = tmp_path / "user-config.toml"
    config.write_text(settings_toml, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLS_")}
    # A runtime folder of its own: never the developer's model host (providers/local/shared/).
    env.update({"AGENTLS_CONFIG_FILE": str(config),
                "AGENTLS_STATE_DIR": str(tmp_path / "state"),
                "XDG_RUNTIME_DIR": str(tmp_path / "runtime"),
                "AGENTLS_LOCAL__HOST_IDLE_SECONDS": "2", **extra})
    return env


def scripted_settings(tmp_path: Path, responses: list[dict[str, Any]], extra: str = "",
                      name: str = "script") -> tuple[str, Path]:
    """A user config for the scripted provider, and its record file."""
    record = tmp_path / f"{name}.jsonl"
    script = tmp_path / f"{name}.json"
    script.write_text(json.dumps({"responses": responses, "record": str(record)}))
    return (f'provider = "scripted"\n{extra}\n[providerOptions]\nscript = "{script}"\n', record)


def recorded(record: Path) -> list[dict[str, Any]]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


@asynccontextmanager
async def acp_agent(client: RecordingClient, tmp_path: Path, env: dict[str, str], *,
                    cwd: Path | None = None) -> AsyncIterator[tuple[Any, Any, Path]]:
    """`agentls acp` running with `client` as its editor: (connection,
    process, stderr log). The process is gone when this exits."""
    log = tmp_path / "agent-stderr.log"
    with open(log, "wb") as stderr:  # noqa: ASYNC230 (opened once, before the agent starts)
        async with spawn_agent_process(
                client, sys.executable, "-m", "agentls", "acp", env=env,
                cwd=str(cwd or tmp_path),
                transport_kwargs={"stderr": stderr.fileno(), "shutdown_timeout": 10.0},
        ) as (conn, process):
            yield conn, process, log


async def started(conn: Any, *, fs: bool = True) -> Any:
    return await asyncio.wait_for(
        conn.initialize(protocol_version=1, client_capabilities=capabilities(fs=fs)), TIMEOUT)
