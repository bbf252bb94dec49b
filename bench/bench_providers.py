"""Per-chunk overhead of the HTTP providers' `stream()` (a benchmark, not a test).

For each HTTP provider (openai, ollama, and anthropic when
providers/anthropic/provider.py is importable) a loopback server, in its own
process, answers with one long scripted stream of N text chunks in the
provider's real wire format (SSE or NDJSON, each chunk its own HTTP/1.1
chunked-encoding frame). The whole response is rendered up front and
written with one sendall, so the server is never the bottleneck.

Each stream is read three ways, in the same run, against the same server:

  raw bytes   a bare httpx.AsyncClient stream, `aiter_bytes()` only: the
              transport floor (TCP + h11 de-chunking), no parsing at all;
  raw parse   bare httpx, `aiter_lines()` + json.loads per chunk: what a
              minimal hand-written client pays to decode the format;
  stream()    the provider: shared HttpClient (size caps, strict UTF-8),
              format decoding, StreamChunk models, ChunkStream, cancellation
              bookkeeping.

Reported: chunks per second, microseconds per chunk, the ratio of the
provider's time to the raw-bytes time, and the overhead per chunk
(provider minus raw bytes). The ratio, not the absolute time, is the
figure: it holds across machines far better than the microseconds do.

    /work/venv/bin/python bench/bench_providers.py [--chunks 5000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import multiprocessing
import os
import platform
import socket
import socketserver
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import httpx

from agentls.core.provider.contract import BaseProvider, ProviderConfig
from agentls.core.types.conversation import Message
from agentls.core.types.messages import StreamChunk

PROMPT = [Message(role="user", content="Write a long story.")]
WORDS = ["The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", "."]


# --------------------------------------------------------------------------- wire formats


def _compact(payload: Any) -> str:
    return json.dumps(payload, separators=(",", ":"))


def openai_stream(n: int) -> tuple[str, list[bytes]]:
    """OpenAI chat.completion.chunk events as api.openai.com sends them."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        payload = {
            "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
            "object": "chat.completion.chunk",
            "created": 1741570283,
            "model": "gpt-4o-2024-08-06",
            "service_tier": "default",
            "system_fingerprint": "fp_eb9dce56a8",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            "usage": None,
        }
        return f"data: {_compact(payload)}\n\n".encode()

    frames = [chunk({"role": "assistant", "content": "", "refusal": None})]
    frames += [chunk({"content": WORDS[i % len(WORDS)]}) for i in range(n)]
    frames.append(chunk({}, "stop"))
    usage = {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion.chunk",
        "created": 1741570283,
        "model": "gpt-4o-2024-08-06",
        "choices": [],
        "usage": {"prompt_tokens": 12, "completion_tokens": n, "total_tokens": 12 + n},
    }
    frames += [f"data: {_compact(usage)}\n\n".encode(), b"data: [DONE]\n\n"]
    return "text/event-stream", frames


def ollama_stream(n: int) -> tuple[str, list[bytes]]:
    """Ollama /api/chat NDJSON lines (Go's compact json.Marshal)."""

    def line(payload: dict[str, Any]) -> bytes:
        return _compact(payload).encode() + b"\n"

    created = "2025-05-27T22:54:57.641643Z"
    frames = [
        line(
            {
                "model": "llama3.2",
                "created_at": created,
                "message": {"role": "assistant", "content": WORDS[i % len(WORDS)]},
                "done": False,
            }
        )
        for i in range(n)
    ]
    frames.append(
        line(
            {
                "model": "llama3.2",
                "created_at": created,
                "message": {"role": "assistant", "content": ""},
                "done_reason": "stop",
                "done": True,
                "total_duration": 4883583458,
                "load_duration": 1334875,
                "prompt_eval_count": 12,
                "prompt_eval_duration": 342546000,
                "eval_count": n,
                "eval_duration": 4535599000,
            }
        )
    )
    return "application/x-ndjson", frames


