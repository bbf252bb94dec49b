"""The socket transports through the REAL server (docs/security.md).

`agentls --tcp` used to bind 127.0.0.1 with no authentication; each new
connection took over the server's writer (a second local client received
the editor's approval question and answered it), a browser's fetch() POST
was parsed as LSP, and the first client to leave shut the server down.
These tests start `python -m agentls --tcp` / `--socket` and play the
editor and the attacker with raw sockets:

- a second client, even with the token, is refused while one is connected:
  it receives nothing (not the approval question) and cannot answer it;
- an HTTP request, an unknown header, no token or a wrong token: the
  connection is closed with no answer, and the server still serves;
- a client leaving without `exit` does not stop the server; the next one
  initializes again; `exit` ends it;
- the Unix socket is 0600 in a 0700 folder; the generated token file 0600.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import server_env
from tests.e2e.test_edits import call, scripted
from tests.reliability.harness import wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="Unix sockets, file modes")

TOKEN = "t0k3n-" + "x" * 40
TIMEOUT = 20.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """`python -m agentls` with transport arguments; stderr kept in a file."""

    def __init__(self, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.runtime = tmp_path / "run"
        self.runtime.mkdir(parents=True, exist_ok=True, mode=0o755)
        self.stderr_path = tmp_path / "server.stderr"
        full_env = server_env(**{"AGENTLS_STATE_DIR": str(tmp_path / "state"),
                                 "XDG_RUNTIME_DIR": str(self.runtime), **(env or {})})
        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen([sys.executable, "-m", "agentls", *args],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=stderr, env=full_env)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@contextmanager
def server(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Server]:
    running = Server(tmp_path, *args, env=env)
    try:
        yield running
    finally:
        running.stop()


class Client:
    """A raw LSP client over one socket; a reader thread keeps every message."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.received: list[dict[str, Any]] = []
        self.raw = bytearray()
        self.closed = threading.Event()
        self.answer: Any = None  # result for window/showMessageRequest
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    @classmethod
    def tcp(cls, port: int) -> Client:
        # Retried while the server starts (no probe connection: pygls' old
        # start_tcp stopped the server when any client left).
        def connected() -> socket.socket | None:
            try:
                return socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
            except ConnectionRefusedError:
                return None
        return cls(wait_until(connected, f"127.0.0.1:{port} to accept", TIMEOUT))

    @classmethod
    def unix(cls, path: Path) -> Client:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(TIMEOUT)
        sock.connect(str(path))
        return cls(sock)

    def _read(self) -> None:
        buffer = b""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return
                with self._lock:
                    self.raw += chunk
                buffer += chunk
                while b"\r\n\r\n" in buffer:
                    head, _, rest = buffer.partition(b"\r\n\r\n")
                    length = int(re.search(rb"Content-Length: (\d+)", head).group(1))  # type: ignore[union-attr]
                    if len(rest) < length:
                        break
                    body, buffer = rest[:length], rest[length:]
                    message = json.loads(body)
                    with self._lock:
                        self.received.append(message)
                    if "method" in message and "id" in message:
                        self.send({"jsonrpc": "2.0", "id": message["id"], "result": self.answer})
        except OSError:
            return
        finally:
            self.closed.set()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def request(self, method: str, params: Any) -> int:
        msg_id = next(self._ids)
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return msg_id

    def response(self, msg_id: int, timeout: float = TIMEOUT) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            closed = self.closed.is_set()
            with self._lock:
                answer = next((m for m in self.received
                               if m.get("id") == msg_id and "method" not in m), None)
            if answer is None and closed:
                raise ConnectionError(f"the server closed the connection before answering "
                                      f"request {msg_id}")
            return answer
        return wait_until(found, f"the answer to request {msg_id}", timeout)

    def initialize(self, workspace: Path | None = None, token: str | None = TOKEN,
                   settings: dict[str, Any] | None = None,
                   plugin: dict[str, Any] | None = None) -> dict[str, Any]:
        """`plugin`: the client's editorPluginInfo (a Copilot plugin's)."""
        options: dict[str, Any] = {"agentls": settings or {}}
        if plugin is not None:
            options["editorPluginInfo"] = plugin
        if token is not None:
            options["agentlsToken"] = token
        params: dict[str, Any] = {"processId": None, "capabilities": {},
                                  "rootUri": workspace.as_uri() if workspace else None,
                                  "initializationOptions": options}
        if workspace is not None:
            params["workspaceFolders"] = [{"uri": workspace.as_uri(), "name": workspace.name}]
        answer = self.response(self.request("initialize", params))
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        return answer

    def requests_of(self, method: str) -> list[dict[str, Any]]:
        with self._lock:
            return [m for m in self.received if m.get("method") == method and "id" in m]

    def wait_closed(self, what: str) -> None:
        assert self.closed.wait(TIMEOUT), f"the server did not close {what}"

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def wait_listening(srv: Server, pattern: str) -> re.Match[str]:
    def listening() -> re.Match[str] | None:
        assert srv.alive(), f"the server exited: {srv.stderr()}"
        return re.search(pattern, srv.stderr())
    return wait_until(listening, f"the server to say {pattern!r}", TIMEOUT)


