"""LSP over stdin/stdout read through the event loop.

pygls (2.1) reads stdin in a thread pool: one executor hop per header line
and per body, which cost 0.3-0.45 ms of CPU per message here and more when
the machine is loaded (thread wake-ups; bench/bench_inline.py, "floor").
When stdin is a pipe or a socket (how every editor starts a language
server), `PipeReader` reads it with asyncio's own pipe transport instead,
with the same guarantees as `BoundedReader`: a header line is read in
bounded pieces, a body over the limit is skipped in pieces (never allocated
whole) and answered with -32700, and bytes before a Content-Length header are
dropped so the stream gets back in step. Anything else on stdin (a regular
file, a terminal) keeps pygls' threaded reader.
"""

from __future__ import annotations

import asyncio
import os
import stat
from typing import Any

from agentls.lsp.wire.protocol import (
    MAX_HEADER_LINE_BYTES,
    MAX_MESSAGE_BYTES,
    oversized_marker,
    resync_header,
)

_SKIP_PIECE = 1 << 20


def can_read_as_pipe(stdin: Any, stdout: Any) -> bool:
    """Whether stdin can be read through the event loop. asyncio sets the
    descriptor non-blocking, which would also make stdout non-blocking if both
    are the same open file (a terminal, one socket for both): then no."""
    try:
        fd_in = stdin.fileno()
        mode = os.fstat(fd_in).st_mode
    except (AttributeError, OSError, ValueError):
        return False
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return False
    try:
        info_in, info_out = os.fstat(fd_in), os.fstat(stdout.fileno())
    except (AttributeError, OSError, ValueError):
        return True  # no stdout descriptor to share state with
    return (info_in.st_dev, info_in.st_ino) != (info_out.st_dev, info_out.st_ino)


class PipeReader:
    """pygls' AsyncReader (readline, readexactly) over an asyncio StreamReader."""

    def __init__(self, stream: asyncio.StreamReader, *,
                 max_message_bytes: int = MAX_MESSAGE_BYTES,
                 max_header_line_bytes: int = MAX_HEADER_LINE_BYTES) -> None:
        self._stream = stream
        self.max_message_bytes = max_message_bytes
        self.max_header_line_bytes = max_header_line_bytes

    @classmethod
    async def open(cls, stdin: Any) -> PipeReader:
        loop = asyncio.get_running_loop()
        # The limit bounds how far readuntil looks for a newline, so a "line"
        # without one (a body sent with no header) is read in pieces.
        stream = asyncio.StreamReader(limit=MAX_HEADER_LINE_BYTES, loop=loop)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), stdin)
        return cls(stream)

    async def readline(self) -> bytes:
        try:
            line = await self._stream.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            line = exc.partial  # end of input: b"" ends pygls' loop
        except asyncio.LimitOverrunError:
            # No newline within the limit: hand out one piece, as
            # readline(limit) does on a file; the rest follows as more "lines".
            line = await self._stream.read(self.max_header_line_bytes)
        return resync_header(line)

    async def readexactly(self, size: int) -> bytes:
        if 0 <= size <= self.max_message_bytes:
            try:
                return await self._stream.readexactly(size)
            except asyncio.IncompleteReadError as exc:
                return exc.partial  # the client went away mid-body
        remaining = size
        while remaining > 0:
            piece = await self._stream.read(min(remaining, _SKIP_PIECE))
            if not piece:
                return b""
            remaining -= len(piece)
        return oversized_marker(size)