def anthropic_stream(n: int) -> tuple[str, list[bytes]]:
    """Messages API events as api.anthropic.com sends them."""

    def event(name: str, payload: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {_compact(payload)}\n\n".encode()

    message: dict[str, Any] = {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "claude-sonnet-4-5",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 1},
    }
    frames = [
        event("message_start", {"type": "message_start", "message": message}),
        event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        event("ping", {"type": "ping"}),
    ]
    frames += [
        event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": WORDS[i % len(WORDS)]},
            },
        )
        for i in range(n)
    ]
    frames += [
        event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": n},
            },
        ),
        event("message_stop", {"type": "message_stop"}),
    ]
    return "text/event-stream", frames


@dataclass(frozen=True)
class Target:
    name: str
    module: str  # agentls.providers.<module>
    cls: str
    path: str  # the route the provider posts to
    base_suffix: str  # appended to the server URL to make baseUrl
    render: Callable[[int], tuple[str, list[bytes]]]


TARGETS = [
    Target("openai", "openai", "OpenAIProvider", "/v1/chat/completions", "/v1", openai_stream),
    Target("ollama", "ollama", "OllamaProvider", "/api/chat", "", ollama_stream),
    Target("anthropic", "anthropic", "AnthropicProvider", "/v1/messages", "", anthropic_stream),
]


# --------------------------------------------------------------------------- server


def _response(content_type: str, frames: list[bytes]) -> bytes:
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    body = b"".join(b"%x\r\n%s\r\n" % (len(frame), frame) for frame in frames)
    return head + body + b"0\r\n\r\n"


