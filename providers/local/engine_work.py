"""Inside the model's child process: the engine never works for a client
that is gone, and counts what it evaluated.

llama-cpp-python's server serves one request at a time and evaluates a
prompt to its end before it looks at the client again; an editor supersedes
a completion request at each keystroke, so without this every superseded
prompt (seconds on a laptop CPU) is evaluated anyway and the queue grows
faster than it drains. Here the prompt is evaluated one batch at a time and
a request whose client disconnected stops before its next batch or token
(`Superseded`), or never starts.

A request marked background (`agentls_priority` in its body: next edits)
yields to a waited-for one: when an inline completion arrives, every
background request queued or running stops the same way and answers an
error event naming PREEMPTED, so the engine works on the keystroke first,
whichever window of the model host sent either.

Completions first across children (`CompletionsFirst`): a child serving
waited-for requests at normal priority raises a flag file in the user's
runtime folder while it evaluates one, and a chat child running below it
(`nice` > 0) waits between its tokens while the flag is up, at most
YIELD_AT_MOST s per token, so an agent turn still moves while the user
types, and never for a flag left by a child that died (older than
STALE_AFTER s).

The counters are the engine's own: the tokens handed to llama.cpp's decode
(after its prompt cache kept what it could, and after prompt_reuse.py moved
what the prompt holds again past a change), per request, served as JSON at
GET /agentls/engine for `agentls/status` and the benches.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentls.providers.local.prompt_reuse import PromptReuse
from agentls.providers.local.tool_calls.schema_grammar import (
    App,
    Message,
    Receive,
    Scope,
    Send,
    send_json,
)

PATH = "/agentls/engine"
_MODEL_PATHS = ("/v1/completions", "/v1/chat/completions")
_KEPT = 256  # the newest requests' records
_CHECK_EVERY = 128
PRIORITY_FIELD = "agentls_priority"  # in a request's body; "background" yields
PREEMPTED = "agentls: preempted by an inline completion"
# An error event in the request's event stream, as vLLM and llama.cpp send
# in-stream errors: the client reads why its answer ends there.
_PREEMPTED_EVENT = ("data: " + json.dumps({"error": {"message": PREEMPTED, "type": "preempted"}})
                    + "\n\n").encode()


YIELD_AT_MOST = 1.0  # seconds a yielding child waits per token
STALE_AFTER = 3.0  # a flag not touched for this long was left by a dead child
_POLL = 0.02


class CompletionsFirst:
    """The flag between the children of one user (see the module doc):
    `role` "raise" touches it per batch of a waited-for request and removes
    it when none runs; "yield" waits on it; None does neither."""

    def __init__(self, flag: Path | None = None, role: str | None = None) -> None:
        self.flag = flag
        self.role = role
        self.waited = 0.0  # seconds this child spent yielding

    def configure(self, flag: Path | None, role: str | None) -> None:
        self.flag, self.role = flag, role

    def before_batch(self, work: Work) -> None:
        flag = self.flag
        if flag is None:
            return
        if self.role == "raise" and not work.background:
            try:
                flag.touch()
            except OSError:
                self.flag = None  # the runtime folder went away: stop trying
        elif self.role == "yield":
            began = time.monotonic()
            while time.monotonic() - began < YIELD_AT_MOST and self._raised(flag):
                time.sleep(_POLL)
            self.waited += time.monotonic() - began

    def after(self, running_foreground: bool) -> None:
        if self.role == "raise" and self.flag is not None and not running_foreground:
            try:
                self.flag.unlink(missing_ok=True)
            except OSError:
                pass

    @staticmethod
    def _raised(flag: Path) -> bool:
        try:
            return time.time() - os.stat(flag).st_mtime < STALE_AFTER
        except OSError:
            return False


PRIORITY = CompletionsFirst()


class Superseded(Exception):
    """The request's client is gone: stop evaluating for it."""


