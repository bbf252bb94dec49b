"""`agentls acp` as a subprocess spoken to in raw newline-delimited JSON-RPC.

The SDK's client refuses to send what a broken or hostile client sends;
this one writes any bytes (`send_raw`), keeps every byte the agent wrote to
stdout (`lines`) to check that each is a JSON-RPC message, answers the
agent's requests through `on_request`, and drains stderr into `stderr` (the
SDK does neither). Used by tests/reliability/test_acp_bad_input.py and
bench/bench_acp.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["AcpPipe", "acp_env", "not_acp"]

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
READ_LIMIT = 256 * 1024 * 1024


def acp_env(home: Path, config: Path | None = None, **extra: str) -> dict[str, str]:
    """The test's environment without AGENTLS_* leaking in, state under `home`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLS_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / "config"),
               XDG_STATE_HOME=str(home / "state"), XDG_CACHE_HOME=str(home / "cache"),
               AGENTLS_STATE_DIR=str(home / "agentls-state"),
               AGENTLS_CONFIG_FILE=str(config or home / "no-config.toml"))
    env.update(extra)
    return env


def not_acp(lines: list[bytes]) -> list[bytes]:
    """The stdout lines that are not one JSON-RPC 2.0 message each."""
    bad = []
    for line in lines:
        try:
            message = json.loads(line)
        except ValueError:
            bad.append(line)
            continue
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not (
                "method" in message or "result" in message or "error" in message):
            bad.append(line)
    return bad


async def refuse(request: dict[str, Any]) -> dict[str, Any]:
    """Default answer to the agent's requests: a permission question is
    cancelled (a Deny), anything else an error."""
    if request.get("method") == "session/request_permission":
        return {"result": {"outcome": {"outcome": "cancelled"}}}
    return {"error": {"code": -32601, "message": "not offered by this test client"}}


class AcpPipe:
    def __init__(self, proc: asyncio.subprocess.Process, on_request: Handler) -> None:
        self.proc = proc
        self.on_request = on_request
        self.lines: list[bytes] = []  # every stdout line, as written
        self.messages: list[dict[str, Any]] = []  # those that parsed as objects
        self.times: list[float] = []  # perf_counter() when each of `messages` was read
        self.stderr = bytearray()
        self.arrived = asyncio.Event()
        self._next_id = 1000
        self._pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._answering: set[asyncio.Task[None]] = set()
        self._tasks = [asyncio.ensure_future(self._read_stdout()),
                       asyncio.ensure_future(self._read_stderr())]
        self.started = time.perf_counter()

    @classmethod
    async def start(cls, env: Mapping[str, str], *, cwd: Path | None = None,
                    on_request: Handler = refuse) -> AcpPipe:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentls", "acp", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=dict(env), cwd=cwd, limit=READ_LIMIT)
        return cls(proc, on_request)

    # -- sending ------------------------------------------------------------------------
    async def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        await self.proc.stdin.drain()

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_raw(json.dumps(message).encode() + b"\n")

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def request(self, method: str, params: Any = None, *, timeout: float = 30,
                      ident: Any = None) -> dict[str, Any]:
        """The whole response message (result or error)."""
        ident = self.new_id() if ident is None else ident
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[ident] = future
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self._pending.pop(ident, None)

    async def notify(self, method: str, params: Any = None) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    # -- ACP steps ------------------------------------------------------------------------
    async def initialize(self, **capabilities: Any) -> dict[str, Any]:
        answer = await self.request("initialize", {
            "protocolVersion": 1, "clientCapabilities": capabilities,
            "clientInfo": {"name": "agentls-tests", "version": "0"}})
        result: dict[str, Any] = answer["result"]
        return result

    async def new_session(self, cwd: Path) -> str:
        answer = await self.request("session/new", {"cwd": str(cwd), "mcpServers": []})
        session_id: str = answer["result"]["sessionId"]
        return session_id

    def updates(self, session_id: str, kind: str | None = None,
                since: int = 0) -> list[dict[str, Any]]:
        return [m["params"]["update"] for m in self.messages[since:]
                if m.get("method") == "session/update"
                and m["params"].get("sessionId") == session_id
                and (kind is None or m["params"]["update"].get("sessionUpdate") == kind)]

    async def wait_for(self, predicate: Callable[[dict[str, Any]], bool], *,
                       since: int = 0, timeout: float = 30) -> dict[str, Any]:
        """The first message from index `since` on that satisfies `predicate`."""
        deadline = time.monotonic() + timeout
        checked = since
        while True:
            while checked < len(self.messages):
                message = self.messages[checked]
                checked += 1
                if predicate(message):
                    return message
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.proc.stdout is None:
                raise TimeoutError(f"no such message in {timeout} s; stderr: "
                                   f"{self.stderr[-3000:].decode(errors='replace')}")
            self.arrived.clear()
            if self._tasks[0].done():
                raise EOFError("the agent closed stdout")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), remaining)

    # -- ending ---------------------------------------------------------------------------
    async def close(self, timeout: float = 30) -> int | None:
        """Close stdin (the client is done) and wait for the agent to exit;
        killed (and None returned) if it does not within `timeout`."""
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            code = await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            code = None
        for task in self._tasks:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(task, 5)
        for task in list(self._answering):
            task.cancel()
        return code

    def drop(self) -> None:
        """The client is gone, as if its process died: both pipes closed,
        whatever the agent writes next fails."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        # asyncio.subprocess.Process hides the pipe transports; closing the
        # stdout one closes our read end of the pipe.
        transport = self.proc._transport  # type: ignore[attr-defined]
        stdout = transport.get_pipe_transport(1)
        if stdout is not None:
            stdout.close()

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
        await self.close(timeout=10)

    # -- reading --------------------------------------------------------------------------
    async def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        while True:
            try:
                line = await self.proc.stdout.readline()
            except (ValueError, asyncio.LimitOverrunError):  # a line over READ_LIMIT
                self.lines.append(b"<a line over the test client's limit>")
                continue
            if not line:
                break
            self.lines.append(line.rstrip(b"\n"))
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if not isinstance(message, dict):
                continue
            self.times.append(time.perf_counter())
            self.messages.append(message)
            self.arrived.set()
            if "method" in message and "id" in message:
                task = asyncio.ensure_future(self._answer(message))
                self._answering.add(task)
                task.add_done_callback(self._answering.discard)
            elif "method" not in message:
                future = self._pending.get(message.get("id"))
                if future is not None and not future.done():
                    future.set_result(message)
        self.arrived.set()

    async def _answer(self, request: dict[str, Any]) -> None:
        reply = await self.on_request(request)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.send({"jsonrpc": "2.0", "id": request["id"], **reply})

    async def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        while True:
            chunk = await self.proc.stderr.read(65536)
            if not chunk:
                break
            self.stderr += chunk
            del self.stderr[:-200_000]  # the tail is what a failure needs
