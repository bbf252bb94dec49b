"""A loopback fake model server for provider tests (OpenAI, Anthropic, Ollama).

Each test scripts replies per route and the provider's real httpx code talks
to it over TCP on 127.0.0.1:

    with FakeBackend() as backend:          # or the `fake_backend` fixture
        backend.script("POST", "/v1/chat/completions",
                       Reply(429, headers={"Retry-After": "1"}),
                       sse_reply([sse(openai_chunk("Hi")), SSE_DONE]))
        ... point the provider at backend.url + "/v1" ...
        backend.requests[0].json["stream"]   # what the client sent

Replies to a route are used in order; the last one repeats. A streamed reply
is a list of byte chunks, each written and flushed on its own (so SSE and
NDJSON framing is exactly what the test wrote), mixed with markers:
Pause(seconds), CLOSE (drop the connection mid-stream) and STALL (send
nothing more until the client hangs up). The server stops by itself after
`hard_timeout` seconds, so no test can hang on it.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "CLOSE",
    "SSE_DONE",
    "STALL",
    "ContextLimit",
    "FakeBackend",
    "Pause",
    "RecordedRequest",
    "Reply",
    "error_reply",
    "json_reply",
    "ndjson",
    "ndjson_reply",
    "openai_chunk",
    "openai_context_length_error",
    "openai_usage_chunk",
    "request_tokens",
    "sse",
    "sse_event",
    "sse_reply",
]


# --------------------------------------------------------------------------- scripting


@dataclass(frozen=True)
class Pause:
    """Inside `chunks`: wait this long before the next chunk."""

    seconds: float


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


CLOSE = _Marker("CLOSE")  # close the connection now, mid-response
STALL = _Marker("STALL")  # send nothing more; wait for the client to disconnect

Chunk = bytes | str | Pause | _Marker


@dataclass
class Reply:
    """One scripted response.

    body: bytes/str as is, dict/list as JSON (sent with Content-Length).
    chunks: a streamed body instead (Transfer-Encoding: chunked, or with
    chunked=False a close-delimited body). stall_before_headers: accept the
    request and never answer (the client's read timeout must fire).
    """

    status: int = 200
    body: bytes | str | dict[str, Any] | list[Any] | None = None
    chunks: Sequence[Chunk] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    chunk_delay: float = 0.0
    chunked: bool = True
    stall_before_headers: bool = False


@dataclass
class RecordedRequest:
    method: str
    path: str  # without the query string
    query: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    json: Any  # the parsed body, or None when it is not JSON
    received_at: float  # time.monotonic()
    client_disconnected: bool = False  # the client hung up before we finished
    finished: threading.Event = field(default_factory=threading.Event, repr=False)


# --------------------------------------------------------------------------- frames


def sse(payload: Any) -> bytes:
    """`data: {json}\\n\\n` (a str payload is sent verbatim)."""
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {data}\n\n".encode()


SSE_DONE = b"data: [DONE]\n\n"


def sse_event(event: str, payload: Any) -> bytes:
    """A named event, as Anthropic sends them."""
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return f"event: {event}\ndata: {data}\n\n".encode()


def ndjson(payload: Any) -> bytes:
    return json.dumps(payload).encode() + b"\n"


def openai_chunk(
    content: str | None = None,
    *,
    reasoning: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = None,
    text: str | None = None,
    model: str = "test-model",
) -> dict[str, Any]:
    """A chat.completion.chunk (or, with `text`, a /completions chunk)."""
    if text is not None:
        choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": finish_reason}
        return {"id": "cmpl-1", "object": "text_completion", "model": model, "choices": [choice]}
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def openai_usage_chunk(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """The final chunk OpenAI sends with stream_options.include_usage."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def sse_reply(chunks: Sequence[Chunk], **kwargs: Any) -> Reply:
    headers = {"Content-Type": "text/event-stream", **kwargs.pop("headers", {})}
    return Reply(chunks=chunks, headers=headers, **kwargs)


def ndjson_reply(chunks: Sequence[Chunk], **kwargs: Any) -> Reply:
    headers = {"Content-Type": "application/x-ndjson", **kwargs.pop("headers", {})}
    return Reply(chunks=chunks, headers=headers, **kwargs)


def json_reply(payload: Any, status: int = 200, **kwargs: Any) -> Reply:
    return Reply(status=status, body=payload, **kwargs)


def error_reply(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """An error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}."""
    error = {"message": message, "type": type, "param": None, "code": code}
    return Reply(status=status, body={"error": error}, headers=dict(headers or {}))


# --------------------------------------------------------------------------- server


class FakeBackend:
    """A threaded HTTP/1.1 server on 127.0.0.1:<random port> (see module doc)."""

    def __init__(self, *, hard_timeout: float = 30.0) -> None:
        self.hard_timeout = hard_timeout
        self.requests: list[RecordedRequest] = []
        self._routes: dict[tuple[str, str], list[Reply]] = {}
        self._responders: dict[tuple[str, str], Callable[[RecordedRequest], Reply]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._timer: threading.Timer | None = None

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> FakeBackend:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.backend = self
        self._server = server
        threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        self._timer = threading.Timer(self.hard_timeout, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()  # wakes stalls and pauses
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.cancel()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        with self._lock:
            connections, self._connections = list(self._connections), set()
        for conn in connections:  # unblocks handlers waiting on keep-alive reads
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> FakeBackend:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "FakeBackend not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- scripting and inspection ---------------------------------------------
    def script(self, method: str, path: str, *replies: Reply) -> None:
        """Queue replies for `method path` (used in order; the last repeats)."""
        with self._lock:
            self._routes.setdefault((method.upper(), path), []).extend(replies)

    def respond(self, method: str, path: str, answer: Callable[[RecordedRequest], Reply]) -> None:
        """Answer `method path` by calling `answer` with each request (for
        replies that depend on the body, e.g. Ollama's /api/show per model);
        takes precedence over scripted replies."""
        with self._lock:
            self._responders[(method.upper(), path)] = answer

    def requests_to(self, path: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.requests) >= count:
                    return list(self.requests)
            time.sleep(0.005)
        raise AssertionError(f"expected {count} request(s), got {len(self.requests)}")

    def wait_for_disconnect(self, request: RecordedRequest, timeout: float = 5.0) -> bool:
        """True once the handler for `request` saw the client hang up."""
        request.finished.wait(timeout)
        return request.client_disconnected

    # -- used by the handler ---------------------------------------------------
    def _next_reply(self, method: str, path: str) -> Reply:
        with self._lock:
            queue = self._routes.get((method, path))
            if not queue:
                message = f"fake backend: no reply scripted for {method} {path}"
                return error_reply(404, message, type="not_found_error")
            return queue.pop(0) if len(queue) > 1 else queue[0]

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(conn)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # handler threads end by themselves (stop wakes them)
    backend: FakeBackend


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked, as real servers do
    server: _Server
    timeout = 10  # a socket that goes silent cannot pin a thread for long

    def setup(self) -> None:
        super().setup()
        # Without this, Nagle + delayed ACK stall each small write ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.backend._track(self.connection, True)

    def handle(self) -> None:
        # A client that hangs up with bytes unread makes the next read of a
        # keep-alive connection raise; that is the client's right, not an error.
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError):
            self.close_connection = True

    def finish(self) -> None:
        self.server.backend._track(self.connection, False)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_GET

    def _handle(self) -> None:
        backend = self.server.backend
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        parts = urlsplit(self.path)
        record = RecordedRequest(
            method=self.command,
            path=parts.path,
            query=parts.query,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            json=parsed,
            received_at=time.monotonic(),
        )
        backend._record(record)
        try:
            answer = backend._responders.get((self.command, parts.path))
            reply = answer(record) if answer else backend._next_reply(self.command, parts.path)
            self._reply(reply, record)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            record.client_disconnected = True
            self.close_connection = True
        finally:
            record.finished.set()

    def _reply(self, reply: Reply, record: RecordedRequest) -> None:
        if reply.stall_before_headers:
            self._stall(record)
            return
        self.send_response(reply.status)
        headers = dict(reply.headers)
        if reply.chunks is None:
            body = reply.body
            if isinstance(body, dict | list):
                body = json.dumps(body)
                headers.setdefault("Content-Type", "application/json")
            data = body.encode() if isinstance(body, str) else (body or b"")
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        for name, value in headers.items():
            self.send_header(name, value)
        if reply.chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        stop = self.server.backend._stopping
        for item in reply.chunks:
            if isinstance(item, Pause):
                stop.wait(item.seconds)
            elif item is CLOSE:
                self.close_connection = True
                return
            elif item is STALL:
                self._stall(record)
                return
            elif isinstance(item, bytes | str):
                data = item.encode() if isinstance(item, str) else item
                if reply.chunked:
                    data = b"%x\r\n%s\r\n" % (len(data), data)
                self.wfile.write(data)
            if reply.chunk_delay:
                stop.wait(reply.chunk_delay)
        if reply.chunked:
            self.wfile.write(b"0\r\n\r\n")

    def _stall(self, record: RecordedRequest) -> None:
        """Send nothing until the client closes (a read returns b"") or the
        server stops."""
        self.close_connection = True
        sock = self.connection
        stop = self.server.backend._stopping
        while not stop.is_set():
            readable, _, _ = select.select([sock], [], [], 0.05)
            if not readable:
                continue
            try:
                if sock.recv(4096) == b"":
                    record.client_disconnected = True
                    return
            except OSError:
                record.client_disconnected = True
                return


# --------------------------------------------------------------------------- context window


def openai_context_length_error(limit: int, used: int) -> Reply:
    """OpenAI's real answer to a request over the model's context window."""
    message = (
        f"This model's maximum context length is {limit} tokens. However, your messages "
        f"resulted in {used} tokens. Please reduce the length of the messages."
    )
    return Reply(status=400, body={"error": {
        "message": message, "type": "invalid_request_error", "param": "messages",
        "code": "context_length_exceeded"}})


def request_tokens(request: RecordedRequest) -> int:
    """The fake's token count of a chat request: its messages and tools as
    JSON, 4 bytes a token (about what OpenAI's tokenizers average on English)."""
    body = request.json if isinstance(request.json, dict) else {}
    sent = json.dumps({"messages": body.get("messages"), "tools": body.get("tools")})
    return len(sent.encode()) // 4


class ContextLimit:
    """A responder that rejects requests over `limit` tokens as OpenAI does
    (HTTP 400, code context_length_exceeded) and hands the rest to `answer`."""

    def __init__(self, limit: int, answer: Callable[[RecordedRequest], Reply]) -> None:
        self.limit = limit
        self.answer = answer
        self.rejected: list[int] = []  # the token counts refused
        self.accepted: list[int] = []

    def __call__(self, request: RecordedRequest) -> Reply:
        tokens = request_tokens(request)
        if tokens > self.limit:
            self.rejected.append(tokens)
            return openai_context_length_error(self.limit, tokens)
        self.accepted.append(tokens)
        return self.answer(request)
