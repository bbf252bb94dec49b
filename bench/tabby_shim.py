"""A stand-in Tabby server for tabby-agent, answering from any OpenAI-compatible engine.

tabby-agent (the npm package, an LSP server) speaks to a Tabby server: it checks
`/v1/health`, reads `/v1beta/server_setting`, posts `/v1/completions` with the
document's segments (prefix, suffix, file path, snippets) and `/v1/events`.
This shim answers those calls the way a Tabby server configured for the model
would: the prompt is Tabby's FIM template for the model family, code snippets
go before the prefix as line comments, and the engine's `/v1/completions` is
asked with Tabby's decoding defaults (64 tokens, temperature 0.1) and its stop
words for the language. A bench tool: the comparison in bench/bench_vs_tabby.py
uses it so that both clients run on the same engine and model.
"""

from __future__ import annotations

import http.client
import json
import select
import socket
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Tabby's prompt templates for FIM models (its model registry), by family.
TEMPLATES = {
    "qwen2.5-coder": "<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>",
    "deepseek-coder": "<\uff5cfim\u2581begin\uff5c>{prefix}<\uff5cfim\u2581hole\uff5c>{suffix}"
                      "<\uff5cfim\u2581end\uff5c>",
    "starcoder": "<fim_prefix>{prefix}<fim_suffix>{suffix}<fim_middle>",
    "codellama": "<PRE> {prefix} <SUF>{suffix} <MID>",
    "codegemma": "<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>",
}
# Tabby's stop words for Python: a line starting one of its top-level keywords
# or a comment, and a blank line (at any indentation).
PYTHON_STOPS = ["\ndef", "\nfrom", "\nclass", "\nimport", "\n#", "\n\n", "\n\n    ",
                "\n\n        ", "\n\n            "]
COMMENT = {"python": "#", "javascript": "//", "typescript": "//", "go": "//", "rust": "//"}
MAX_DECODING_TOKENS = 64
TEMPERATURE = 0.1


def build_prompt(segments: dict[str, Any], language: str, template: str) -> str:
    """Tabby's server-side prompt: snippets as comments before the prefix,
    the FIM template around prefix and suffix (an empty suffix is a newline)."""
    prefix = str(segments.get("prefix") or "")
    suffix = str(segments.get("suffix") or "") or "\n"
    comment = COMMENT.get(language, "#")
    snippets: list[dict[str, Any]] = [
        *(segments.get("declarations") or []),
        *(segments.get("relevant_snippets_from_changed_files") or []),
    ]
    header = []
    for snippet in snippets:
        body = str(snippet.get("body") or "")
        if not body:
            continue
        header.append(f"{comment} Path: {snippet.get('filepath', '')}")
        header.extend(f"{comment} {line}" for line in body.split("\n"))
    if header:
        prefix = "\n".join(header) + "\n" + prefix
    return template.replace("{prefix}", prefix).replace("{suffix}", suffix)


