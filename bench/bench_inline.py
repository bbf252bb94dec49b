"""Benchmark the inline completion hot path of a real agentls server.

A warm `agentls` server runs as a subprocess on stdio (provider `openai`;
the backend accepts `suffix`, so after the first request's probe the
requests go to /v1/completions); an instant loopback
backend runs in its own process and answers every completion with a canned
SSE stream. The benchmark speaks raw JSON-RPC over the pipes (no pygls in
the client) and reports:

- round trip of N sequential inline completion requests (triggerKind
  Invoked, so no debounce; every request at a new line, so no cache hits)
  as p50/p95/p99, and the same minus the backend's own time per call
  (measured inside the backend) = the server's overhead;
- round trip of N type-ahead requests answered from the cache (no backend
  call);
- server CPU ms per request: utime+stime of the server from /proc/<pid>/stat
  over each phase, divided by its requests;
- backend calls per typing burst: 40 keystrokes at 30 ms per key, each a
  didChange plus an automatic inlineCompletion, with the default debounce;
- RSS (VmRSS, VmHWM) of the server after the run; spawn -> initialize time.

Usage: python bench/bench_inline.py [--requests 500] [--bursts 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

KEYS_PER_BURST = 40
KEY_INTERVAL = 0.030
COMPLETION = "compute(value)"
DOC_LINES = 1200

# --------------------------------------------------------------------------- backend


def _sse_body(text: str) -> bytes:
    chunks = [
        {"id": "c", "object": "text_completion", "model": "m",
         "choices": [{"index": 0, "text": text, "finish_reason": None}]},
        {"id": "c", "object": "text_completion", "model": "m",
         "choices": [{"index": 0, "text": "", "finish_reason": "stop"}]},
    ]
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + (
        b"data: [DONE]\n\n"
    )


async def serve_backend(body: bytes) -> None:
    """An HTTP/1.1 keep-alive server that answers every POST at once with
    `body` (an SSE stream); GET /stats returns {calls, durations_us}. Prints
    its port. bench_next_edit.py serves its chat answer with it too."""
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    )
    calls = 0
    durations: list[float] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal calls
        try:
            while True:
                request_head = await reader.readuntil(b"\r\n\r\n")
                started = time.perf_counter()
                length = 0
                for line in request_head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                if length:
                    await reader.readexactly(length)
                if request_head.startswith(b"GET /stats"):
                    stats = json.dumps({"calls": calls, "durations_us": durations}).encode()
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: %d\r\n\r\n" % len(stats) + stats)
                elif request_head.startswith(b"GET "):
                    # e.g. the provider's one-off GET /props (FIM hint): not a model call
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                else:
                    calls += 1
                    writer.write(head + body)
                    durations.append((time.perf_counter() - started) * 1e6)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


async def backend_stats(port: int) -> dict[str, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /stats HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    data: dict[str, Any] = json.loads(await reader.readexactly(length))
    writer.close()
    return data


# --------------------------------------------------------------------------- client


class Client:
    """Raw JSON-RPC over the server's stdio (or a socket); answers
    server->client requests."""

    def __init__(self, reader: asyncio.StreamReader, writer: Any) -> None:
        self.input, self.output = reader, writer
        self.next_id = 0
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.notifications: list[dict[str, Any]] = []
        self.reader = asyncio.ensure_future(self._read_loop())

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        self.output.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def request(self, method: str, params: Any) -> asyncio.Future[dict[str, Any]]:
        self.next_id += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = future
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return future

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def _read_loop(self) -> None:
        stdout = self.input
        while True:
            length = 0
            while True:
                line = await stdout.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    break
                name, _, value = line.partition(b":")
                if name.lower() == b"content-length":
                    length = int(value)
            message = json.loads(await stdout.readexactly(length))
            if "method" in message and "id" in message:
                self._send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            elif "method" in message:
                self.notifications.append(message)
            else:
                future = self.pending.pop(message["id"], None)
                if future is not None and not future.done():
                    future.set_result(message)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def _connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    for _ in range(500):
        try:
            return await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.01)
    raise RuntimeError(f"the server did not listen on port {port}")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def memory_mib(pid: int) -> dict[str, float]:
    values = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
    return values


def percentiles(samples: list[float]) -> tuple[float, float, float]:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return statistics.median(ordered), pick(0.95), pick(0.99)


def document() -> str:
    lines = ["import math", ""]
    for index in range(DOC_LINES // 4):
        lines += [f"def helper_{index}(value):", f"    scaled = value * {index}",
                  "    return scaled", ""]
    return "\n".join(lines) + "\n"


def inline_params(uri: str, line: int, character: int, *, invoked: bool) -> dict[str, Any]:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character},
            "context": {"triggerKind": 1 if invoked else 2}}


# --------------------------------------------------------------------------- phases


async def main(requests: int, bursts: int, profile: str | None = None, tcp: bool = False
               ) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="agentls-bench-"))
    backend = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--backend", stdout=asyncio.subprocess.PIPE)
    assert backend.stdout is not None
    port = int(await asyncio.wait_for(backend.stdout.readline(), 30))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTLS_", "OPENAI_"))}
    env.update(AGENTLS_CONFIG_FILE="/nonexistent/agentls.toml",
               AGENTLS_STATE_DIR=str(workdir / "state"))
    # --tcp takes a per-start token, presented in initialize (docs/security.md).
    token = secrets.token_hex(16)
    if tcp:
        env["AGENTLS_TOKEN"] = token
    started = time.perf_counter()
    profiler = ["-m", "cProfile", "-o", profile] if profile else []
    transport = ["--tcp", "--port", str(_free_port())] if tcp else []
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *profiler, "-m", "agentls", *transport, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env)
    if tcp:
        reader, writer = await _connect(int(transport[-1]))
        client = Client(reader, writer)
    else:
        assert proc.stdout is not None
        client = Client(proc.stdout, proc.stdin)
    try:
        settings = {"provider": "openai", "baseUrl": f"http://127.0.0.1:{port}/v1",
                    "model": "qwen2.5-coder-1.5b",
                    # The backend answers every completion with the same text, so a
                    # known-answer FIM probe cannot pass: say the engine does FIM.
                    "providerOptions": {"fim": True}}
        init_options: dict[str, Any] = {"agentls": settings}
        if tcp:
            init_options["agentlsToken"] = token
        await client.request("initialize", {"processId": None, "rootUri": None,
                                            "capabilities": {},
                                            "initializationOptions": init_options})
        spawn_to_initialize = time.perf_counter() - started
        client.notify("initialized", {})
        text = document()
        uri = (workdir / "bench.py").as_uri()
        client.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}})
        lines = text.split("\n")
        targets = [i for i, line in enumerate(lines) if line.startswith("    return")]

        async def ask(line: int, character: int, invoked: bool = True) -> tuple[float, Any]:
            t0 = time.perf_counter()
            answer = await client.request("textDocument/inlineCompletion",
                                          inline_params(uri, line, character, invoked=invoked))
            return time.perf_counter() - t0, answer

        # Warm up: imports, provider, HTTP connection, caches.
        for line in targets[-50:]:
            await ask(line, len(lines[line]))

        # 0. the floor: a document that is not open is answered at once
        # (JSON-RPC framing, pygls dispatch, the handler's first lines).
        unopened = (workdir / "unopened.py").as_uri()
        floor_rtt = []
        cpu0 = cpu_seconds(proc.pid)
        for _ in range(requests):
            t0 = time.perf_counter()
            await client.request("textDocument/inlineCompletion",
                                 inline_params(unopened, 0, 0, invoked=True))
            floor_rtt.append((time.perf_counter() - t0) * 1e3)
        cpu_floor = (cpu_seconds(proc.pid) - cpu0) / requests * 1e3

        # 1. model path: a new position each time (no cache hits)
        calls_before = (await backend_stats(port))["calls"]
        cpu0 = cpu_seconds(proc.pid)
        model_rtt = []
        empty = 0
        for index in range(requests):
            line = targets[index % (len(targets) - 50)]
            seconds, answer = await ask(line, len(lines[line]))
            model_rtt.append(seconds * 1e3)
            empty += not answer.get("result", {}).get("items")
        cpu_model = (cpu_seconds(proc.pid) - cpu0) / requests * 1e3
        stats = await backend_stats(port)
        backend_calls = stats["calls"] - calls_before
        backend_ms = [d / 1e3 for d in stats["durations_us"][-backend_calls:]]
        overhead = [rtt - b for rtt, b in zip(model_rtt, backend_ms, strict=False)]

        # 2. type-ahead into the suggestion: answered from the cache
        version = 2
        line = targets[0]
        col = len(lines[line])
        cache_rtt = []
        cpu0 = cpu_seconds(proc.pid)
        calls_before = (await backend_stats(port))["calls"]
        cache_requests = 0
        while cache_requests < requests:
            seconds, answer = await ask(line, col)  # fresh suggestion (model call)
            typed = ""
            for char in COMPLETION[:-1]:
                client.notify("textDocument/didChange", {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [{"range": {"start": {"line": line, "character": col},
                                                  "end": {"line": line, "character": col}},
                                        "text": char}]})
                version += 1
                col += 1
                typed += char
                seconds, answer = await ask(line, col, invoked=False)
                items = answer["result"]["items"]
                assert items and items[0]["insertText"] == COMPLETION[len(typed):], answer
                cache_rtt.append(seconds * 1e3)
                cache_requests += 1
            # back to a clean line for the next round
            client.notify("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"range": {"start": {"line": line, "character": 0},
                                              "end": {"line": line + 1, "character": 0}},
                                    "text": "    return scaled  # round\n"}]})
            version += 1
            line = targets[(targets.index(line) + 1) % len(targets)]
            col = len(lines[line])
        cache_calls = (await backend_stats(port))["calls"] - calls_before
        cache_rounds = cache_calls  # one model call per round starts each round
        cpu_cache = (cpu_seconds(proc.pid) - cpu0) / cache_requests * 1e3

        # didChange alone (pygls applies each incremental change to its copy)
        line = targets[200]
        col = len(lines[line])
        changes = requests
        cpu0 = cpu_seconds(proc.pid)
        for _ in range(changes):
            client.notify("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"range": {"start": {"line": line, "character": col},
                                              "end": {"line": line, "character": col}},
                                    "text": "x"}]})
            version += 1
            col += 1
        await client.request("textDocument/inlineCompletion",
                             inline_params(unopened, 0, 0, invoked=True))  # a barrier
        cpu_change = (cpu_seconds(proc.pid) - cpu0) / changes * 1e3

        # 3. typing bursts: 40 keys at 30 ms/key, automatic triggers, default debounce
        burst_calls = []
        burst_cpu = []
        for burst in range(bursts):
            line = targets[100 + burst]
            col = len(lines[line])
            calls_before = (await backend_stats(port))["calls"]
            cpu0 = cpu_seconds(proc.pid)
            pending = []
            for key in range(KEYS_PER_BURST):
                char = "xyz_"[key % 4]
                client.notify("textDocument/didChange", {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [{"range": {"start": {"line": line, "character": col},
                                                  "end": {"line": line, "character": col}},
                                        "text": char}]})
                version += 1
                col += 1
                pending.append(client.request(
                    "textDocument/inlineCompletion",
                    inline_params(uri, line, col, invoked=False)))
                await asyncio.sleep(KEY_INTERVAL)
            await asyncio.gather(*pending)
            burst_cpu.append((cpu_seconds(proc.pid) - cpu0) * 1e3)
            burst_calls.append((await backend_stats(port))["calls"] - calls_before)

        memory = memory_mib(proc.pid)
        status = await client.request("agentls/status", {})
        counters = status["result"]["completions"]
    finally:
        try:
            await asyncio.wait_for(client.request("shutdown", None), 5)
            client.notify("exit", None)
            await asyncio.wait_for(proc.wait(), 5)
        except Exception:
            proc.kill()
        backend.kill()
        await backend.wait()
        shutil.rmtree(workdir, ignore_errors=True)

    m50, m95, m99 = percentiles(model_rtt)
    o50, o95, o99 = percentiles(overhead)
    c50, c95, c99 = percentiles(cache_rtt)
    print(f"agentls inline completion bench; Python {platform.python_version()}, "
          f"{platform.machine()}, {os.cpu_count()} CPU(s), load {os.getloadavg()[0]:.2f}")
    print(f"spawn -> initialize answered: {spawn_to_initialize * 1e3:.0f} ms")
    f50, f95, f99 = percentiles(floor_rtt)
    print(f"transport: {'tcp' if tcp else 'stdio'}")
    print(f"floor, {requests} requests for a document that is not open:")
    print(f"  round trip      p50 {f50:.2f} ms  p95 {f95:.2f} ms  p99 {f99:.2f} ms")
    print(f"  server CPU      {cpu_floor:.2f} ms/request")
    print(f"model path, {requests} sequential requests (Invoked, instant backend):")
    print(f"  round trip      p50 {m50:.2f} ms  p95 {m95:.2f} ms  p99 {m99:.2f} ms")
    print(f"  minus backend   p50 {o50:.2f} ms  p95 {o95:.2f} ms  p99 {o99:.2f} ms"
          f"  (backend p50 {statistics.median(backend_ms) * 1e3:.0f} us)")
    print(f"  server CPU      {cpu_model:.2f} ms/request; backend calls {backend_calls}; "
          f"empty answers {empty}")
    print(f"cache path, {cache_requests} type-ahead requests ({cache_rounds} rounds, "
          f"{cache_calls} backend calls = one per round, none per keystroke):")
    print(f"  round trip      p50 {c50:.2f} ms  p95 {c95:.2f} ms  p99 {c99:.2f} ms")
    print(f"  server CPU      {cpu_cache:.2f} ms/request (incl. the didChange per key)")
    print(f"didChange alone ({len(text) // 1000} KB document): server CPU "
          f"{cpu_change:.2f} ms per change")
    print(f"typing bursts, {KEYS_PER_BURST} keys at {KEY_INTERVAL * 1e3:.0f} ms/key, "
          f"debounce 50 ms: backend calls per burst {burst_calls} "
          f"(max {max(burst_calls)}); server CPU per burst "
          f"{statistics.median(burst_cpu):.0f} ms")
    print(f"server memory: VmRSS {memory['VmRSS']:.1f} MiB, VmHWM {memory['VmHWM']:.1f} MiB")
    print(f"counters: {counters}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--profile", metavar="FILE",
                        help="run the server under cProfile and write its stats to FILE")
    parser.add_argument("--tcp", action="store_true",
                        help="talk to the server over TCP instead of stdio")
    parser.add_argument("--backend", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.backend:
        asyncio.run(serve_backend(_sse_body(COMPLETION)))
    else:
        asyncio.run(main(args.requests, args.bursts, args.profile, args.tcp))