@dataclass
class Work:
    """One request's work on the engine."""

    id: int
    path: str
    received: float  # time.time() when it arrived
    ended: float = 0.0  # time.time() when it ended (0 while it runs)
    prompt_evaluated: int = 0  # prompt tokens decoded (after the prompt cache)
    prompt_kept: int = 0  # prompt tokens the cache already held (not decoded again)
    prompt_moved: int = 0  # of those, held after a change and moved there (prompt_reuse.py)
    generated: int = 0  # tokens decoded one at a time after the prompt
    eval_ms: float = 0.0  # time in decode
    # done, stopped (client gone mid-way), skipped (gone before), preempted
    # (a background request an inline completion came before)
    outcome: str = "running"
    background: bool = False
    preempted: bool = False
    gone: threading.Event = field(default_factory=threading.Event, repr=False)
    _evals: int = field(default=0, repr=False)

    def stop_outcome(self, started: bool) -> str:
        """How a request that stopped before its end ended (`started`: the
        engine had begun on it)."""
        if self.preempted:
            return "preempted"
        return "stopped" if started else "skipped"

    def record(self) -> dict[str, Any]:
        return {"id": self.id, "path": self.path, "received": self.received,
                "prompt_evaluated": self.prompt_evaluated, "prompt_kept": self.prompt_kept,
                "prompt_moved": self.prompt_moved, "generated": self.generated,
                "eval_ms": round(self.eval_ms, 1), "outcome": self.outcome,
                "background": self.background,
                "ms": round((self.ended - self.received) * 1000, 1) if self.ended else None}