def _serve(chunks: int, ready: Any) -> None:
    """The loopback server process: pre-rendered responses, keep-alive."""
    responses = {t.path: _response(*t.render(chunks)) for t in TARGETS}
    missing = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while True:
                request_line = self.rfile.readline()
                if not request_line:
                    return
                length = 0
                while (header := self.rfile.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = header.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                if length:
                    self.rfile.read(length)
                path = request_line.split()[1].decode().split("?")[0]
                try:
                    self.connection.sendall(responses.get(path, missing))
                except OSError:
                    return

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    with Server(("127.0.0.1", 0), Handler) as server:
        ready.send(server.server_address[1])
        server.serve_forever()


# --------------------------------------------------------------------------- readers


async def read_raw_bytes(client: httpx.AsyncClient, url: str, body: Any) -> int:
    total = 0
    async with client.stream("POST", url, json=body) as response:
        async for data in response.aiter_bytes():
            total += len(data)
    return total


async def read_raw_parse(client: httpx.AsyncClient, url: str, body: Any) -> int:
    """Lines + json.loads per chunk: the least any client does to decode."""
    count = 0
    async with client.stream("POST", url, json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                line = line[6:]
                if line == "[DONE]":
                    continue
            elif not line.startswith("{"):
                continue  # blank lines and `event:` lines
            json.loads(line)
            count += 1
    return count


async def read_provider(provider: BaseProvider) -> int:
    count = 0
    stream: AsyncIterator[StreamChunk] = provider.stream(PROMPT)
    async for chunk in stream:
        if chunk.delta:
            count += 1
    return count


async def timed(readers: dict[str, Callable[[], Awaitable[int]]], repeat: int) -> dict[str, float]:
    """Median and best seconds per reader (keys `name` and `name_best`).
    Rounds interleave the readers, so drift in machine load hits them all
    alike."""
    for read in readers.values():
        await read()  # warm-up: connection, imports, caches
    times: dict[str, list[float]] = {name: [] for name in readers}
    for _ in range(repeat):
        for name, read in readers.items():
            started = time.perf_counter()
            await read()
            times[name].append(time.perf_counter() - started)
    result = {name: statistics.median(values) for name, values in times.items()}
    result.update({f"{name}_best": min(values) for name, values in times.items()})
    return result


# --------------------------------------------------------------------------- main


def _load(target: Target) -> type[BaseProvider] | str:
    try:
        module = importlib.import_module(f"agentls.providers.{target.module}")
    except ModuleNotFoundError as exc:
        if exc.name == f"agentls.providers.{target.module}":
            return f"providers/{target.module}.py does not exist (yet)"
        return f"cannot import agentls.providers.{target.module}: {exc}"
    except Exception as exc:
        return f"cannot import agentls.providers.{target.module}: {exc!r}"
    cls = getattr(module, target.cls, None)
    if not isinstance(cls, type) or not issubclass(cls, BaseProvider):
        return f"agentls.providers.{target.module} has no {target.cls}"
    return cls


async def run(url: str, chunks: int, repeat: int) -> list[dict[str, Any]]:
    rows = []
    timeout = httpx.Timeout(30.0)
    async with httpx.AsyncClient(timeout=timeout) as raw_client:
        for target in TARGETS:
            loaded = _load(target)
            if isinstance(loaded, str):
                print(f"note: {target.name} skipped: {loaded}", flush=True)
                continue
            config = ProviderConfig(
                name=target.name,
                model="bench-model",
                base_url=url + target.base_suffix,
                request_timeout=30.0,
            )
            provider = loaded(config)
            body = {"model": "bench-model", "stream": True, "messages": []}
            endpoint = url + target.path
            try:
                got = await read_provider(provider)
                if got != chunks:
                    print(f"note: {target.name} yielded {got} text chunks, expected {chunks}")
                medians = await timed(
                    {
                        "raw": partial(read_raw_bytes, raw_client, endpoint, body),
                        "parse": partial(read_raw_parse, raw_client, endpoint, body),
                        "stream": partial(read_provider, provider),
                    },
                    repeat,
                )
            finally:
                await provider.aclose()
            rows.append({"provider": target.name, **medians})
    return rows


def report(rows: list[dict[str, Any]], chunks: int, repeat: int) -> None:
    print()
    print(
        f"{chunks} chunks per stream, median of {repeat} runs; Python "
        f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPU(s), "
        f"httpx {httpx.__version__}"
    )
    header = (
        f"{'provider':<10} {'raw bytes/s':>12} {'raw parse/s':>12} {'stream()/s':>11} "
        f"{'us/chunk':>9} {'ratio':>6} {'overhead us':>12} {'ratio best':>11}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        per_chunk = row["stream"] / chunks * 1e6
        overhead = (row["stream"] - row["raw"]) / chunks * 1e6
        print(
            f"{row['provider']:<10} {chunks / row['raw']:>12,.0f} {chunks / row['parse']:>12,.0f} "
            f"{chunks / row['stream']:>11,.0f} {per_chunk:>9.1f} "
            f"{row['stream'] / row['raw']:>5.2f}x {overhead:>12.1f} "
            f"{row['stream_best'] / row['raw_best']:>10.2f}x"
        )
    print()
    print(
        "raw bytes: bare httpx aiter_bytes (transport floor); raw parse: bare httpx "
        "aiter_lines + json.loads; stream(): chunks/s through the provider; us/chunk: "
        "stream() time per chunk; ratio: stream() time / raw bytes time (medians); "
        "overhead: (stream() - raw bytes) per chunk; ratio best: the same ratio from "
        "each reader's fastest run (less sensitive to a busy machine)."
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=5000, help="text chunks per stream")
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per reader")
    args = parser.parse_args()

    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    server = context.Process(target=_serve, args=(args.chunks, send), daemon=True)
    server.start()
    try:
        if not receive.poll(30):
            print("the benchmark server did not start", file=sys.stderr)
            return 1
        port = receive.recv()
        rows = asyncio.run(run(f"http://127.0.0.1:{port}", args.chunks, args.repeat))
    finally:
        server.terminate()
        server.join(5)
    report(rows, args.chunks, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
