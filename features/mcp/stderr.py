"""The stderr of a stdio MCP server: read by a thread from a pipe, only
the last few kilobytes kept, so a server flooding stderr costs no memory or
disk, and what it said last is there to show when it fails."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["STDERR_KEEP", "StderrTail"]

STDERR_KEEP = 4000


class StderrTail:
    """Reads a pipe in a thread and keeps its last bytes."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._lock = threading.Lock()
        self.total = 0
        self.read_fd, self.write_fd = os.pipe()
        self.closed = threading.Event()
        self._on_close: Callable[[], None] | None = None
        self._thread = threading.Thread(target=self._pump, name="mcp-stderr", daemon=True)
        self._thread.start()

    def on_close(self, callback: Callable[[], None]) -> None:
        self._on_close = callback
        if self.closed.is_set():
            callback()

    def _pump(self) -> None:
        try:
            while True:
                try:
                    chunk = os.read(self.read_fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                with self._lock:
                    self.total += len(chunk)
                    self._buffer += chunk
                    if len(self._buffer) > 2 * STDERR_KEEP:
                        del self._buffer[:-STDERR_KEEP]
        finally:
            with contextlib.suppress(OSError):
                os.close(self.read_fd)
            self.closed.set()
            callback = self._on_close
            if callback is not None:
                callback()

    def writer(self) -> Any:
        """A file object for the child's stderr (the SDK wants a TextIO)."""
        return os.fdopen(os.dup(self.write_fd), "w")

    def close_writer(self) -> None:
        """Our copy of the write end: once the child also exits, the pump sees EOF."""
        if self.write_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.write_fd)
            self.write_fd = -1

    def text(self, limit: int = 1500, lines: int = 15, width: int = 300) -> str:
        """The last `lines` lines (each cut at `width`), at most `limit` characters."""
        with self._lock:
            data = bytes(self._buffer[-STDERR_KEEP:])
        kept = [line if len(line) <= width else line[:width] + " ..."
                for line in data.decode("utf-8", "replace").strip().splitlines()[-lines:]]
        return "\n".join(kept)[-limit:]