@contextmanager
def tcp_server(tmp_path: Path, *, env: dict[str, str] | None = None
               ) -> Iterator[tuple[Server, int]]:
    port = free_port()
    with server(tmp_path, "--tcp", "--port", str(port),
                env={"AGENTLS_TOKEN": TOKEN, **(env or {})}) as srv:
        yield srv, port


def status_works(port: int) -> None:
    """A proper client can still connect, initialize and ask."""
    client = Client.tcp(port)
    try:
        client.initialize()
        answer = client.response(client.request("agentls/status", {}))
        assert "result" in answer, answer
    finally:
        client.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("hello\n")
    return root


# --------------------------------------------------------------------------- tests


def test_a_second_client_cannot_see_or_answer_the_first_clients_approval(
        tmp_path: Path, workspace: Path) -> None:
    settings, _ = scripted(tmp_path, "cmd", [
        call("run_command", "r1", argv=["bash", "-c", "id > pwned.txt"]), {"text": "done"}],
        approval={"mode": "message"})
    with tcp_server(tmp_path) as (srv, port):
        editor = Client.tcp(port)
        editor.initialize(workspace, settings=settings)
        chat = editor.request("agentls/chat", {"prompt": "run it"})
        [question] = wait_until(lambda: editor.requests_of("window/showMessageRequest"),
                                "the approval question to reach the editor", TIMEOUT)
        assert "id > pwned.txt" in question["params"]["message"]

        # Another local process, even one that knows the token, while the
        # editor is connected: closed without a byte, and no takeover.
        intruder = Client.tcp(port)
        intruder.answer = {"title": "Allow once"}
        try:
            intruder.request("initialize", {"processId": None, "capabilities": {},
                                            "initializationOptions": {"agentlsToken": TOKEN}})
            intruder.send({"jsonrpc": "2.0", "id": question["id"],
                           "result": {"title": "Allow once"}})
        except OSError:
            pass  # already closed: refused before it could say anything
        intruder.wait_closed("the second connection")
        assert bytes(intruder.raw) == b""
        intruder.close()

        # The question is still the editor's to answer; it says Deny.
        editor.send({"jsonrpc": "2.0", "id": question["id"], "result": {"title": "Deny"}})
        result = editor.response(chat, timeout=60)["result"]
        assert result["status"] == "completed", result
        assert not (workspace / "pwned.txt").exists()
        assert srv.alive()
        editor.close()


