"""stdin read through the event loop (agentls.lsp.wire.stdio): the framing
guarantees of BoundedReader, over a real OS pipe. The real server uses this
reader in every subprocess test (pytest-lsp and the reliability harness
start it with pipes); these cover the edges those cannot reach cheaply."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentls.lsp.wire.stdio import PipeReader, can_read_as_pipe


async def _reader_over(data: bytes, **limits: int) -> PipeReader:
    read_fd, write_fd = os.pipe()
    reader = await PipeReader.open(os.fdopen(read_fd, "rb", buffering=0))
    for key, value in limits.items():
        setattr(reader, key, value)
    loop = asyncio.get_running_loop()

    def feed() -> None:  # a thread: the pipe buffer (64 KiB) may fill before the reader drains it
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(data)

    loop.run_in_executor(None, feed)
    return reader


def _frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


async def test_reads_framed_messages_and_ends_at_eof() -> None:
    reader = await _reader_over(_frame(b'{"a": 1}') + _frame(b'{"b": 2}'))
    assert await reader.readline() == b"Content-Length: 8\r\n"
    assert await reader.readline() == b"\r\n"
    assert await reader.readexactly(8) == b'{"a": 1}'
    assert await reader.readline() == b"Content-Length: 8\r\n"
    assert await reader.readline() == b"\r\n"
    assert await reader.readexactly(8) == b'{"b": 2}'
    assert await reader.readline() == b""  # end of input ends pygls' loop


async def test_unframed_bytes_before_a_header_are_dropped() -> None:
    reader = await _reader_over(b'tail of a bad message}' + _frame(b"{}"))
    assert await reader.readline() == b"Content-Length: 2\r\n"


async def test_a_long_line_is_read_whole_or_in_pieces_never_lost() -> None:
    reader = await _reader_over(b"x" * 300 + b"\r\n", max_header_line_bytes=128)
    pieces = []
    while (line := await reader.readline()):
        pieces.append(line)
    assert b"".join(pieces) == b"x" * 300 + b"\r\n"


async def test_a_body_over_the_limit_is_skipped_and_the_stream_stays_in_step() -> None:
    big = b"y" * 5000
    reader = await _reader_over(_frame(big) + _frame(b'{"ok": true}'), max_message_bytes=1000)
    await reader.readline()
    await reader.readline()
    marker = await reader.readexactly(len(big))
    assert marker.startswith(b"agentls-oversized:5000")  # answered with -32700 by the protocol
    assert await reader.readline() == b"Content-Length: 12\r\n"
    await reader.readline()
    assert await reader.readexactly(12) == b'{"ok": true}'


async def test_the_client_going_away_mid_body_returns_what_came() -> None:
    reader = await _reader_over(b"Content-Length: 50\r\n\r\n{\"cut")
    await reader.readline()
    await reader.readline()
    assert await reader.readexactly(50) == b'{"cut'


def test_only_pipes_and_sockets_not_shared_with_stdout_are_read_by_the_loop(
        tmp_path: Path) -> None:
    read_fd, write_fd = os.pipe()
    other_read, other_write = os.pipe()
    regular = tmp_path / "input.bin"
    regular.write_bytes(b"")
    with os.fdopen(read_fd, "rb") as pipe_in, os.fdopen(write_fd, "wb") as pipe_out, \
            os.fdopen(other_read, "rb"), os.fdopen(other_write, "wb") as stdout, \
            regular.open("rb") as file_in:
        assert can_read_as_pipe(pipe_in, stdout)
        # The same pipe as stdin and stdout: O_NONBLOCK would reach stdout.
        assert not can_read_as_pipe(pipe_in, pipe_out)
        # A regular file cannot be watched by epoll: pygls' threaded reader.
        assert not can_read_as_pipe(file_in, stdout)
        assert not can_read_as_pipe(object(), stdout)


# --------------------------------------------------------------------------- sockets
# agentls.lsp.wire.transport's StrictFrameReader: the socket transports hand pygls
# only well-formed frames (the behaviour through the real server is in
# tests/reliability/test_transport.py; these pin the edges).


def _socket_reader(data: bytes, token: str | None = None) -> Any:
    from agentls.lsp.wire.transport import MAX_HEADER_LINE_BYTES, StrictFrameReader, handshake_check

    stream = asyncio.StreamReader(limit=MAX_HEADER_LINE_BYTES)
    stream.feed_data(data)
    stream.feed_eof()
    return StrictFrameReader(stream, check_first=handshake_check(token))


def _initialize(**options: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"capabilities": {}, "initializationOptions": options}}).encode()


async def test_socket_frames_pass_with_content_type_and_the_token_is_taken_out() -> None:
    first = _initialize(agentlsToken="s3cret-token-value", agentls={"model": "m"})
    second = b'{"jsonrpc": "2.0", "method": "initialized", "params": {}}'
    reader = _socket_reader(
        b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n"
        % len(first) + first + _frame(second), token="s3cret-token-value")
    await reader.first_frame()
    header = await reader.readline()
    assert await reader.readline() == b"\r\n"
    body = await reader.readexactly(int(header.split(b":")[1]))
    assert json.loads(body)["params"]["initializationOptions"] == {"agentls": {"model": "m"}}
    assert b"s3cret" not in header + body
    assert await reader.readline() == b"Content-Length: %d\r\n" % len(second)
    assert await reader.readline() == b"\r\n"
    assert await reader.readexactly(len(second)) == second
    assert await reader.readline() == b""  # end of stream
    assert reader.error is None


@pytest.mark.parametrize("data", [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"Content-Length: 5\r\nX-Other: 1\r\n\r\n{...}",
    b"Content-Length: 5\n\n{...}",
    b"Content-Length: -5\r\n\r\n",
    b"Content-Length: 5\r\nContent-Length: 5\r\n\r\n{...}",
    b"Content-Length: 99999999999\r\n\r\n",
    b"Content-Type: application/vscode-jsonrpc\r\n\r\n{}",
    b"content-length : 5\r\n\r\n{...}",
    b"Content-Length: 5\r\n" * 9 + b"\r\n",
    b"Content-Length: " + b"1" * 2000 + b"\r\n\r\n",
], ids=["http", "unknown-header", "bare-lf", "negative", "twice", "too-big", "no-length",
        "spaced-name", "too-many-lines", "long-line"])
async def test_what_is_not_an_lsp_frame_ends_the_socket_stream(data: bytes) -> None:
    from agentls.lsp.wire.transport import FrameError

    reader = _socket_reader(data)
    with pytest.raises(FrameError):
        await reader.first_frame()


@pytest.mark.parametrize("options", [{}, {"agentlsToken": "wrong-token-value"},
                                     {"agentlsToken": 12345}])
async def test_the_first_frame_needs_the_token(options: dict[str, Any]) -> None:
    from agentls.lsp.wire.transport import FrameError

    body = _initialize(**options)
    with pytest.raises(FrameError):
        await _socket_reader(_frame(body), token="the-right-token-123").first_frame()


async def test_the_first_frame_must_be_initialize() -> None:
    from agentls.lsp.wire.transport import FrameError

    body = b'{"jsonrpc": "2.0", "id": 1, "method": "agentls/status", "params": {}}'
    with pytest.raises(FrameError):
        await _socket_reader(_frame(body)).first_frame()
