"""LSP over a socket: a Unix socket only its owner can reach, or TCP with a
per-start secret (docs/security.md, "Connecting to a running server").

What pygls' own `start_tcp` did, and why this module replaces it: it bound
with no authentication, each new connection replaced the server's writer (a
second local client received the editor's approval questions and answered
them), any bytes with a `Content-Length` line in them were taken for LSP (a
browser's `fetch()` POST included), and the first client to leave shut the
server down. Here:

- One client at a time. A connection that arrives while a client is
  connected is closed at once, unanswered; it never gets the writer.
- Every frame is checked before pygls sees it (`StrictFrameReader`): header
  lines `Content-Length` (required, digits, at most MAX_MESSAGE_BYTES) and
  `Content-Type` only, each ended by CRLF, a bounded number of them. Anything
  else (an HTTP request line, an unknown header) closes the connection with
  no answer.
- The first frame must be `initialize`. Over TCP its
  `initializationOptions.agentlsToken` must equal the server's token
  (compared in constant time); the token is taken out of the message before
  pygls parses (and logs) it. A connection that fails gets no answer at all.
  A Unix socket needs no token: its folder is 0700 and the socket 0600,
  every folder above is the user's or root's and not writable by others
  (check_folders_on_the_way), and the peer's uid is checked where the
  system tells it (SO_PEERCRED).
- The first frame is small (MAX_HANDSHAKE_BYTES) and must arrive in a few
  seconds; a new connection beyond MAX_HANDSHAKES closes the oldest one.
- A client leaving does not end the server unless it sent `exit` (or
  `shutdown` first): questions still waiting for that client are answered
  "no answer" (so an approval is a Deny), and the next authenticated client
  can connect and initialize again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import secrets
import signal
import socket
import struct
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentls.core.support.state_dir import (
    PrivatePathError,
    check_folders_on_the_way,
    check_own_dir,
    ensure_private_dir,
    free_socket_path,
    runtime_dir,
    write_private_file,
)
from agentls.lsp.wire.protocol import MAX_MESSAGE_BYTES

log = logging.getLogger("agentls.lsp.wire.transport")

TOKEN_ENV = "AGENTLS_TOKEN"
TOKEN_OPTION = "agentlsToken"  # initializationOptions key the client sends it in
SOCKET_NAME = "agentls.sock"
MIN_TOKEN_CHARS = 16
# Real LSP headers are two lines of ~40 bytes.
MAX_HEADER_LINE_BYTES = 1024
MAX_HEADER_LINES = 8
# A client that connects has this long to send a complete, authenticated
# `initialize` (an editor sends it at once); $AGENTLS_HANDSHAKE_SECONDS
# overrides it (a slow link, the tests).
HANDSHAKE_SECONDS = 3.0
HANDSHAKE_ENV = "AGENTLS_HANDSHAKE_SECONDS"
# The first frame is read whole before its token is checked, so it is small:
# VS Code's `initialize` with every capability and setting is ~15 KB.
MAX_HANDSHAKE_BYTES = 64 << 10
# Connections still in their handshake at once; a new one beyond this closes
# the oldest, so idle connections cannot lock the editor out.
MAX_HANDSHAKES = 16
_KNOWN_HEADERS = ("content-length", "content-type")


class FrameError(Exception):
    """The peer sent something that is not a well-formed LSP frame (or failed
    the handshake): the connection is closed without an answer."""


# --------------------------------------------------------------------------- places


def default_socket_path(environ: Mapping[str, str] = os.environ) -> Path:
    return runtime_dir(environ) / SOCKET_NAME


def default_token_path(port: int, environ: Mapping[str, str] = os.environ) -> Path:
    return runtime_dir(environ) / f"tcp-{port}.token"


@dataclass(frozen=True)
class Token:
    value: str
    file: Path | None  # where it was written (None: it came from the environment)


def load_token(environ: Mapping[str, str] = os.environ) -> str | None:
    """The token from AGENTLS_TOKEN, or None when it is not set. A short one
    is refused: it could be guessed."""
    value = environ.get(TOKEN_ENV, "").strip()
    if not value:
        return None
    if len(value) < MIN_TOKEN_CHARS:
        raise ValueError(f"{TOKEN_ENV} is {len(value)} characters long; use at least "
                         f"{MIN_TOKEN_CHARS} random characters (e.g. `python -c \"import "
                         "secrets; print(secrets.token_urlsafe(32))\"`), or unset it to let "
                         "agentls make one")
    return value


def check_token_folder(token_file: Path | None) -> Path:
    """The folder a generated token will be written to, checked before the
    port is bound (new_token_file checks it again)."""
    if token_file is None:
        return runtime_dir()
    return check_folders_on_the_way(check_own_dir(token_file.expanduser().absolute().parent))


def new_token_file(path: Path, *, chosen: bool = False) -> Token:
    """A fresh random token written to `path` with mode 0600. Our runtime
    folder is made 0700; a folder the user chose (`chosen`) must be theirs
    and writable by nobody else (check_own_dir)."""
    value = secrets.token_urlsafe(32)
    if chosen:
        check_own_dir(path.parent)
    else:
        ensure_private_dir(path.parent)
    check_folders_on_the_way(path.parent)
    write_private_file(path, value + "\n")
    return Token(value, path)


# --------------------------------------------------------------------------- framing


class StrictFrameReader:
    """pygls' AsyncReader (readline, readexactly) over a socket, handing pygls
    only well-formed frames. Each frame is read whole and checked first; pygls
    then sees a canonical `Content-Length` line, the blank line and the body.
    `check_first(message) -> message` vets the first frame (the handshake) and
    returns what pygls gets; it raises FrameError to refuse."""

    def __init__(self, stream: asyncio.StreamReader, *,
                 check_first: Callable[[Any], Any] | None = None,
                 max_message_bytes: int = MAX_MESSAGE_BYTES,
                 max_first_bytes: int = MAX_HANDSHAKE_BYTES) -> None:
        self._stream = stream
        self._check_first = check_first
        self._max = max_message_bytes
        self._max_first = max_first_bytes
        self._lines: list[bytes] = []
        self._body = b""
        self.error: FrameError | None = None  # why the stream ended, if it was refused

    async def first_frame(self) -> None:
        """Read and check the first frame now (the handshake), before the
        connection is given the writer. Raises FrameError."""
        await self._load()
        if not self._lines:
            raise FrameError("the connection ended before `initialize`")

    async def readline(self) -> bytes:
        if not self._lines and not self._body:
            try:
                await self._load()
            except FrameError as exc:
                self.error = exc
                return b""  # ends pygls' loop for this connection
            except (ConnectionError, asyncio.IncompleteReadError):
                return b""
        return self._lines.pop(0) if self._lines else b""

    async def readexactly(self, size: int) -> bytes:
        body, self._body = self._body, b""
        return body

    async def _load(self) -> None:
        length = await self._read_headers()
        if length is None:  # clean end of stream between frames
            self._lines = []
            return
        try:
            body = await self._stream.readexactly(length)
        except asyncio.IncompleteReadError:
            raise FrameError("the connection ended inside a message body") from None
        if self._check_first is not None:
            check, self._check_first = self._check_first, None
            body = _encode(check(_decode(body)))
        self._lines = [b"Content-Length: %d\r\n" % len(body), b"\r\n"]
        self._body = body

    async def _read_headers(self) -> int | None:
        limit = self._max if self._check_first is None else min(self._max, self._max_first)
        length: int | None = None
        for index in range(MAX_HEADER_LINES + 1):
            line = await self._read_line()
            if line is None:
                if index == 0:
                    return None
                raise FrameError("the connection ended inside a header")
            if line == b"":
                if length is None:
                    raise FrameError("a message without a Content-Length header")
                return length
            name, sep, value = line.partition(b":")
            key = name.decode("ascii", "replace").strip().lower()
            if not sep or key not in _KNOWN_HEADERS or name != name.strip():
                raise FrameError(f"not an LSP header: {_show(line)}")
            if key == "content-length":
                digits = value.strip()
                if length is not None or not digits.isdigit() or len(digits) > 12:
                    raise FrameError(f"bad Content-Length: {_show(line)}")
                length = int(digits)
                if not 0 < length <= limit:
                    what = "" if limit == self._max else " for the first message"
                    raise FrameError(f"Content-Length {length} outside 1..{limit}{what}")
        raise FrameError(f"more than {MAX_HEADER_LINES} header lines")

    async def _read_line(self) -> bytes | None:
        """One header line without its CRLF; None at a clean end of stream."""
        try:
            line = await self._stream.readuntil(b"\r\n")
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                return None
            raise FrameError(f"the connection ended inside a header: {_show(exc.partial)}"
                             ) from None
        except asyncio.LimitOverrunError:
            raise FrameError("a header line longer than "
                             f"{MAX_HEADER_LINE_BYTES} bytes") from None
        return line[:-2]


def _decode(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:  # UnicodeDecodeError included
        raise FrameError("the first message is not JSON") from None


def _encode(message: Any) -> bytes:
    return json.dumps(message, ensure_ascii=False).encode("utf-8")


def _show(raw: bytes) -> str:
    return repr(raw[:80])


def handshake_check(token: str | None) -> Callable[[Any], Any]:
    """The first frame's check: an `initialize` request and, when the server
    has a token, `initializationOptions.agentlsToken` equal to it. The token
    is removed from the message either way."""

    def check(message: Any) -> Any:
        if not isinstance(message, dict) or message.get("method") != "initialize" \
                or "id" not in message:
            raise FrameError("the first message must be the `initialize` request")
        params = message.get("params")
        options = params.get("initializationOptions") if isinstance(params, dict) else None
        sent = options.pop(TOKEN_OPTION, None) if isinstance(options, dict) else None
        if token is None:
            return message
        if not isinstance(sent, str):
            raise FrameError(f"`initialize` without initializationOptions.{TOKEN_OPTION}")
        if not hmac.compare_digest(sent.encode("utf-8", "replace"), token.encode("utf-8")):
            raise FrameError(f"`initialize` with a wrong {TOKEN_OPTION}")
        return message

    return check


# --------------------------------------------------------------------------- writers


class SocketWriter:
    """pygls' writer over one connection."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    def write(self, data: bytes) -> None:
        if not self._writer.is_closing():
            self._writer.write(data)

    def close(self) -> None:
        self._writer.close()


