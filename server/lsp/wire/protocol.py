"""pygls' protocol with fixes so that every malformed message gets the
JSON-RPC answer it is due, and none can stop the server.

pygls (2.1) parses each body with `json.loads(body, object_hook=
structure_message)` and, on any failure, logs and carries on without
answering, so the client waits forever. Here:

- a body that is not JSON (or not UTF-8, or nested too deep) is answered
  with -32700 (ParseError, id null) by `answer_parse_error`, which the
  server's error handler calls;
- a message that is not a JSON-RPC 2.0 request/notification/response
  object (an array, a number, jsonrpc "1.0", a non-string method, an id
  that is neither string nor integer) is answered with -32600
  (InvalidRequest);
- a request whose params do not fit the LSP type is answered with -32602
  (InvalidParams) naming the method and the field that was wrong;
- requests after `shutdown` are answered with -32600, as LSP says, instead
  of being dropped;
- `params` may be omitted (JSON-RPC allows it), so an unknown method
  without params is -32601 and `agentls/status` without params answers;
- an `agentls/*` request whose params hold an integer no editor can send
  exactly (beyond +-(2**53 - 1), JavaScript's safe range) is answered with
  -32602 naming the field, before any handler sees it (a turn number of
  2**70 reached SQLite and came back as -32603 with a traceback);
- an error no handler expected is answered with -32603 and one line saying
  what failed, never with pygls' Python traceback (server paths): that goes
  to the log only.

Over a socket (transport.py) the client can go away while the server still
waits for its answers: `client_gone` fails those questions (an approval
becomes "no answer", a Deny) and cancels the requests it had running, and
`connected` makes later questions fail at once instead of waiting for a
client that is not there.

A request answered before its work is done (a Copilot chat turn streams
after `conversation/create` answered) can still be stopped by the client's
`$/cancelRequest` for it: the handler reads its id from `REQUEST_ID` and
registers what stops the work (`cancel_after_answer`).

Only the outermost object of a message is the message: pygls' object_hook
also sees every nested object, so a params value that merely looks like a
message (`{"jsonrpc": "2.0", "id": 5, ...}`) used to be structured, and
answered, as one. Structuring is therefore deferred to `handle_message`,
which is called once, with the outermost value.

`BoundedReader` wraps stdin so a Content-Length header cannot make the
server allocate an arbitrary amount up front (pygls reads the body with one
`read(n)`, which allocates n bytes at once: a header claiming 100 TB killed
the process with MemoryError), and so the stream gets back in step after a
message sent with a missing or wrong Content-Length.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from contextvars import ContextVar
from typing import Any, BinaryIO

from lsprotocol.types import ResponseError
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
)
from pygls.protocol import LanguageServerProtocol

log = logging.getLogger("agentls.lsp.wire.protocol")

JSONRPC_VERSION = "2.0"
PARSE_ERROR = -32700
# One LSP message body; far above any real document (a 64 MiB file is not
# something an editor sends to a language server), far below memory trouble.
MAX_MESSAGE_BYTES = 64 << 20
# One header line; real headers are ~40 bytes. Longer "lines" (a body sent
# without a Content-Length header) are read in pieces and ignored.
MAX_HEADER_LINE_BYTES = 64 << 10
# What BoundedReader hands pygls instead of a body over MAX_MESSAGE_BYTES: it
# fails to parse, and answer_parse_error recognises it to say why.
# (no leading NUL: json.loads would take it for UTF-16 and fail differently)
_OVERSIZED = "agentls-oversized:"
# The largest integer a JSON-RPC peer can send exactly (JavaScript's
# Number.MAX_SAFE_INTEGER); agentls/* params never need more.
MAX_SAFE_INTEGER = (1 << 53) - 1
CUSTOM_PREFIX = "agentls/"
# The id of the client request a handler runs for (each handler's task has its copy).
REQUEST_ID: ContextVar[Any] = ContextVar("agentls_request_id", default=None)


class ClientGone(JsonRpcException):
    """The answer to a server -> client request whose client disconnected."""

    CODE = -32099
    MESSAGE = "The client disconnected before answering"


class AgentlsProtocol(LanguageServerProtocol):
    # False while no client is connected (socket transports between clients).
    connected = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._outgoing: set[Any] = set()  # ids of our requests waiting for the client
        self._generation = 0  # +1 each time a client leaves (client_gone)
        # id of an answered request -> what its $/cancelRequest stops (cancel_after_answer)
        self._after_answer: dict[Any, Callable[[], None]] = {}

    def structure_message(self, data: dict[str, Any]) -> Any:
        # Called by json.loads for every object, innermost first; only
        # handle_message knows which one is the message (see module doc).
        return data

    def handle_message(self, message: Any) -> None:
        structured = self._structure(message)
        if structured is not None:
            super().handle_message(structured)

    def _execute_handler(self, msg_id: Any, handler: Any, callback: Any,
                         args: Any = None, kwargs: Any = None) -> None:
        # pygls keeps the future of every handler it runs in _request_futures
        # (for $/cancelRequest) but removes only those of requests it answers:
        # each notification (every didChange, via its generator handler) and
        # each step of a generator handler left one behind, about 2 KB per
        # keystroke for the life of the process (bench_load.py: +38 MiB after
        # 20,000 keys). Forget a handler's future once it is done.
        # A step cancelled at exit (a notification handler still awaiting,
        # e.g. `initialized` waiting for settings) made pygls' generator
        # runner re-raise the CancelledError from this callback, which
        # asyncio logged as an error with a traceback; it is no error.
        # A handler of a client that has since disconnected (socket
        # transports) answers nobody: its answer must not reach the next
        # client, which may be using the same request id.
        generation = self._generation

        def done(future: Any) -> None:
            try:
                if generation == self._generation:
                    callback(future)
                else:
                    log.debug("dropped the answer to %s: its client left", msg_id)
            except asyncio.CancelledError:
                log.debug("handler step cancelled: %s", msg_id)
            finally:
                if self._request_futures.get(msg_id) is future:
                    del self._request_futures[msg_id]

        token = REQUEST_ID.set(msg_id)
        try:
            super()._execute_handler(msg_id, handler, done, args, kwargs)
        finally:
            REQUEST_ID.reset(token)

    def cancel_after_answer(self, msg_id: Any, stop: Callable[[], None] | None) -> None:
        """`stop` runs when the client cancels request `msg_id` after it was
        answered (None: forget it; the work it would stop is over)."""
        if stop is None:
            self._after_answer.pop(msg_id, None)
        else:
            self._after_answer[msg_id] = stop

    # -- requests to the client ---------------------------------------------------
    def send_request(self, method: str, params: Any | None = None,
                     callback: Any = None, msg_id: Any = None) -> Future[Any]:
        msg_id = str(uuid.uuid4()) if msg_id is None else msg_id
        if not self.connected:
            future: Future[Any] = Future()
            future.set_exception(ClientGone(f"no client is connected to answer {method}"))
            return future
        future = super().send_request(method, params, callback, msg_id)
        self._outgoing.add(msg_id)
        future.add_done_callback(lambda _f: self._outgoing.discard(msg_id))
        return future

    def client_gone(self) -> None:
        """The client disconnected: its questions fail, its requests stop and
        their answers are dropped."""
        self._generation += 1
        waiting, self._outgoing = self._outgoing, set()
        for msg_id in waiting:
            future = self._request_futures.pop(msg_id, None)
            self._result_types.pop(msg_id, None)
            if future is not None and not future.done():
                future.set_exception(ClientGone("the client disconnected before answering"))
        for msg_id, future in list(self._request_futures.items()):
            if not future.done():
                log.info("Cancelling request %s of the client that left", msg_id)
                future.cancel()
        # Its answered requests' work too; the next client's ids are its own.
        stops, self._after_answer = list(self._after_answer.values()), {}
        for stop in stops:
            stop()

    # -- answers without tracebacks -------------------------------------------------
    def _handle_cancel_notification(self, msg_id: Any) -> None:
        """$/cancelRequest, except for a request already being cancelled (a
        newer keystroke superseded it): a second cancellation interrupts
        httpcore's close of its stream, so the model server would never see
        the client go and would go on generating."""
        future = self._request_futures.get(msg_id)
        stop = self._after_answer.pop(msg_id, None) if future is None else None
        if stop is not None:
            stop()
            return
        if isinstance(future, asyncio.Task) and future.cancelling():
            self._request_futures.pop(msg_id, None)
            return
        super()._handle_cancel_notification(msg_id)

    def _send_response(self, msg_id: Any, result: Any | None = None,
                       error: ResponseError | None = None) -> None:
        if error is not None and error.code == JsonRpcInternalError.CODE and error.data:
            # pygls attaches the Python traceback (server paths, code lines)
            # to -32603: the log has it (pygls logged it with the exception).
            summary = _first_line(Exception(error.message)) if error.message else "an error"
            error = ResponseError(code=error.code, message=f"Internal error: {summary}. The "
                                  "server log has the details.")
        super()._send_response(msg_id, result, error)

    # -- answers to what pygls would drop -------------------------------------
    def answer_parse_error(self, error: BaseException) -> None:
        """-32700 with id null for a body that could not be parsed."""
        doc = getattr(error, "doc", None)
        if isinstance(doc, str) and doc.startswith(_OVERSIZED):
            size = doc[len(_OVERSIZED):]
            detail = (f"the message body ({size} bytes) is larger than the "
                      f"{MAX_MESSAGE_BYTES}-byte limit and was skipped")
        elif isinstance(error, UnicodeDecodeError):
            detail = f"the message body is not UTF-8 ({_first_line(error)})"
        else:
            detail = f"the message body is not valid JSON ({_first_line(error)})"
        log.warning("Answered an unparsable message with ParseError: %s", detail)
        self._send_error_dict(None, PARSE_ERROR, f"Parse error: {detail}.")

    def _send_error_dict(self, msg_id: Any, code: int, message: str) -> None:
        # A plain dict: pygls' typed ResponseErrorMessage drops `"id": null`
        # when serialised, and JSON-RPC requires it.
        self._send_data({"jsonrpc": JSONRPC_VERSION, "id": msg_id,
                         "error": {"code": code, "message": message}})

    def _invalid_request(self, msg_id: Any, why: str) -> None:
        log.warning("Answered an invalid JSON-RPC message with InvalidRequest: %s", why)
        self._send_error_dict(msg_id, JsonRpcInvalidRequest.CODE, f"Invalid Request: {why}.")

    # -- structuring --------------------------------------------------------------
    def _structure(self, data: Any) -> Any | None:
        """The typed message, or None when it was answered (or dropped) here."""
        if not isinstance(data, dict):
            self._invalid_request(None, f"a message must be a JSON object, not "
                                        f"{_json_type(data)}")
            return None
        method = data.get("method")
        has_id = "id" in data
        msg_id = data.get("id")
        valid_id = isinstance(msg_id, str | int) and not isinstance(msg_id, bool)
        if "method" not in data:  # a response to one of our requests: never answered
            if data.get("jsonrpc") != JSONRPC_VERSION or not valid_id:
                log.warning("Dropped a malformed response: %s", _preview(data))
                return None
            return self._structure_typed(data)
        answer_id = msg_id if valid_id else None
        if data.get("jsonrpc") != JSONRPC_VERSION:
            if has_id:
                self._invalid_request(answer_id, f'"jsonrpc" must be "{JSONRPC_VERSION}"')
            else:
                log.warning("Dropped a notification without jsonrpc 2.0: %s", _preview(data))
            return None
        if not isinstance(method, str):
            if has_id:
                self._invalid_request(answer_id, '"method" must be a string')
            else:
                log.warning("Dropped a notification whose method is not a string")
            return None
        if has_id and not valid_id:
            self._invalid_request(None, f'the "id" of {method} must be a string or an integer')
            return None
        if "result" in data or "error" in data:
            # pygls would take it for a response (and drop it) on "error" alone.
            if has_id:
                self._invalid_request(msg_id, f'{method}: a request carries no "result" or '
                                              '"error"')
            else:
                log.warning("Dropped a notification %s carrying result/error", method)
            return None
        if has_id and self._shutdown:
            # LSP: requests after shutdown error with InvalidRequest (pygls
            # drops them silently, which leaves the client waiting).
            self._invalid_request(msg_id, f"the server is shutting down; {method} not run")
            return None
        if "params" not in data:  # JSON-RPC: params may be omitted
            data = {**data, "params": None}
        if method.startswith(CUSTOM_PREFIX):
            unsafe = _unsafe_integer(data["params"])
            if unsafe is not None:
                detail = (f"{unsafe[0]} = {unsafe[1]} is out of range (integers must be within "
                          f"+-{MAX_SAFE_INTEGER})")
                if has_id:
                    error = JsonRpcInvalidParams(f"Invalid params for {method}: {detail}.")
                    self._send_response(msg_id, None, error.to_response_error())
                    log.warning("Answered %s (id %s) with InvalidParams: %s", method, msg_id,
                                detail)
                else:
                    log.warning("Dropped a notification %s: %s", method, detail)
                return None
        return self._structure_typed(data)

    def _structure_typed(self, data: dict[str, Any]) -> Any | None:
        try:
            return super().structure_message(data)
        except Exception as exc:
            method = data.get("method")
            cause = exc.__cause__ or exc
            detail = _describe(cause)
            if "id" in data and method is not None:
                error = JsonRpcInvalidParams(
                    f"Invalid params for {method}: {detail}. Check the request against the "
                    "LSP specification / docs/protocol.md."
                )
                self._send_response(data["id"], None, error.to_response_error())
                log.warning("Answered %s (id %s) with InvalidParams: %s", method, data["id"],
                            detail)
                return None
            log.warning("Dropped a %s whose params do not parse: %s",
                        f"notification {method}" if method else "response", detail)
            return None


class BoundedReader:
    """stdin for pygls' reader loop, with a cap on what one message may
    make it read at once (see module doc). A body over the cap is read and
    discarded in pieces, so the stream stays in sync, and replaced by a
    marker that answer_parse_error explains."""

    def __init__(self, stream: BinaryIO, *, max_message_bytes: int = MAX_MESSAGE_BYTES,
                 max_header_line_bytes: int = MAX_HEADER_LINE_BYTES) -> None:
        self._stream = stream
        self.max_message_bytes = max_message_bytes
        self.max_header_line_bytes = max_header_line_bytes

    def readline(self) -> bytes:
        return resync_header(self._stream.readline(self.max_header_line_bytes))

    def read(self, size: int = -1) -> bytes:
        if 0 <= size <= self.max_message_bytes:
            return self._stream.read(size)
        remaining = size
        while remaining > 0:
            piece = self._stream.read(min(remaining, 1 << 20))
            if not piece:
                return b""  # the client went away
            remaining -= len(piece)
        return oversized_marker(size)


def resync_header(line: bytes) -> bytes:
    """A header line as pygls should see it. pygls only reads headers with
    readline. Bytes before a Content-Length header are the tail of a message
    sent without (or with a wrong) length: drop them, or the header they are
    glued to is missed, and so on for every message after it (bodies end
    without a newline)."""
    start = line.find(b"Content-Length:")
    if start > 0:
        log.warning("Skipped %d bytes of unframed data before a header", start)
        return line[start:]
    return line


def oversized_marker(size: int) -> bytes:
    """What the reader hands pygls instead of a body over the limit."""
    log.error("A message announced %s bytes, over the %d-byte limit; skipping it",
              size, MAX_MESSAGE_BYTES)
    return f"{_OVERSIZED}{size}".encode()  # fails to parse: answered with -32700


def _unsafe_integer(value: Any, where: str = "params", depth: int = 0
                    ) -> tuple[str, str] | None:
    """The first integer in a params value beyond the safe range, as (path,
    shortened value); None when there is none."""
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) > MAX_SAFE_INTEGER:
            text = str(value)
            return where, text if len(text) <= 30 else f"{text[:12]}...({len(text)} digits)"
        return None
    if depth > 64:
        return None
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        if isinstance(item, int | dict | list):
            path = f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}"
            found = _unsafe_integer(item, path, depth + 1)
            if found is not None:
                return found
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, list):
        return "an array (batches are not part of LSP)"
    if isinstance(value, str):
        return "a string"
    return "a number"


def _preview(data: Any) -> str:
    return json.dumps(data, default=str)[:200]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def _describe(exc: BaseException) -> str:
    """What was wrong, as specific as cattrs lets us: the innermost errors
    ("Position.line should be in range [0:2147483647], but was -1"), with the
    outer "While structuring ..." line for context."""
    first = _first_line(exc)
    leaves = _leaves(exc)
    if leaves and leaves != [exc]:
        inner = "; ".join(dict.fromkeys(_first_line(e) for e in leaves[:3]))
        return f"{first} ({inner})"[:500]
    return first[:500]


def _leaves(exc: BaseException, depth: int = 0) -> list[BaseException]:
    nested = getattr(exc, "exceptions", None)
    if not nested or depth > 20:
        return [exc]
    found: list[BaseException] = []
    for inner in nested:
        found.extend(_leaves(inner, depth + 1))
    return found
