"""The ACP wire on stdio: newline-delimited JSON-RPC, guarded.

- `claim_stdout()`: the real stdout becomes a private file descriptor for
  ACP frames and fd 1 is pointed at stderr, so nothing else (a library's
  print, a C extension, a child process inheriting fd 1) can put a byte on
  the protocol stream.
- `GuardedTransport`: the SDK's message transport (acp._transport.Transport
  shape: send / receive / close) over those streams. Unlike the SDK's own
  stdio framing, which logs and drops a line it cannot parse, it answers
  every bad line with a JSON-RPC error (parse error -32700, invalid request
  -32600, too large) and hands the SDK only JSON objects, so no input line
  can stop the receive loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_MESSAGE_BYTES", "GuardedTransport", "claim_stdout", "open_streams"]

log = logging.getLogger("agentls.acp.stdio")

# One JSON-RPC line at most (a 50 MB prompt fits; the prompt's own limit,
# session.maxPromptChars, answers it with an error that names the setting).
MAX_MESSAGE_BYTES = 96 * 1024 * 1024
READ_CHUNK_LIMIT = 1024 * 1024

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def claim_stdout() -> int:
    """A private duplicate of stdout for ACP; fd 1 then writes to stderr."""
    sys.stdout.flush()
    private = os.dup(1)
    os.dup2(2, 1)
    return private


class _WriteProtocol(asyncio.streams.FlowControlMixin):
    """Flow control for the pipe writer (StreamWriter.drain needs it)."""


async def open_streams(out_fd: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_CHUNK_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    pipe = os.fdopen(out_fd, "wb", buffering=0)
    transport, protocol = await loop.connect_write_pipe(_WriteProtocol, pipe)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


class GuardedTransport:
    """Newline-delimited JSON-RPC messages; bad lines get error answers."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 max_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.reader = reader
        self.writer = writer
        self.max_bytes = max_bytes
        self._lock = asyncio.Lock()
        self._closed = False
        self._waiters: list[tuple[Callable[[dict[str, Any]], bool], asyncio.Future[None]]] = []

    async def send(self, message: dict[str, Any]) -> None:
        if self._closed:
            raise ConnectionError("The ACP client is gone")
        data = (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        async with self._lock:
            self.writer.write(data)
            await self.writer.drain()
        for waiter in [w for w in self._waiters if w[0](message)]:
            self._waiters.remove(waiter)
            if not waiter[1].done():
                waiter[1].set_result(None)

    def expect(self, check: Callable[[dict[str, Any]], bool]) -> asyncio.Future[None]:
        """Done once a message `check` accepts has been written (the answer
        to a request, before what must follow it)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((check, future))
        return future

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._line()
            if line is None:
                return None
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except (ValueError, UnicodeDecodeError) as exc:
                await self._error(None, PARSE_ERROR, "Parse error: the line is not JSON "
                                  f"({type(exc).__name__}: {str(exc)[:200]}). Send one JSON-RPC "
                                  "message per line.")
                continue
            problem = _invalid(message)
            if problem is not None:
                ident = message.get("id") if isinstance(message, dict) else None
                await self._error(ident if isinstance(ident, int | str) else None,
                                  INVALID_REQUEST, problem)
                continue
            return dict(message)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.writer.close()
        except Exception:  # the pipe may already be gone
            log.debug("Closing stdout failed", exc_info=True)

    async def _line(self) -> bytes | None:
        """The next line (without limits of its own, up to max_bytes); None
        at the end of input. A longer line is skipped with an error."""
        chunks: list[bytes] = []
        size = 0
        too_large = False
        while True:
            try:
                part = await self.reader.readuntil(b"\n")
                done = True
            except asyncio.LimitOverrunError as exc:
                part = await self.reader.readexactly(exc.consumed)
                done = False
            except asyncio.IncompleteReadError as exc:
                part, done = exc.partial, True
                if not part and not chunks:
                    return None
            except (ConnectionError, OSError):
                return None
            size += len(part)
            if size > self.max_bytes:
                too_large = True
                chunks.clear()
            elif not too_large:
                chunks.append(part)
            if done:
                break
        if too_large:
            await self._error(None, INVALID_REQUEST, f"The message is larger than "
                              f"{self.max_bytes // (1024 * 1024)} MiB and was dropped.")
            return b""
        return b"".join(chunks)

    async def _error(self, ident: int | str | None, code: int, message: str) -> None:
        log.warning("Bad ACP input: %s", message)
        try:
            await self.send({"jsonrpc": "2.0", "id": ident,
                             "error": {"code": code, "message": message}})
        except (ConnectionError, OSError):
            pass


def _invalid(message: Any) -> str | None:
    """Why `message` is no JSON-RPC message the SDK can route, or None."""
    if not isinstance(message, dict):
        return "Invalid request: a JSON-RPC message must be a JSON object."
    method = message.get("method")
    if "method" in message and not isinstance(method, str):
        return "Invalid request: `method` must be a string."
    if method is None and "id" not in message:
        return "Invalid request: a message needs a `method` (request, notification) or an `id` " \
               "(response)."
    ident = message.get("id")
    if "id" in message and ident is not None and (
            isinstance(ident, bool) or not isinstance(ident, int | str)):
        return "Invalid request: `id` must be a string or an integer."
    params = message.get("params")
    if params is not None and not isinstance(params, dict | list):
        return "Invalid request: `params` must be an object."
    return None