class Ledger:
    """The records of the newest requests and the totals since start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0
        self.recent: deque[Work] = deque(maxlen=_KEPT)
        self.totals = {"requests": 0, "prompt_evaluated": 0, "generated": 0,
                       "stopped": 0, "skipped": 0, "preempted": 0}

    def begin(self, path: str, *, background: bool = False) -> Work:
        """A new request's record; a waited-for one preempts every
        background request not ended yet."""
        with self._lock:
            self._next += 1
            work = Work(self._next, path, time.time(), background=background)
            if not background:
                for other in self.recent:
                    if other.background and not other.ended:
                        other.preempted = True
                        other.gone.set()
            self.recent.append(work)
            self.totals["requests"] += 1
        return work

    def end(self, work: Work) -> None:
        with self._lock:
            work.ended = time.time()
            if work.outcome == "running":
                work.outcome = "done"
            if work.outcome in ("stopped", "skipped", "preempted"):
                self.totals[work.outcome] += 1
            self.totals["prompt_evaluated"] += work.prompt_evaluated
            self.totals["generated"] += work.generated
            running = PRIORITY.role == "raise" and any(
                not other.ended and not other.background for other in self.recent)
        PRIORITY.after(running)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"totals": {**self.totals, "yielded_seconds": round(PRIORITY.waited, 2)},
                    "requests": [work.record() for work in self.recent]}


LEDGER = Ledger()
_CURRENT: ContextVar[Work | None] = ContextVar("agentls_engine_work", default=None)


def install(llama_class: Any, lib: Any = None) -> None:
    """Evaluate through `eval`: batch by batch, stopping for a gone client;
    with llama.cpp's bindings (`lib`), fill-in-the-middle prompts also keep
    what they hold again after a change (prompt_reuse.py)."""
    original = llama_class.eval
    if getattr(original, "_agentls", False):
        return

    def batches(work: Work, tokens: Sequence[int], step: int,
                decode: Callable[[Sequence[int], int], None], prompt: bool,
                stoppable: bool = True) -> None:
        # Batches of at most 128 tokens: a gone client stops the engine within one.
        for start in range(0, len(tokens), step):
            if stoppable and work.gone.is_set():
                work.outcome = work.stop_outcome(bool(work.prompt_evaluated or work.generated))
                raise Superseded(f"request {work.id}: the client is gone")
            PRIORITY.before_batch(work)
            batch = tokens[start:start + step]
            began = time.perf_counter()
            decode(batch, start)
            work.eval_ms += (time.perf_counter() - began) * 1000
            if prompt:
                work.prompt_evaluated += len(batch)
            else:
                work.generated += len(batch)

    def step_of(llama: Any) -> int:
        return max(1, min(int(getattr(llama, "n_batch", 256)), _CHECK_EVERY))

    def eval(self: Any, tokens: Sequence[int]) -> None:
        work = _CURRENT.get()
        if work is None:  # a warm-up or an embedding: not a request of ours
            original(self, tokens)
            return
        first = work._evals == 0
        work._evals += 1
        if first:  # what the cache kept of its last prompt (tokens moved there included)
            work.prompt_kept = int(getattr(self, "n_tokens", 0)) - work.prompt_evaluated
        batches(work, tokens, step_of(self), lambda batch, _start: original(self, batch), first)

    eval._agentls = True  # type: ignore[attr-defined]
    llama_class.eval = eval
    if lib is None:
        return
    generate = llama_class.generate

    def generate_reusing(self: Any, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Any:
        reuse = getattr(self, "_agentls_reuse", None)
        if reuse is None:
            reuse = self._agentls_reuse = PromptReuse(self, lib)
        work = _CURRENT.get()
        if work is not None and work.gone.is_set():
            # Before llama-cpp-python's prefix match cuts the cache back to
            # this prompt's: gone already, the next prompt finds it whole.
            # The outcome is set here: the server may still end the response
            # whole, and the ledger would count it done.
            work.outcome = work.stop_outcome(False)
            raise Superseded(f"request {work.id}: the client is gone")
        if work is not None and kwargs.get("reset", True) and reuse.fim_prompt(tokens):

            def decode_at(inserted: Sequence[int], position: int, stoppable: bool) -> None:
                batches(work, inserted, step_of(self),
                        lambda batch, start: reuse.decode(batch, position + start), True,
                        stoppable)

            moves = reuse.before_generate(tokens, decode_at)
            work.prompt_moved = sum(move.length for move in moves)
        yield from generate(self, tokens, *args, **kwargs)

    llama_class.generate = generate_reusing


class EngineWork:
    """ASGI middleware: a record and a disconnect flag per model request,
    and the ledger at GET /agentls/engine."""

    def __init__(self, app: App, ledger: Ledger = LEDGER) -> None:
        self.app = app
        self.ledger = ledger

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path == PATH and scope.get("method") == "GET":
            await send_json(send, 200, self.ledger.snapshot())
            return
        if path not in _MODEL_PATHS or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        # The body is read first (its priority field decides), then replayed.
        received: deque[Message] = deque()
        while True:
            message = await receive()
            received.append(message)
            if message.get("type") != "http.request" or not message.get("more_body"):
                break
        work = self.ledger.begin(path, background=_background(received))

        async def watched() -> Message:
            message = received.popleft() if received else await receive()
            if message.get("type") == "http.disconnect":
                work.gone.set()
            return message

        started = finished = False

        async def sending(message: Message) -> None:
            nonlocal started, finished
            started = True
            if message.get("type") == "http.response.body" and not message.get("more_body"):
                finished = True  # the whole answer was handed to the client
                if work.outcome == "preempted":  # cut short: say why
                    message = {**message, "body": message.get("body", b"") + _PREEMPTED_EVENT}
            await send(message)

        token = _CURRENT.set(work)
        try:
            await self.app(scope, watched, sending)
        except BaseException as exc:
            if not _only_superseded(exc):
                raise
        finally:
            _CURRENT.reset(token)
            if work.outcome == "running" and work.gone.is_set() and not finished:
                # Gone before the end: stopped by the server's own disconnect check
                # between tokens, or while queued, before the engine started it.
                work.outcome = work.stop_outcome(bool(work._evals))
            self.ledger.end(work)
        if work.outcome == "preempted" and not finished:  # its client waits: say why
            if not started:
                await send({"type": "http.response.start", "status": 200,
                            "headers": [(b"content-type", b"text/event-stream")]})
            await send({"type": "http.response.body", "body": _PREEMPTED_EVENT,
                        "more_body": False})


def _background(messages: deque[Message]) -> bool:
    body = b"".join(m.get("body", b"") for m in messages if m.get("type") == "http.request")
    if PRIORITY_FIELD.encode() not in body:  # every inline request: no second JSON parse
        return False
    try:
        payload = json.loads(body) if body else None
    except ValueError:
        return False  # the server answers a bad body itself
    return isinstance(payload, dict) and payload.get(PRIORITY_FIELD) == "background"



def _only_superseded(exc: BaseException) -> bool:
    if isinstance(exc, Superseded):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_superseded(inner) for inner in exc.exceptions)
    return False

