"""Helpers for end-to-end tests: plain-data conversion of pygls results, a
started and initialized server for a test client, and a raw JSON-RPC
client that can send what a typed client refuses to (malformed params, bad
framing)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

if TYPE_CHECKING:  # the harness imports this module
    from types import ModuleType

    from tests.reliability.harness import LspProcess


def require_completion_model() -> ModuleType:
    """agentls.providers.local, or a skip of the calling module saying what
    to install: the llama.cpp runtime and the packaged completion model."""
    local = pytest.importorskip("agentls.providers.local")
    if local.runtime_error() is not None:
        pytest.skip(f"the local model runtime is not installed: {local.INSTALL_COMMAND}",
                    allow_module_level=True)
    if local.installed_parts(local.DEFAULT_COMPLETION_MODEL) is None:
        pytest.skip(f"the default completion model is not installed: {local.INSTALL_COMMAND}",
                    allow_module_level=True)
    return local


def plain(value: Any) -> Any:
    """pygls returns custom-method results as namedtuple-like objects."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def server_env(**extra: str) -> dict[str, str]:
    """The test process's environment without AGENTLS_* leaking in, and a
    runtime folder of its own (XDG_RUNTIME_DIR) unless one is given, so a
    server never joins the developer's model host (providers/local/shared/)
    or another test's, whose models go 2 s after their last server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLS_")}
    env.setdefault("AGENTLS_CONFIG_FILE", "/nonexistent/agentls.toml")
    env["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="agentls-test-run-")
    # A test's models are not kept loaded for the default 300 s once it ends.
    env["AGENTLS_LOCAL__HOST_IDLE_SECONDS"] = "2"
    env.update(extra)
    return env


@asynccontextmanager
async def initialized(client: LanguageClient, workspace: Path, settings: dict[str, Any],
                      capabilities: types.ClientCapabilities, *, env: dict[str, str],
                      timeout: float) -> AsyncIterator[None]:
    """agentls started in `client` over stdio and initialized for `workspace`
    (`settings` as initializationOptions), shut down afterwards; a server a
    failed test leaves running is killed."""
    await client.start_io(sys.executable, "-m", "agentls", env=env)
    stopped = False
    try:
        folder = types.WorkspaceFolder(uri=workspace.as_uri(), name=workspace.name)
        await asyncio.wait_for(client.initialize_session(types.InitializeParams(
            capabilities=capabilities, process_id=None, root_uri=workspace.as_uri(),
            workspace_folders=[folder], initialization_options={"agentls": settings},
        )), timeout)
        yield
        await asyncio.wait_for(client.shutdown_session(), timeout)
        stopped = True
    finally:
        if not stopped and client._server is not None and client._server.returncode is None:
            client._server.kill()
        await asyncio.wait_for(client.stop(), timeout)


class RawClient:
    """Speaks LSP framing directly to a server subprocess."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._next_id = 0
        self.notifications: list[dict[str, Any]] = []

    @classmethod
    async def start(cls, *args: str, env: dict[str, str] | None = None) -> RawClient:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentls", *args,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, env=env or server_env(),
        )
        return cls(proc)

    async def send_raw(self, body: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        await self.proc.stdin.drain()

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_raw(json.dumps(message).encode())

    async def request(
        self, method: str, params: Any = None, *, timeout: float = 10
    ) -> dict[str, Any]:
        self._next_id += 1
        msg_id = self._next_id
        await self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return await asyncio.wait_for(self._response(msg_id), timeout)

    async def notify(self, method: str, params: Any = None) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        length = 0
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                raise EOFError("server closed stdout")
            line = line.strip()
            if not line:
                break
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        data: dict[str, Any] = json.loads(await self.proc.stdout.readexactly(length))
        return data

    async def _response(self, msg_id: int) -> dict[str, Any]:
        while True:
            message = await self.read()
            if message.get("id") == msg_id and "method" not in message:
                return message
            if "method" in message and "id" in message:  # server -> client request
                await self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            elif "method" in message:
                self.notifications.append(message)

    async def initialize(self, **params: Any) -> dict[str, Any]:
        result = await self.request("initialize", {"processId": None, "capabilities": {},
                                                   "rootUri": None, **params})
        await self.notify("initialized", {})
        return result

    async def close(self) -> None:
        try:
            await self.request("shutdown", None, timeout=5)
            await self.notify("exit", None)
            await asyncio.wait_for(self.proc.wait(), 5)
        except Exception:
            self.proc.kill()
            await self.proc.wait()


LOCAL_MODEL_DOC = "def add(a, b):\n    \n"


class LocalModelEditor:
    """An editor window over LSP asking the local models (tests/e2e/test_local_*.py)."""

    def __init__(self, lsp: LspProcess, workspace: Path) -> None:
        self.lsp = lsp
        self.workspace = workspace
        self.count = 0

    def complete(self) -> Any:
        """An inline completion in a new document (never a cache hit)."""
        self.count += 1
        uri = (self.workspace / f"doc{self.lsp.pid}-{self.count}.py").as_uri()
        self.lsp.open(uri, LOCAL_MODEL_DOC)
        answer = self.lsp.request("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": 1, "character": 4},
            "context": {"triggerKind": 1}}, timeout=120)
        assert "error" not in answer, answer
        return answer["result"]

    def settings(self, settings: dict[str, Any]) -> None:
        self.lsp.notify("workspace/didChangeConfiguration", {"settings": {"agentls": settings}})

    def models(self) -> dict[str, dict[str, Any]]:
        report = self.lsp.result("agentls/status", {})["localModels"]
        return {entry["model"]: entry for entry in report if entry["running"]}

    def progress(self, title: str) -> list[dict[str, Any]]:
        values = self.lsp.notifications_of("$/progress")
        tokens = {v["token"] for v in values
                  if v["value"].get("kind") == "begin" and v["value"]["title"] == title}
        return [v["value"] for v in values if v["token"] in tokens]

    def errors_naming(self, word: str) -> list[str]:
        return [m for m in self.lsp.shown_messages() if word in m]
