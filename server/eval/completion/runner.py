"""Run completion tasks through the real language server: `agentls` as a
subprocess on stdio, driven over plain JSON-RPC (the same bytes an editor
sends), one didOpen + textDocument/inlineCompletion (Invoked) + didClose per
task, timed from request to answer.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from agentls.eval.completion.tasks import Task

__all__ = ["LspProcess", "Outcome", "run_tasks"]

REQUEST_TIMEOUT = 120.0  # a slow local model on a busy machine


@dataclass(frozen=True, slots=True)
class Outcome:
    task: Task
    completion: str
    latency_ms: float
    prompt_chars: int
    input_tokens: int
    error: str = ""


class LspProcess:
    """A language server subprocess spoken to with raw JSON-RPC."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._next = 0
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self.messages: list[str] = []  # window/showMessage texts
        self._reader = asyncio.ensure_future(self._read_loop())

    @classmethod
    async def start(cls, command: Sequence[str], env: Mapping[str, str] | None = None
                    ) -> Self:
        proc = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, env=dict(env) if env is not None else None,
            limit=1 << 24)
        return cls(proc)

    async def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        body = json.dumps(message).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        await self.proc.stdin.drain()

    async def request(self, method: str, params: Any,
                      timeout: float = REQUEST_TIMEOUT) -> Any:  # noqa: ASYNC109
        _, future = await self.send_request(method, params)
        return await asyncio.wait_for(future, timeout)

    async def send_request(self, method: str, params: Any) -> tuple[int, asyncio.Future[Any]]:
        """Send a request; its id (for $/cancelRequest) and its answer to come."""
        self._next += 1
        msg_id = self._next
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[msg_id] = future
        await self._send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return msg_id, future

    async def notify(self, method: str, params: Any) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def _read_loop(self) -> None:
        assert self.proc.stdout is not None
        stdout = self.proc.stdout
        while True:
            length = 0
            while True:
                line = await stdout.readline()
                if not line:
                    for future in self._waiting.values():
                        if not future.done():
                            future.set_exception(EOFError("the server exited"))
                    return
                line = line.strip()
                if not line:
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            message = json.loads(await stdout.readexactly(length))
            await self._dispatch(message)

    async def _dispatch(self, message: dict[str, Any]) -> None:
        if "method" not in message:
            future = self._waiting.pop(message.get("id"), None)  # type: ignore[arg-type]
            if future is not None and not future.done():
                if "error" in message:
                    future.set_exception(RuntimeError(message["error"].get("message")))
                else:
                    future.set_result(message.get("result"))
            return
        method = message["method"]
        params = message.get("params") or {}
        if method == "window/showMessage":
            self.messages.append(str(params.get("message", "")))
        if "id" in message:  # a request from the server
            result = await self.answer(method, params)
            await self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        else:
            self.notified(method, params)

    async def answer(self, method: str, params: Any) -> Any:
        """The answer to a request from the server: a plain editor's."""
        if method == "workspace/configuration":
            return [None] * len(params.get("items") or [])
        return None

    def notified(self, method: str, params: Any) -> None:
        """A notification from the server (subclasses keep what they need)."""

    async def close(self) -> None:
        try:
            await self.request("shutdown", None, timeout=15)
            await self.notify("exit", None)
            await asyncio.wait_for(self.proc.wait(), 10)
        except (Exception, asyncio.CancelledError):
            if self.proc.returncode is None:
                self.proc.kill()
        self._reader.cancel()


async def run_tasks(tasks: Sequence[Task], settings: Mapping[str, Any], *,
                    command: Sequence[str] | None = None,
                    env: Mapping[str, str] | None = None,
                    neighbours: int = 0,
                    progress: Any = None) -> list[Outcome]:
    """Each task in a fresh document of one warm server. `settings` go in
    initializationOptions (they win over the user's other sources).
    `neighbours`: also open that many other files of the same source first
    (context from neighbour files)."""
    command = list(command or [sys.executable, "-m", "agentls"])
    workspace = Path(tempfile.mkdtemp(prefix="agentls-eval-"))
    server = await LspProcess.start(command, env)
    outcomes: list[Outcome] = []
    try:
        await server.request("initialize", {
            "processId": None, "rootUri": workspace.as_uri(),
            "capabilities": {"textDocument": {"inlineCompletion": {}}},
            "initializationOptions": {"agentls": dict(settings)}}, timeout=60)
        await server.notify("initialized", {})
        for index, task in enumerate(tasks):
            outcomes.append(await _run_one(server, workspace, task, tasks, neighbours))
            if progress is not None:
                progress(index + 1, len(tasks), outcomes[-1])
    finally:
        await server.close()
    return outcomes


async def _status(server: LspProcess) -> dict[str, Any]:
    status = await server.request("agentls/status", {}, timeout=30)
    sent: dict[str, Any] = status.get("inlinePrompts") or {}
    return sent


async def _run_one(server: LspProcess, workspace: Path, task: Task, tasks: Sequence[Task],
                   neighbours: int) -> Outcome:
    uri = (workspace / task.source / task.path).as_uri()
    opened = [uri]
    others = [t for t in tasks if t.source == task.source and t.path != task.path
              and Path(t.path).parent == Path(task.path).parent][:neighbours]
    for other in others:
        other_uri = (workspace / other.source / other.path).as_uri()
        opened.append(other_uri)
        await server.notify("textDocument/didOpen", {"textDocument": {
            "uri": other_uri, "languageId": other.language_id, "version": 1,
            "text": other.text[: other.offset] + other.expected + other.text[other.offset:]}})
    await server.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": task.language_id, "version": 1, "text": task.text}})
    before = await _status(server)
    started = time.perf_counter()
    error = ""
    completion = ""
    try:
        answer = await server.request("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri},
            "position": {"line": task.line, "character": task.character},
            "context": {"triggerKind": 1}})
        items = (answer or {}).get("items") if isinstance(answer, dict) else answer
        if items:
            completion = str(items[0].get("insertText", ""))
    except (TimeoutError, Exception) as exc:
        error = f"{type(exc).__name__}: {exc}"
    latency = (time.perf_counter() - started) * 1000
    after = await _status(server)
    for other_uri in opened:
        await server.notify("textDocument/didClose", {"textDocument": {"uri": other_uri}})
    return Outcome(task=task, completion=completion, latency_ms=latency,
                   prompt_chars=int(after.get("chars", 0)) - int(before.get("chars", 0)),
                   input_tokens=(int(after.get("inputTokens", 0))
                                 - int(before.get("inputTokens", 0))),
                   error=error)