def test_an_editor_leaving_mid_question_runs_nothing_and_the_next_one_takes_over(
        tmp_path: Path, workspace: Path) -> None:
    settings, _ = scripted(tmp_path, "cmd", [
        call("run_command", "r1", argv=["bash", "-c", "id > pwned.txt"]), {"text": "done"}],
        approval={"mode": "message"})
    with tcp_server(tmp_path) as (srv, port):
        editor = Client.tcp(port)
        editor.initialize(workspace, settings=settings)
        editor.request("agentls/chat", {"prompt": "run it"})
        wait_until(lambda: editor.requests_of("window/showMessageRequest"),
                   "the approval question to reach the editor", TIMEOUT)
        editor.close()  # gone without answering, without exit

        def turn_ended(client: Client) -> Any:
            answer = client.response(client.request("agentls/sessions", {}))
            assert "sessions" in answer["result"], answer  # not the left editor's answer
            sessions = answer["result"]["sessions"]
            return sessions and sessions[0]["status"]["status"] != "running" and sessions[0]

        nxt = wait_until(lambda: _connect_and_initialize(port), "the next editor", TIMEOUT)
        nxt.answer = {"title": "Allow once"}  # would allow, were it ever asked
        ended = wait_until(lambda: turn_ended(nxt), "the left editor's turn to end", TIMEOUT)
        assert ended["status"]["status"] in ("cancelled", "completed", "failed"), ended
        assert not nxt.requests_of("window/showMessageRequest")
        assert not (workspace / "pwned.txt").exists()
        assert srv.alive()
        nxt.close()


@pytest.mark.parametrize("request_bytes", [
    pytest.param(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
                 b"Content-Length: %d\r\n\r\n", id="http-post"),
    pytest.param(b"Content-Length: %d\r\nX-Requested-With: fetch\r\n\r\n", id="unknown-header"),
    pytest.param(b"Content-Length: %d\n\n", id="bare-newlines"),
])
def test_what_is_not_an_lsp_frame_is_refused(tmp_path: Path, request_bytes: bytes) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": None, "capabilities": {},
        "initializationOptions": {"agentlsToken": TOKEN}}}).encode()
    with tcp_server(tmp_path) as (srv, port):
        attacker = Client.tcp(port)
        attacker.send_raw((request_bytes % len(body)) + body)
        attacker.wait_closed("a connection that sent no LSP frame")
        assert bytes(attacker.raw) == b"", "the server answered a non-LSP request"
        attacker.close()
        status_works(port)
        assert srv.alive()


@pytest.mark.parametrize("token", [None, "wrong-" + "y" * 40, ""], ids=["none", "wrong", "empty"])
def test_a_client_without_the_token_gets_nothing(tmp_path: Path, token: str | None) -> None:
    with tcp_server(tmp_path) as (_srv, port):
        client = Client.tcp(port)
        options: dict[str, Any] = {} if token is None else {"agentlsToken": token}
        try:
            client.request("initialize", {"processId": None, "capabilities": {},
                                          "initializationOptions": options})
            client.request("agentls/status", {})
        except OSError:
            pass
        client.wait_closed("a connection without the token")
        assert bytes(client.raw) == b""
        client.close()
        status_works(port)


def test_the_first_message_must_be_initialize(tmp_path: Path) -> None:
    with tcp_server(tmp_path) as (_srv, port):
        client = Client.tcp(port)
        client.request("agentls/status", {"agentlsToken": TOKEN})
        client.wait_closed("a connection that skipped initialize")
        assert bytes(client.raw) == b""
        client.close()


def test_a_client_leaving_without_exit_does_not_stop_the_server(tmp_path: Path) -> None:
    with tcp_server(tmp_path) as (srv, port):
        first = Client.tcp(port)
        first.initialize()
        first.response(first.request("agentls/status", {}))
        first.close()
        # The next editor connects, initializes again and is served.
        second = wait_until(lambda: _connect_and_initialize(port),
                            "a second client to be accepted", TIMEOUT)
        assert "result" in second.response(second.request("agentls/status", {}))
        assert srv.alive()
        # `exit` (after shutdown) ends the server.
        second.response(second.request("shutdown", None))
        second.send({"jsonrpc": "2.0", "method": "exit", "params": None})
        assert srv.proc.wait(TIMEOUT) == 0