class NoClientWriter:
    """The writer while no client is connected: what the server says is
    dropped (the next client asks for what it needs)."""

    def write(self, data: bytes) -> None:
        log.debug("No client connected; dropped %d bytes", len(data))

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------- service


class SocketService:
    """Accepts connections for one language server, one client at a time."""

    def __init__(self, server: Any, *, token: str | None, unix: bool) -> None:
        self.server = server
        self.token = token
        self.unix = unix
        self._client: asyncio.StreamWriter | None = None
        # Connections in their handshake, oldest first (dicts keep insertion order).
        self._handshakes: dict[asyncio.StreamWriter, None] = {}
        self.handshake_seconds = handshake_seconds()

    @property
    def protocol(self) -> Any:
        return self.server.protocol

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = _peer_name(writer)
        if self._client is not None:
            log.warning("Refused a connection from %s: a client is already connected", peer)
            await _close(writer)
            return
        if len(self._handshakes) >= MAX_HANDSHAKES:
            oldest = next(iter(self._handshakes))
            log.warning("Closed the connection from %s: %d connections are authenticating "
                        "and it is the oldest", _peer_name(oldest), MAX_HANDSHAKES)
            del self._handshakes[oldest]
            oldest.close()  # its pending read ends; its handler refuses it
        self._handshakes[writer] = None
        try:
            if self.unix:
                _check_peer_uid(writer)
            frames = StrictFrameReader(reader, check_first=handshake_check(self.token))
            await asyncio.wait_for(frames.first_frame(), self.handshake_seconds)
            if writer.is_closing():
                raise ConnectionError("closed for a newer connection")
        except (FrameError, TimeoutError, ConnectionError, asyncio.IncompleteReadError) as exc:
            why = str(exc) or f"no `initialize` within {self.handshake_seconds:g} s"
            log.warning("Refused a connection from %s: %s", peer, why)
            await _close(writer)
            return
        finally:
            self._handshakes.pop(writer, None)
        if self._client is not None:  # another client finished its handshake first
            log.warning("Refused a connection from %s: a client is already connected", peer)
            await _close(writer)
            return
        self._client = writer
        log.info("Client connected from %s", peer)
        self.protocol.set_writer(SocketWriter(writer))
        try:
            await self.server.serve_connection(frames)
            if frames.error is not None:
                log.warning("Closed the connection from %s: %s", peer, frames.error)
        finally:
            self._client = None
            self.protocol.set_writer(NoClientWriter())
            self.protocol.client_gone()
            await _close(writer)
            log.info("Client from %s disconnected", peer)
        if getattr(self.protocol, "_shutdown", False):
            # `shutdown` was answered: the client meant to end the server.
            log.info("The client sent shutdown and left; stopping")
            self.server.shutdown()


