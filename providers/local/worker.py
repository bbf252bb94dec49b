"""The child process: `python -m agentls.providers.local serve ...`
(__main__.py), started by the provider for each model (process.py).

It loads the GGUF into llama-cpp-python's OpenAI-compatible server
(`llama_cpp.server`) on a loopback port it picks itself, and prints
`AGENTLS_LOCAL_READY <port>` on stdout; everything else it or llama.cpp
prints goes to stderr (the parent's log file). It exits by itself when its
parent dies: it watches its stdin (a pipe from the parent, closed by the
kernel when the parent dies, even by SIGKILL) and its parent pid.
llama_cpp is imported only here, inside the child.

Its port is loopback, which every local user can reach: each request must
carry `Authorization: Bearer <token>`, the secret the parent hands it in
$AGENTLS_LOCAL_TOKEN (never on the command line, which others can read in
/proc); only the engine's counters (numbers, no text) are open.
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import importlib
import os
import socket
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentls.providers.local import engine_work, prompt_reuse
from agentls.providers.local.choice import _default_threads
from agentls.providers.local.process import TOKEN_ENV
from agentls.providers.local.tool_calls.schema_grammar import (
    App,
    Receive,
    SchemaGrammar,
    Scope,
    Send,
    send_json,
)

_READY = "AGENTLS_LOCAL_READY"


class RequireToken:
    """ASGI middleware: a request without the parent's bearer token gets 401
    and reaches nothing else (docs/security.md, "The local model host")."""

    def __init__(self, app: App, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or (
                scope.get("path") == engine_work.PATH and scope.get("method") == "GET"):
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or ()).get(b"authorization", b"")
        if not hmac.compare_digest(given, self._expected):
            await send_json(send, 401, {"error": {"message": "a bearer token is required",
                                                  "type": "auth"}})
            return
        await self.app(scope, receive, send)


def _watch_parent(parent_pid: int) -> None:
    """Exit when the parent goes: at EOF on stdin (the kernel closes the
    pipe when the parent dies, even by SIGKILL) or when we are re-parented."""

    def stdin_closed() -> None:
        with contextlib.suppress(Exception):
            while sys.stdin.buffer.read(4096):
                pass
        os._exit(0)

    def reparented() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=stdin_closed, name="agentls-stdin-watch", daemon=True).start()
    threading.Thread(target=reparented, name="agentls-parent-watch", daemon=True).start()


def _serve(args: argparse.Namespace) -> int:
    token = os.environ.pop(TOKEN_ENV, "")
    if len(token) < 16:
        print(f"agentls local worker: ${TOKEN_ENV} (the secret its parent hands it) is "
              "missing or short; it is started by agentls, not by hand", file=sys.stderr)
        return 2
    if args.nice:
        os.nice(args.nice)  # before llama.cpp starts its threads: they inherit it
    # Whatever llama.cpp or the server print goes to stderr (the parent's
    # log file); stdout carries only the ready line.
    ready = os.dup(1)
    os.dup2(2, 1)
    if args.parent_pid:
        _watch_parent(args.parent_pid)
    lib: Any = importlib.import_module("llama_cpp.llama_cpp")
    # Two sequences sharing one cache, so a changed prompt keeps what it holds
    # again after the change (prompt_reuse.py); set before the model loads.
    lib.llama_context_default_params = prompt_reuse.reuse_params(
        lib.llama_context_default_params)
    settings = importlib.import_module("llama_cpp.server.settings")
    app_module = importlib.import_module("llama_cpp.server.app")
    uvicorn = importlib.import_module("uvicorn")
    model_settings = settings.ModelSettings(
        model=args.model,
        model_alias=args.alias,
        n_ctx=args.n_ctx,
        n_batch=256,
        n_ubatch=256,
        n_threads=args.n_threads,
        n_threads_batch=max(args.n_threads, min(os.cpu_count() or 1, 4)),  # prompt eval
        logits_all=False,  # True keeps n_ctx x vocab floats (GiBs for Gemma's 262k vocab)
        chat_format=args.chat_format,
        verbose=False,
    )
    server_settings = settings.ServerSettings(host="127.0.0.1", port=0, interrupt_requests=False)
    app = app_module.create_app(server_settings=server_settings, model_settings=[model_settings])
    # Raw-prompt completions constrained by a JSON schema (tool calls).
    grammar = importlib.import_module("llama_cpp.llama_grammar")
    app = SchemaGrammar(app, grammar.json_schema_to_gbnf)
    # A superseded request stops the engine; what it evaluated is counted.
    engine_work.install(importlib.import_module("llama_cpp").Llama, lib)
    if args.priority_flag:
        engine_work.PRIORITY.configure(Path(args.priority_flag), args.priority)
    app = engine_work.EngineWork(app)
    app = RequireToken(app, token)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    os.write(ready, f"{_READY} {port}\n".encode())
    os.close(ready)
    server.run(sockets=[sock])
    return 0


def _worker_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentls.providers.local",
        description="The agentls local model server (started by the `local` provider).",
    )
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("--model", required=True, help="path to a .gguf file")
    parser.add_argument("--alias", required=True, help="the model id to answer to")
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--n-threads", type=int, default=_default_threads())
    parser.add_argument("--chat-format", default=None)
    parser.add_argument("--parent-pid", type=int, default=0)
    parser.add_argument("--nice", type=int, default=0,
                        help="run at this lower priority (a chat model behind completions)")
    parser.add_argument("--priority-flag", default=None,
                        help="the file children share to put completions first")
    parser.add_argument("--priority", choices=["raise", "yield"], default=None,
                        help="raise the flag while serving, or wait on it between tokens")
    return _serve(parser.parse_args(argv))