def _connect_and_initialize(port: int) -> Client | None:
    client = Client.tcp(port)
    try:
        client.initialize()
    except (AssertionError, OSError):
        client.close()
        return None
    return client


def test_the_generated_token_file_is_private(tmp_path: Path) -> None:
    port = free_port()
    with server(tmp_path, "--tcp", "--port", str(port)) as srv:
        said = wait_listening(srv, r"token is in (\S+) \(mode 0600\)")
        token_file = Path(said.group(1))
        assert token_file.parent == srv.runtime / "agentls"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
        token = token_file.read_text().strip()
        assert token not in srv.stderr()
        client = Client.tcp(port)
        client.initialize(token=token)
        assert "result" in client.response(client.request("agentls/status", {}))
        client.close()


def test_the_unix_socket_is_only_the_users(tmp_path: Path) -> None:
    with server(tmp_path, "--socket") as srv:
        path = srv.runtime / "agentls" / "agentls.sock"
        wait_listening(srv, re.escape(f"listening on Unix socket {path}"))
        assert stat.S_ISSOCK(path.lstat().st_mode)
        assert stat.S_IMODE(path.lstat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        first = Client.unix(path)
        first.initialize(token=None)
        assert "result" in first.response(first.request("agentls/status", {}))
        second = Client.unix(path)
        second.wait_closed("a second connection to the socket")
        assert bytes(second.raw) == b""
        first.close()
        assert srv.alive()
        again = wait_until(lambda: _unix_initialized(path), "the socket to take the next client",
                           TIMEOUT)
        again.response(again.request("shutdown", None))
        again.send({"jsonrpc": "2.0", "method": "exit", "params": None})
        assert srv.proc.wait(TIMEOUT) == 0
        assert not path.exists()


def _unix_initialized(path: Path) -> Client | None:
    client = Client.unix(path)
    try:
        client.initialize(token=None)
    except (AssertionError, OSError):
        client.close()
        return None
    return client


def test_a_socket_path_in_a_folder_others_can_write_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    os.chmod(folder, 0o777)
    with server(tmp_path, "--socket", str(folder / "my.sock")) as srv:
        assert srv.proc.wait(TIMEOUT) == 2
        assert "is writable by other users" in srv.stderr()
        assert not (folder / "my.sock").exists()
        assert stat.S_IMODE(folder.stat().st_mode) == 0o777  # the user's folder is left alone


def test_a_socket_path_in_the_users_own_folder_keeps_its_mode(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    os.chmod(folder, 0o755)
    path = folder / "my.sock"
    with server(tmp_path, "--socket", str(path)) as srv:
        wait_listening(srv, re.escape(f"listening on Unix socket {path}"))
        assert stat.S_IMODE(path.lstat().st_mode) == 0o600
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755


def test_a_short_token_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    with server(tmp_path, "--tcp", "--port", str(free_port()),
                env={"AGENTLS_TOKEN": "short"}) as srv:
        assert srv.proc.wait(TIMEOUT) == 2
        assert "AGENTLS_TOKEN is 5 characters long" in srv.stderr()


def test_sigterm_removes_the_socket_and_the_token_file(tmp_path: Path) -> None:
    with server(tmp_path / "a", "--socket") as srv:
        path = srv.runtime / "agentls" / "agentls.sock"
        wait_listening(srv, re.escape(f"listening on Unix socket {path}"))
        client = Client.unix(path)
        client.initialize(token=None)
        srv.proc.terminate()
        srv.proc.wait(TIMEOUT)
        assert not path.exists()
        client.close()
    port = free_port()
    with server(tmp_path / "b", "--tcp", "--port", str(port)) as srv:
        token_file = Path(wait_listening(srv, r"token is in (\S+) \(mode 0600\)").group(1))
        srv.proc.terminate()
        srv.proc.wait(TIMEOUT)
        assert not token_file.exists()