class Shim:
    """The stand-in server on a free loopback port; `url` once started. Every
    completion's engine time and prompt are kept in `calls`."""

    def __init__(self, engine_url: str, family: str = "qwen2.5-coder",
                 model: str = "model", stop_when_gone: bool = False) -> None:
        self.engine_url = engine_url.rstrip("/")  # .../v1
        # Stream from the engine and drop it when tabby-agent has gone (it
        # aborts a superseded request), as a Tabby server's engine stops.
        self.stop_when_gone = stop_when_gone
        self.template = TEMPLATES[family]
        self.model = model
        self.calls: list[dict[str, Any]] = []
        self.health_checks = 0
        self.requests = 0  # completion requests received, answered or not
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Shim:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def complete(self, body: dict[str, Any],
                 gone: Callable[[], bool] = lambda: False) -> dict[str, Any] | None:
        """The answer, or None when the client went away before it (only
        with `stop_when_gone`)."""
        self.requests += 1
        language = str(body.get("language") or "python")
        prompt = build_prompt(body.get("segments") or {}, language, self.template)
        request = {"model": self.model, "prompt": prompt, "max_tokens": MAX_DECODING_TOKENS,
                   "temperature": TEMPERATURE, "stream": False,
                   "stop": PYTHON_STOPS if language == "python" else ["\n\n"]}
        started = time.perf_counter()
        if self.stop_when_gone:
            reply = _stream(self.engine_url + "/completions", {**request, "stream": True}, gone)
        else:
            reply = _post(self.engine_url + "/completions", request)
        text = str(reply["choices"][0].get("text") or "")
        # The engine's own accounting when it gives one (llama-server's
        # `timings`, an OpenAI-style `usage`).
        self.calls.append({"ms": (time.perf_counter() - started) * 1000, "prompt_chars":
                           len(prompt), "text": text, "usage": reply.get("usage"),
                           "timings": reply.get("timings"),
                           "outcome": "stopped" if reply.get("gone") else "done"})
        if reply.get("gone"):
            return None
        return {"id": str(reply.get("id") or "cmpl-shim"),
                "choices": [{"index": 0, "text": text}]}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        shim = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    return  # tabby-agent gave the request up (or exited) first

            def _body(self) -> dict[str, Any]:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    parsed = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    return {}
                return parsed if isinstance(parsed, dict) else {}

            def _route(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/v1/health":
                    shim.health_checks += 1
                    self._json(200, {"model": shim.model, "device": "cpu", "arch": "x86_64",
                                     "cpu_info": "bench", "cpu_count": 2, "cuda_devices": [],
                                     "version": {"build_date": "", "build_timestamp": "",
                                                 "git_sha": "", "git_describe": "v0.20.0"}})
                elif path == "/v1beta/server_setting":
                    self._json(200, {"disable_client_side_telemetry": True})
                elif path == "/v1/events":
                    self._body()
                    self._json(200, {})
                elif path == "/v1/completions":
                    try:
                        answer = shim.complete(self._body(), lambda: _closed(self.connection))
                        if answer is not None:
                            self._json(200, answer)
                    except Exception as exc:  # the engine failed: tabby-agent sees a 500
                        self._json(500, {"error": f"{type(exc).__name__}: {exc}"})
                else:
                    self._json(404, {"error": f"not served here: {path}"})

            do_GET = _route
            do_POST = _route

        return Handler


def _post(url: str, payload: dict[str, Any], timeout: float = 300.0) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as resp:
        parsed: dict[str, Any] = json.loads(resp.read())
        return parsed


def _closed(sock: socket.socket) -> bool:
    """Whether the peer closed the connection (its request already read)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _stream(url: str, payload: dict[str, Any], gone: Callable[[], bool],
            timeout: float = 300.0) -> dict[str, Any]:
    """A streamed completion gathered into one reply; closed as soon as
    `gone()` (then the reply has `gone`: True), also while the engine is
    still evaluating the prompt (a watcher shuts the engine's socket, as a
    Tabby server drops its engine call when the client aborts): read only
    between its lines, a request abandoned during a long prompt kept
    llama-server's one slot busy, and the next ones queued behind it."""
    parsed = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parsed.hostname or "127.0.0.1", parsed.port, timeout=timeout)
    conn.request("POST", parsed.path, body=json.dumps(payload).encode(),
                 headers={"Content-Type": "application/json"})
    done = threading.Event()
    dropped = threading.Event()

    def watch() -> None:
        while not done.wait(0.02):
            if gone():
                dropped.set()
                if conn.sock is not None:
                    try:
                        conn.sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    reply: dict[str, Any] = {"choices": [{"index": 0, "text": ""}]}
    parts: list[str] = []
    try:
        resp = conn.getresponse()
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            parts.extend(str(c.get("text") or "") for c in chunk.get("choices") or [])
            for key in ("id", "usage", "timings"):
                if chunk.get(key):
                    reply[key] = chunk[key]
    except (OSError, http.client.HTTPException):
        if not dropped.is_set():
            raise
    finally:
        done.set()
        conn.close()
    if dropped.is_set():
        reply["gone"] = True
    reply["choices"][0]["text"] = "".join(parts)
    return reply
