"""A synchronous, thread-backed LSP client for the reliability tests.

The reliability suite drives the REAL server process (`python -m agentls`)
over stdio with raw LSP framing, so it can send what no typed client would
(bad framing, invalid JSON, wrong types) and kill the process at any moment.
It is synchronous on purpose: hypothesis runs plain functions, the loopback
fake backend is threaded, and concurrent requests are just futures.

    with LspProcess.start(workspace=ws, state_dir=st, settings={...}) as lsp:
        lsp.request("agentls/status", {})            # the whole response message
        lsp.result("agentls/status", {})             # its result (asserts no error)
        lsp.send_raw(b"Content-Length: 3\\r\\n\\r\\n{x}")
        lsp.kill()                                   # SIGKILL, no shutdown

A reader thread parses every frame the server writes: responses resolve
their futures, notifications are kept in `notifications`, server -> client
requests are recorded in `server_requests` and answered by `responder`
(default: null, i.e. "dismissed").
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.e2e.helpers import server_env

__all__ = [
    "LspProcess",
    "ResponseTimeout",
    "rss_kib",
    "scripted_settings",
    "wait_until",
]

DEFAULT_TIMEOUT = 20.0  # every request and wait is bounded by this unless told


class ResponseTimeout(AssertionError):
    """The server did not answer in time (a hang is a test failure, not a stall)."""


def _key(msg_id: Any) -> str:
    return json.dumps(msg_id, sort_keys=True)


def wait_until(predicate: Callable[[], Any], what: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


def rss_kib(pid: int) -> int:
    """Resident set size of a process (VmRSS, KiB)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def scripted_settings(
    folder: Path, name: str, responses: list[dict[str, Any]], **extra: Any
) -> tuple[dict[str, Any], Path]:
    """Settings for the scripted provider (script file written to `folder`)
    and the file it records every model request in."""
    record = folder / f"{name}.record.jsonl"
    script = folder / f"{name}.script.json"
    script.write_text(json.dumps({"responses": responses, "record": str(record), **extra}))
    return {"provider": "scripted", "providerOptions": {"script": str(script)}}, record


Responder = Callable[[str, Any], Any]