def handshake_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """HANDSHAKE_SECONDS, or $AGENTLS_HANDSHAKE_SECONDS when it is a positive number."""
    raw = environ.get(HANDSHAKE_ENV, "").strip()
    try:
        value = float(raw) if raw else HANDSHAKE_SECONDS
    except ValueError:
        value = -1.0
    if not 0 < value <= 600:
        log.warning("%s=%r is not a number of seconds in (0, 600]; using %g", HANDSHAKE_ENV,
                    raw, HANDSHAKE_SECONDS)
        return HANDSHAKE_SECONDS
    return value


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    try:
        await asyncio.wait_for(writer.wait_closed(), 2)
    except (OSError, TimeoutError):
        pass


def _peer_name(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return "the Unix socket"


def _check_peer_uid(writer: asyncio.StreamWriter) -> None:
    """Defence in depth behind the 0600 socket: the peer runs as this user."""
    sock = writer.get_extra_info("socket")
    option = getattr(socket, "SO_PEERCRED", None)
    if sock is None or option is None:
        return  # not Linux: the socket's mode is the guard
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    except OSError:
        return
    _pid, uid, _gid = struct.unpack("3i", raw)
    if uid != os.getuid():
        raise FrameError(f"the peer runs as uid {uid}, not as this user")


# --------------------------------------------------------------------------- listening


def prepare_socket_path(path: Path, *, chosen: bool = False) -> Path:
    """Make `path` ready to bind: our runtime folder is made 0700; a folder
    the user chose (`chosen`) must be theirs and writable by nobody else (its
    mode is left alone: it may be the home folder); no live server on it; a
    stale socket file left by a killed server is removed."""
    path = path.expanduser().absolute()
    if chosen:
        check_own_dir(path.parent)
    else:
        ensure_private_dir(path.parent)
    check_folders_on_the_way(path.parent)
    why = free_socket_path(path)  # removes a socket left by a killed server
    if why == "not a socket":
        raise PrivatePathError(f"{path} exists and is not a socket; pass another path to "
                               "--socket")
    if why == "listening":
        raise PrivatePathError(f"another agentls server is listening on {path}; connect to "
                               "it, stop it, or pass another path to --socket")
    return path


async def listen_unix(service: SocketService, path: Path) -> asyncio.Server:
    old = os.umask(0o177)  # the socket is created 0600, never briefly wider
    try:
        listener = await asyncio.start_unix_server(service.handle, path=str(path),
                                                   limit=MAX_HEADER_LINE_BYTES)
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    return listener


async def listen_tcp(service: SocketService, host: str, port: int) -> asyncio.Server:
    return await asyncio.start_server(service.handle, host, port, limit=MAX_HEADER_LINE_BYTES)


def announce(message: str) -> None:
    """Where the server listens, on stderr (editors and scripts read it) and
    in the log."""
    log.info("%s", message)
    print(f"agentls: {message}", file=sys.stderr, flush=True)


def run_service(server: Any, start: Callable[[SocketService], Any], service: SocketService,
                cleanup: Callable[[], None]) -> None:
    """Run the event loop until the server stops (exit, a signal)."""
    server._stop_event = threading.Event()

    async def main() -> None:
        # SIGTERM stops serving the way exit does, so the socket and the
        # token file are removed (cleanup) rather than left behind; it is
        # caught from before the listener announces itself.
        listening: list[asyncio.Server] = []
        terminated = threading.Event()

        def on_sigterm() -> None:
            terminated.set()
            for each in listening:
                each.close()

        with contextlib.suppress(NotImplementedError, RuntimeError):
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_sigterm)
        listener = await start(service)
        listening.append(listener)
        server._server = listener
        if terminated.is_set():
            listener.close()
            return
        try:
            await listener.serve_forever()
        except asyncio.CancelledError:
            pass
        finally:
            listener.close()  # not wait_closed: from 3.12 it waits for the client to leave

    try:
        asyncio.run(main())
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        cleanup()
        server.shutdown()
