"""Load drivers shared by tests/reliability/test_load.py (bounded, in CI)
and bench/bench_load.py (full size, figures for docs/reliability.md).

- `AgentBackend`: a loopback OpenAI-compatible server that answers from the
  request itself, so concurrent agent turns get deterministic, per-session
  replies: a conversation whose last message is the user's gets some
  streamed text and a `list_files` tool call; one whose last message is a
  tool result gets "Done: <that turn's prompt>". FIM requests
  (/v1/completions) are answered at once with a canned completion.
- `concurrent_turns`: N sessions, one agentls/chat each, all at once;
  checks every session is whole and only its own.
- `typing_storm`: keystrokes into an open document, each a didChange and an
  inline completion request, waited for one by one; typing into the shown
  suggestion (type-ahead cache hits) and starting new lines (model calls);
  records latency and samples the server's RSS.
"""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.reliability.harness import LspProcess, rss_kib

__all__ = [
    "COMPLETION",
    "AgentBackend",
    "StormStats",
    "TurnStats",
    "concurrent_turns",
    "cpu_seconds",
    "percentiles",
    "typing_storm",
]

COMPLETION = "compute(value)"


# --------------------------------------------------------------------------- backend


def _sse(payload: Any) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return _sse({"id": "c", "object": "chat.completion.chunk", "model": "m",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Without this, Nagle + delayed ACK stall each small write ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # /stats: the call counters (for bench_load.py)
        body = json.dumps(self.server.backend.calls).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        backend = self.server.backend
        if self.path.endswith("/completions") and "chat" not in self.path:
            backend.count("fim")
            text = {"id": "c", "object": "text_completion", "model": "m",
                    "choices": [{"index": 0, "text": COMPLETION, "finish_reason": None}]}
            end = {"id": "c", "object": "text_completion", "model": "m",
                   "choices": [{"index": 0, "text": "", "finish_reason": "stop"}]}
            self._send([_sse(text) + _sse(end) + b"data: [DONE]\n\n"], delay=0)
            return
        backend.count("chat")
        self._send(backend.reply(body.get("messages") or []), delay=backend.chunk_delay)

    def _send(self, frames: list[bytes], delay: float) -> None:
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")
        try:
            if not delay:  # all at once, one write
                body = b"".join(b"%x\r\n%s\r\n" % (len(f), f) for f in frames)
                self.wfile.write(head + body + b"0\r\n\r\n")
                self.wfile.flush()
                return
            self.wfile.write(head)
            for index, frame in enumerate(frames):
                if index:
                    time.sleep(delay)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    backend: AgentBackend


@dataclass
class AgentBackend:
    chunk_delay: float = 0.01  # between streamed chunks of a chat reply
    calls: dict[str, int] = field(default_factory=lambda: {"chat": 0, "fim": 0})

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.backend = self

    def __enter__(self) -> AgentBackend:
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def count(self, kind: str) -> None:
        with self._lock:
            self.calls[kind] += 1

    def reply(self, messages: list[dict[str, Any]]) -> list[bytes]:
        prompt = next((m.get("content") for m in reversed(messages)
                       if m.get("role") == "user"), "")
        prompt = prompt if isinstance(prompt, str) else json.dumps(prompt)
        last = messages[-1].get("role") if messages else "user"
        usage = _sse({"id": "c", "object": "chat.completion.chunk", "choices": [],
                      "usage": {"prompt_tokens": 50, "completion_tokens": 5,
                                "total_tokens": 55}})
        if last == "tool":
            return [_chunk({"content": "Done: "}), _chunk({"content": prompt}),
                    _chunk({}, "stop"), usage, b"data: [DONE]\n\n"]
        call_id = f"call_{abs(hash(prompt)) % 10**8}"
        call = {"index": 0, "id": call_id, "type": "function",
                "function": {"name": "list_files", "arguments": "{}"}}
        return [_chunk({"content": "Looking "}), _chunk({"content": "around."}),
                _chunk({"tool_calls": [call]}), _chunk({}, "tool_calls"), usage,
                b"data: [DONE]\n\n"]


# --------------------------------------------------------------------------- measures


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    if not ordered:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"p50": statistics.median(ordered), "p95": pick(0.95), "p99": pick(0.99),
            "max": ordered[-1]}


def cpu_seconds(pid: int) -> float:
    import os

    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- agent turns


@dataclass
class TurnStats:
    turns: int
    seconds: float  # wall time for all of them
    latencies: list[float]  # per turn, seconds
    session_ids: list[str]


def concurrent_turns(lsp: LspProcess, count: int, label: str,
                     session_ids: list[str] | None = None, timeout: float = 120) -> TurnStats:
    """`count` agent turns at once (in `session_ids`, or new sessions), each
    checked for an intact, non-interleaved session."""
    started = time.monotonic()
    futures = []
    prompts = []
    for index in range(count):
        prompt = f"{label} task {index}: list the files"
        params: dict[str, Any] = {"prompt": prompt}
        if session_ids:
            params["sessionId"] = session_ids[index]
        prompts.append(prompt)
        futures.append((time.monotonic(), lsp.request_async("agentls/chat", params)))
    latencies, results = [], []
    for sent, future in futures:
        response = lsp.wait(future, timeout, "a concurrent agent turn")
        latencies.append(time.monotonic() - sent)
        results.append(response)
    seconds = time.monotonic() - started
    ids = []
    for prompt, response in zip(prompts, results, strict=True):
        assert "result" in response, response
        result = response["result"]
        assert result["status"] == "completed", result
        roles = [m["role"] for m in result["messages"]]
        assert roles == ["user", "assistant", "tool", "assistant"], roles
        user, call, tool, final = result["messages"]
        assert user["content"] == prompt
        assert final["content"] == f"Done: {prompt}"  # its own prompt, nobody else's
        call_id = call["metadata"]["tool_calls"][0]["id"]
        assert tool["metadata"]["tool_call_id"] == call_id
        ids.append(result["sessionId"])
    assert len(set(ids)) == count
    return TurnStats(count, seconds, latencies, ids)


def check_sessions(lsp: LspProcess, session_ids: list[str], turns: int) -> None:
    """Each stored session holds exactly its own turns, in order."""
    for sid in session_ids:
        stored = lsp.result("agentls/session", {"sessionId": sid})["messages"]
        assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"] * turns
        for start in range(0, len(stored), 4):
            prompt = stored[start]["content"]
            assert stored[start + 3]["content"] == f"Done: {prompt}"


# --------------------------------------------------------------------------- typing storm


@dataclass
class StormStats:
    requests: int
    seconds: float
    latencies_ms: list[float]
    model_ms: list[float]  # requests answered by a model call
    cache_ms: list[float]  # type-ahead requests answered from the cache
    empty: int
    rss_kib: list[tuple[int, int]]  # (requests so far, VmRSS)
    cpu_ms_per_request: float


def document(lines: int = 1200) -> str:
    out = ["import math", ""]
    for index in range(lines // 4):
        out += [f"def helper_{index}(value):", f"    scaled = value * {index}",
                "    return scaled", ""]
    return "\n".join(out) + "\n"


def typing_storm(lsp: LspProcess, uri: str, text: str, keys: int, *, version: int = 1,
                 sample_every: int = 250,
                 on_sample: Callable[[int, int], None] | None = None) -> StormStats:
    """`keys` keystrokes, each a didChange + an inline completion request
    (answered before the next key). Every round starts a new line at the end
    of the document (a model call), then types the suggestion's characters
    one by one (answered from the type-ahead cache)."""
    line = text.count("\n")  # the empty last line
    latencies: list[float] = []
    model: list[float] = []
    cache: list[float] = []
    empty = 0
    samples: list[tuple[int, int]] = [(0, rss_kib(lsp.pid))]
    cpu0 = cpu_seconds(lsp.pid)
    started = time.monotonic()
    sent = 0
    column = 0
    typed = 0  # characters of the suggestion typed on this line
    while sent < keys:
        if typed == 0 or typed >= len(COMPLETION) - 1:
            # New line: "    " then ask (a model call).
            change = {"range": {"start": {"line": line, "character": column},
                                "end": {"line": line, "character": column}},
                      "text": ("\n" if column else "") + "    "}
            if column:
                line += 1
            column = 4
            typed = 0
            kind = "model"
        else:
            char = COMPLETION[typed - 1]
            change = {"range": {"start": {"line": line, "character": column},
                                "end": {"line": line, "character": column}}, "text": char}
            column += 1
            kind = "cache"
        version += 1
        lsp.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                              "contentChanges": [change]})
        t0 = time.perf_counter()
        response = lsp.request("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": column},
            "context": {"triggerKind": 2}}, timeout=30)
        elapsed = (time.perf_counter() - t0) * 1e3
        items = response.get("result", {}).get("items")
        assert "result" in response, response
        latencies.append(elapsed)
        (model if kind == "model" else cache).append(elapsed)
        if not items:
            empty += 1
        typed += 1
        sent += 1
        if sent % sample_every == 0:
            rss = rss_kib(lsp.pid)
            samples.append((sent, rss))
            if on_sample is not None:
                on_sample(sent, rss)
    seconds = time.monotonic() - started
    cpu = (cpu_seconds(lsp.pid) - cpu0) / max(1, sent) * 1e3
    return StormStats(sent, seconds, latencies, model, cache, empty, samples, cpu)