class LspProcess:
    """One agentls server subprocess and a raw JSON-RPC client for it."""

    def __init__(self, proc: subprocess.Popen[bytes], *, stderr_path: Path | None) -> None:
        self.proc = proc
        self.stderr_path = stderr_path
        self.notifications: list[dict[str, Any]] = []
        self.server_requests: list[dict[str, Any]] = []
        self.unmatched: list[dict[str, Any]] = []  # responses to ids we never sent
        self.responder: Responder = lambda method, params: None
        self._pending: dict[str, Future[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._ids = itertools.count(100_000)  # clear of ids tests choose by hand
        self.closed = threading.Event()
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()

    # -- lifecycle -------------------------------------------------------------
    @classmethod
    def spawn(
        cls,
        *,
        state_dir: Path,
        log_file: Path | None = None,
        stderr_file: Path | None = None,
        env: Mapping[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> LspProcess:
        """Start the server (not initialized)."""
        full_env = server_env(AGENTLS_STATE_DIR=str(state_dir), **dict(env or {}))
        args = [sys.executable, "-m", "agentls"]
        if log_file is not None:
            args += ["--log-file", str(log_file), "--log-level", "DEBUG"]
        stderr: Any = subprocess.DEVNULL
        if stderr_file is not None:
            stderr = open(stderr_file, "ab")  # handed to the child, closed below
        try:
            proc = subprocess.Popen(
                args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                env=full_env, preexec_fn=preexec_fn,
            )
        finally:
            if stderr_file is not None:
                stderr.close()
        return cls(proc, stderr_path=stderr_file)

    @classmethod
    @contextmanager
    def start(
        cls,
        *,
        state_dir: Path,
        workspace: Path | None = None,
        settings: Mapping[str, Any] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        log_file: Path | None = None,
        stderr_file: Path | None = None,
        env: Mapping[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> Iterator[LspProcess]:
        """A server, initialized on `workspace` with `settings` as
        initializationOptions; shut down (or killed) on exit."""
        lsp = cls.spawn(state_dir=state_dir, log_file=log_file, stderr_file=stderr_file,
                        env=env, preexec_fn=preexec_fn)
        try:
            lsp.initialize(workspace=workspace, settings=settings, capabilities=capabilities,
                           timeout=timeout)
            yield lsp
        finally:
            lsp.close()

    def initialize(
        self,
        *,
        workspace: Path | None = None,
        settings: Mapping[str, Any] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {
            "processId": os.getpid(),
            "rootUri": workspace.as_uri() if workspace else None,
            "capabilities": dict(capabilities or {}),
            "initializationOptions": {"agentls": dict(settings or {})},
        }
        if workspace is not None:
            params["workspaceFolders"] = [{"uri": workspace.as_uri(), "name": workspace.name}]
        result = self.result("initialize", params, timeout=timeout)
        self.notify("initialized", {})
        return result

    def close(self, timeout: float = 10.0) -> int:
        """Graceful shutdown + exit; kill when the server does not cooperate."""
        if self.proc.poll() is None:
            try:
                self.request("shutdown", None, timeout=timeout)
                self.notify("exit", None)
                self.proc.wait(timeout)
            except Exception:
                self.kill()
        self._release()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: no shutdown step runs, nothing is flushed."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self._release()

    def _release(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        self._reader.join(5)

    def __enter__(self) -> LspProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss_kib(self) -> int:
        return rss_kib(self.proc.pid)

    # -- sending ---------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        with self._write_lock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        body = json.dumps(message).encode()
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def expect(self, msg_id: Any) -> Future[dict[str, Any]]:
        """A future for the response with this id (register before sending)."""
        future: Future[dict[str, Any]] = Future()
        with self._lock:
            self._pending[_key(msg_id)] = future
        return future

    def request_async(
        self, method: str, params: Any = None, *, msg_id: Any = None
    ) -> Future[dict[str, Any]]:
        msg_id = next(self._ids) if msg_id is None else msg_id
        future = self.expect(msg_id)
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return future

    def request(
        self, method: str, params: Any = None, *, timeout: float = DEFAULT_TIMEOUT,
        msg_id: Any = None,
    ) -> dict[str, Any]:
        """The whole response message ({"result"} or {"error"})."""
        future = self.request_async(method, params, msg_id=msg_id)
        return self.wait(future, timeout, f"{method} ({msg_id or 'auto id'})")

    def result(self, method: str, params: Any = None, *, timeout: float = DEFAULT_TIMEOUT
               ) -> Any:
        response = self.request(method, params, timeout=timeout)
        assert "error" not in response, f"{method} failed: {response}"
        return response.get("result")

    def wait(self, future: Future[dict[str, Any]], timeout: float, what: str) -> dict[str, Any]:
        try:
            return future.result(timeout)
        except TimeoutError:
            state = "alive" if self.alive() else f"exited {self.proc.returncode}"
            raise ResponseTimeout(f"no answer to {what} within {timeout:g}s (server {state})"
                                  f"{self.recent_traffic()}") from None

    def recent_traffic(self, count: int = 12) -> str:
        """What the server said last (notifications and requests to the
        client, shortened) and its stderr's last lines: a timeout's context."""
        with self._lock:
            said = [*self.notifications[-count:], *self.server_requests[-count:]]
        lines = [json.dumps(m, default=str)[:300] for m in said]
        if self.stderr_path is not None and self.stderr_path.is_file():
            lines += self.stderr_path.read_text(errors="replace").splitlines()[-count:]
        return "".join(f"\n  | {line}" for line in lines)

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    # -- documents -------------------------------------------------------------
    def open(self, uri: str, text: str, *, language_id: str = "python", version: int = 1
             ) -> None:
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": language_id, "version": version, "text": text}})

    # -- notifications ---------------------------------------------------------
    def notifications_of(self, method: str) -> list[Any]:
        with self._lock:
            return [n.get("params") for n in self.notifications if n.get("method") == method]

    def shown_messages(self) -> list[str]:
        """window/showMessage texts and window/showMessageRequest prompts."""
        shown = [str((p or {}).get("message", "")) for p in
                 self.notifications_of("window/showMessage")]
        with self._lock:
            shown += [str((r.get("params") or {}).get("message", ""))
                      for r in self.server_requests
                      if r.get("method") == "window/showMessageRequest"]
        return shown

    # -- reading ---------------------------------------------------------------
    def _read_loop(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            while True:
                length = None
                while True:
                    line = stdout.readline()
                    if not line:
                        return
                    line = line.strip()
                    if not line:
                        break
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                if length is None:
                    continue
                body = stdout.read(length)
                if len(body) < length:
                    return
                self._dispatch(json.loads(body))
        except (OSError, ValueError):
            return
        finally:
            self.closed.set()
            with self._lock:
                pending, self._pending = list(self._pending.values()), {}
            for future in pending:
                if not future.done():
                    future.set_exception(EOFError("the server closed its stdout"))

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            with self._lock:
                self.server_requests.append(message)
            # Answered from another thread: a responder may take its time
            # (a user thinking about an approval) without stopping the reader.
            threading.Thread(target=self._answer, args=(message,), daemon=True).start()
        elif "method" in message:
            with self._lock:
                self.notifications.append(message)
        else:
            with self._lock:
                future = self._pending.pop(_key(message.get("id")), None)
                if future is None:
                    self.unmatched.append(message)
            if future is not None and not future.done():
                future.set_result(message)

    def _answer(self, message: dict[str, Any]) -> None:
        try:
            result = self.responder(message["method"], message.get("params"))
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        except Exception as exc:  # a responder can refuse with an error
            reply = {"jsonrpc": "2.0", "id": message["id"],
                     "error": {"code": -32603, "message": str(exc)}}
        try:
            self.send(reply)
        except (OSError, ValueError):
            pass
