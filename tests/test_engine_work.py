"""The local model's child never works for a client that is gone: the
prompt is evaluated in batches and a superseded request stops before its
next one (or never starts), and the engine's own counters say so.

Pure logic against a stand-in for llama_cpp.Llama's eval and a small ASGI
app; the real engine under a superseded request is
tests/e2e/test_local_engine_work.py."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agentls.providers.local import engine_work
from agentls.providers.local.engine_work import EngineWork, Ledger, Superseded


class FakeLlama:
    n_batch = 512

    def __init__(self, kept: int = 0) -> None:
        self.decoded: list[int] = []
        self.n_tokens = kept  # llama.cpp's cache: the prompt prefix it kept

    def eval(self, tokens: list[int]) -> None:
        self.decoded.append(len(tokens))
        self.n_tokens += len(tokens)


engine_work.install(FakeLlama)


def run_app(ledger: Ledger, app: Any, *, disconnect_after: float | None = None,
            path: str = "/v1/completions", method: str = "POST") -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def main() -> None:
        body_given = asyncio.Event()

        async def receive() -> dict[str, Any]:
            if not body_given.is_set():
                body_given.set()
                return {"type": "http.request", "body": b"{}", "more_body": False}
            if disconnect_after is None:
                await asyncio.Event().wait()
            await asyncio.sleep(disconnect_after)
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await EngineWork(app, ledger)({"type": "http", "path": path, "method": method},
                                      receive, send)

    asyncio.run(main())
    return sent


def evaluating_app(llama: FakeLlama, prompt: int, tokens: int, pause: float = 0.0) -> Any:
    """An app that reads its body, listens for a disconnect, and evaluates a
    prompt then tokens in a worker thread (as llama-cpp-python's server does)."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        listener = asyncio.ensure_future(receive())  # sse-starlette's disconnect watch

        def work() -> None:
            import time
            llama.eval(list(range(prompt)))
            for _ in range(tokens):
                time.sleep(pause)
                llama.eval([1])

        try:
            await asyncio.to_thread(work)
        finally:
            listener.cancel()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    return app


def test_a_request_runs_in_batches_and_is_counted() -> None:
    ledger, llama = Ledger(), FakeLlama()
    sent = run_app(ledger, evaluating_app(llama, prompt=300, tokens=5))
    assert sent[-1]["body"] == b"ok"
    assert llama.decoded == [128, 128, 44, 1, 1, 1, 1, 1]  # batches of at most 128
    (record,) = ledger.snapshot()["requests"]
    assert record["prompt_evaluated"] == 300 and record["generated"] == 5
    assert record["outcome"] == "done" and record["prompt_kept"] == 0


def test_the_prompt_the_cache_kept_is_counted_apart() -> None:
    ledger, llama = Ledger(), FakeLlama(kept=900)
    run_app(ledger, evaluating_app(llama, prompt=40, tokens=3))
    (record,) = ledger.snapshot()["requests"]
    assert record["prompt_kept"] == 900 and record["prompt_evaluated"] == 40


def test_a_client_gone_mid_way_stops_the_engine_before_its_next_token() -> None:
    ledger, llama = Ledger(), FakeLlama()
    run_app(ledger, evaluating_app(llama, prompt=200, tokens=400, pause=0.005),
            disconnect_after=0.2)
    (record,) = ledger.snapshot()["requests"]
    assert record["outcome"] == "stopped", record
    assert record["prompt_evaluated"] == 200 and 0 < record["generated"] < 400
    assert ledger.snapshot()["totals"]["stopped"] == 1


def test_a_client_gone_before_the_engine_started_costs_nothing() -> None:
    ledger, llama = Ledger(), FakeLlama()

    async def queued(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await receive()  # the disconnect arrives while it waits for the engine
        await asyncio.to_thread(llama.eval, list(range(50)))

    run_app(ledger, queued, disconnect_after=0.01)
    (record,) = ledger.snapshot()["requests"]
    assert record["outcome"] == "skipped" and record["prompt_evaluated"] == 0
    assert llama.decoded == []


def test_an_error_that_is_not_a_superseded_request_is_not_swallowed() -> None:
    async def broken(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("engine fault")

    with pytest.raises(RuntimeError, match="engine fault"):
        run_app(Ledger(), broken)


def test_the_counters_are_served_and_other_paths_pass_through() -> None:
    ledger, llama = Ledger(), FakeLlama()
    run_app(ledger, evaluating_app(llama, prompt=10, tokens=1))
    passed: list[str] = []

    async def other(scope: Any, receive: Any, send: Any) -> None:
        passed.append(scope["path"])

    sent = run_app(ledger, other, path=engine_work.PATH, method="GET")
    payload = json.loads(sent[-1]["body"])
    assert payload["totals"] == {"requests": 1, "prompt_evaluated": 10, "generated": 1,
                                 "stopped": 0, "skipped": 0, "preempted": 0,
                                 "yielded_seconds": 0.0}
    run_app(ledger, other, path="/v1/models", method="GET")
    assert passed == ["/v1/models"] and ledger.snapshot()["totals"]["requests"] == 1


def test_eval_outside_a_request_is_the_engines_own() -> None:
    llama = FakeLlama()
    llama.eval(list(range(600)))  # a warm-up: one call, as llama.cpp was asked
    assert llama.decoded == [600]
    with pytest.raises(Superseded):
        work = Ledger().begin("/v1/completions")
        work.gone.set()
        token = engine_work._CURRENT.set(work)
        try:
            llama.eval([1, 2, 3])
        finally:
            engine_work._CURRENT.reset(token)


# -- completions first: the flag between children -----------------------------


def test_a_raising_child_holds_the_flag_while_a_waited_for_request_runs(tmp_path) -> None:
    flag = tmp_path / "completing"
    first = engine_work.CompletionsFirst(flag, "raise")
    first.before_batch(engine_work.Work(1, "/v1/completions", 0.0))
    assert flag.exists()
    first.after(running_foreground=True)  # another request still runs: kept
    assert flag.exists()
    first.after(running_foreground=False)
    assert not flag.exists()
    # A background request (a next edit) raises nothing.
    first.before_batch(engine_work.Work(2, "/v1/completions", 0.0, background=True))
    assert not flag.exists()


def test_a_yielding_child_waits_while_the_flag_is_up_and_only_so_long(tmp_path,
                                                                      monkeypatch) -> None:
    monkeypatch.setattr(engine_work, "YIELD_AT_MOST", 0.2)
    flag = tmp_path / "completing"
    chat = engine_work.CompletionsFirst(flag, "yield")
    work = engine_work.Work(1, "/v1/chat/completions", 0.0)
    chat.before_batch(work)  # no flag: no wait
    assert chat.waited < 0.05
    flag.touch()
    chat.before_batch(work)  # raised: waits, but at most YIELD_AT_MOST
    assert 0.2 <= chat.waited < 0.5
    # A flag a dead child left (not touched for STALE_AFTER s) is ignored.
    old = flag.stat().st_mtime - engine_work.STALE_AFTER - 1
    import os

    os.utime(flag, (old, old))
    waited = chat.waited
    chat.before_batch(work)
    assert chat.waited - waited < 0.05
