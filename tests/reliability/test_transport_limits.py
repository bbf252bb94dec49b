"""What an unauthenticated TCP peer can cost the REAL server (docs/security.md,
"Connecting to a running server").

The first frame used to be read whole (up to 64 MiB, 16 connections at once)
before its token was checked, and 16 idle connections held every handshake
slot for 10 s, so the editor could not connect. Now the first frame is at
most MAX_HANDSHAKE_BYTES, the handshake has a few seconds, and a new
connection beyond the slots closes the oldest pending one.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

import pytest

from tests.reliability.harness import wait_until
from tests.reliability.test_transport import TIMEOUT, Client, status_works, tcp_server

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX sockets")

MAX_HANDSHAKES = 16  # agentls.lsp.wire.transport.MAX_HANDSHAKES


def test_a_big_first_frame_is_refused_before_its_body_is_read(tmp_path: Path) -> None:
    size = 60_000_000
    chunk = b" " * (1 << 20)
    with tcp_server(tmp_path) as (srv, port):
        attacker = wait_until(lambda: _connect(port), "the server to accept", TIMEOUT)
        sent = 0
        with pytest.raises(OSError):  # reset/broken pipe: the server stopped reading
            attacker.sendall(b"Content-Length: %d\r\n\r\n" % size)
            while sent < size:
                attacker.sendall(chunk)
                sent += len(chunk)
        attacker.close()
        assert sent < size // 4, f"the server took {sent} bytes of an unauthenticated frame"
        assert "for the first message" in srv.stderr()
        status_works(port)


def _connect(port: int) -> socket.socket | None:
    try:
        return socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    except ConnectionRefusedError:
        return None


def test_a_real_sized_initialize_still_connects(tmp_path: Path) -> None:
    # An editor's initialize with large capabilities and settings (~30 KB) fits.
    with tcp_server(tmp_path) as (_srv, port):
        client = Client.tcp(port)
        settings = {"padding": "x" * 30_000}
        assert "capabilities" in client.initialize(settings=settings)["result"]
        client.close()


def test_an_idle_connection_is_closed_after_the_handshake_time(tmp_path: Path) -> None:
    with tcp_server(tmp_path, env={"AGENTLS_HANDSHAKE_SECONDS": "1"}) as (srv, port):
        idle = Client.tcp(port)
        started = time.monotonic()
        assert idle.closed.wait(TIMEOUT), "the idle connection was never closed"
        elapsed = time.monotonic() - started
        assert elapsed < 5, f"an idle connection kept its slot for {elapsed:.1f} s"
        assert bytes(idle.raw) == b""
        assert "no `initialize` within 1 s" in srv.stderr()
        idle.close()


def test_idle_connections_do_not_lock_the_editor_out(tmp_path: Path) -> None:
    with tcp_server(tmp_path, env={"AGENTLS_HANDSHAKE_SECONDS": "60"}) as (srv, port):
        extra = 4
        idle = [Client.tcp(port) for _ in range(MAX_HANDSHAKES + extra)]
        # The slots are full once the server has closed `extra` of them.
        wait_until(lambda: sum(c.closed.is_set() for c in idle) >= extra,
                   "the server to fill its handshake slots", TIMEOUT)
        editor = Client.tcp(port)
        body = {"processId": None, "capabilities": {},
                "initializationOptions": {"agentlsToken": "t0k3n-" + "x" * 40}}
        answer = editor.response(editor.request("initialize", body))
        assert "capabilities" in answer["result"], json.dumps(answer)[:200]
        editor.close()
        for client in idle:
            client.close()
        assert srv.alive()
