"""Framing of a streamed HTTP body: bytes -> lines (size-capped, strict
UTF-8) -> server-sent events. Our own rather than httpx-sse: see http.py.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LineSplitter", "ResponseFormatError", "SSEDecoder", "SSEEvent"]


class ResponseFormatError(ValueError):
    """The body breaks framing, size or encoding rules (-> invalid_response)."""


class LineSplitter:
    """Incremental bytes -> str lines, with a per-line and a total size cap.

    Lines end in \\n (a preceding \\r is dropped); bare-\\r line endings, legal
    in SSE but used by no model server we know, are not split. Splitting on
    the \\n byte before decoding is safe: it never occurs inside a multi-byte
    UTF-8 sequence. Each line is decoded strictly, so invalid UTF-8 fails.
    """

    def __init__(self, *, max_line_bytes: int, max_total_bytes: int) -> None:
        self.max_line_bytes = max_line_bytes
        self.max_total_bytes = max_total_bytes
        self._buffer = bytearray()
        self._total = 0

    def feed(self, data: bytes) -> list[str]:
        self._total += len(data)
        if self._total > self.max_total_bytes:
            raise ResponseFormatError(
                f"response larger than {self.max_total_bytes} bytes (max_response_bytes)"
            )
        self._buffer += data
        lines: list[str] = []
        start = 0
        while (end := self._buffer.find(b"\n", start)) != -1:
            lines.append(self._decode(self._buffer[start:end]))
            start = end + 1
        del self._buffer[:start]
        if len(self._buffer) > self.max_line_bytes:
            raise ResponseFormatError(
                f"a line longer than {self.max_line_bytes} bytes (max_line_bytes)"
            )
        return lines

    def close(self) -> list[str]:
        """The unterminated last line, if any."""
        rest, self._buffer = self._buffer, bytearray()
        return [self._decode(rest)] if rest else []

    def _decode(self, raw: bytearray) -> str:
        if len(raw) > self.max_line_bytes:
            raise ResponseFormatError(
                f"a line longer than {self.max_line_bytes} bytes (max_line_bytes)"
            )
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ResponseFormatError(f"invalid UTF-8 at byte {exc.start} of a line") from None


@dataclass(frozen=True, slots=True)
class SSEEvent:
    data: str
    event: str = "message"
    id: str | None = None


class SSEDecoder:
    """Server-sent events from lines (WHATWG rules: `data:` lines join with
    \\n, a blank line dispatches, `:` lines are comments). An event left
    without its blank line at end of stream is dropped, as the spec says."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None

    def feed(self, line: str) -> SSEEvent | None:
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = SSEEvent("\n".join(self._data), self._event or "message", self._id)
            self._data, self._event = [], ""
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            self._id = value
        return None
