"""Provider faults: every network or backend failure becomes a clear
ModelError, quickly; through the real server the turn ends `failed` with the
error, the session stays intact, and the next request works.

Faults, against each HTTP provider (openai, anthropic, ollama) on a loopback
fake backend: connection refused, a DNS failure (`nonexistent.invalid`), a
server that accepts and never answers, a stall mid-stream, a stream cut
mid-response (connection dropped) or ended without its terminal event, a
500 storm, a 429 asking to wait far longer than the request timeout,
gigantic responses (total size, one line, error bodies, /models), invalid
UTF-8, and random JSON in the stream (hypothesis).

Time limits are asserted as generous multiples of the configured timeouts:
a 2-core CI machine under load is slow, but a request that hangs is a bug.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentls.core.types.conversation import Message
from agentls.core.types.errors import ModelError
from tests.fakes.http_backend import CLOSE, STALL, FakeBackend, Pause, Reply
from tests.reliability.harness import LspProcess
from tests.reliability.wires import WIRES, Wire

TIMEOUT = 1.0  # request (read) timeout given to the providers in these tests
CONNECT_TIMEOUT = 1.0
SLACK = 5.0  # scheduling noise on a loaded machine
HELLO = [Message("user", "Say hello")]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # nothing listens once the socket is closed


@pytest.fixture
def backend() -> Iterator[FakeBackend]:
    with FakeBackend(hard_timeout=60) as fake:
        yield fake


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-faults")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-faults")


async def call(wire: Wire, url: str, **config: Any) -> tuple[ModelError | None, float, str]:
    """One streamed chat call: (the ModelError or None, seconds, text)."""
    provider = wire.provider(url, request_timeout=config.pop("request_timeout", TIMEOUT),
                             connect_timeout=CONNECT_TIMEOUT, **config)
    started = time.monotonic()
    text = ""
    try:
        async for chunk in provider.stream(HELLO):
            text += chunk.delta
    except ModelError as exc:
        return exc, time.monotonic() - started, text
    finally:
        await provider.aclose()
    return None, time.monotonic() - started, text


def assert_clear(error: ModelError | None, code: str, *words: str) -> None:
    assert error is not None, "expected a ModelError"
    assert error.code == code, (error.code, str(error))
    message = str(error)
    assert message and len(message) < 2000, message
    for word in words:
        assert word.lower() in message.lower(), message


WIRE_NAMES = sorted(WIRES)


# --------------------------------------------------------------------------- network


@pytest.mark.parametrize("name", WIRE_NAMES)
async def test_connection_refused(name: str) -> None:
    wire = WIRES[name]
    error, seconds, _ = await call(wire, f"http://127.0.0.1:{closed_port()}",
                                   options={"maxAttempts": 2})
    assert_clear(error, "connection", "baseUrl")
    assert seconds < 2 * CONNECT_TIMEOUT + 1.0 + SLACK  # two attempts and one backoff


@pytest.mark.parametrize("name", WIRE_NAMES)
async def test_dns_failure(name: str) -> None:
    wire = WIRES[name]
    error, seconds, _ = await call(wire, "http://nonexistent.invalid",
                                   options={"maxAttempts": 1})
    assert_clear(error, "connection", "nonexistent.invalid")
    assert seconds < CONNECT_TIMEOUT + SLACK


@pytest.mark.parametrize("name", WIRE_NAMES)
async def test_server_accepts_and_never_answers(name: str, backend: FakeBackend) -> None:
    wire = WIRES[name]
    backend.script("POST", wire.route, Reply(stall_before_headers=True))
    error, seconds, _ = await call(wire, backend.url)
    assert_clear(error, "timeout")
    assert TIMEOUT * 0.8 <= seconds < 3 * TIMEOUT + SLACK


@pytest.mark.parametrize("name", WIRE_NAMES)
async def test_stall_mid_stream(name: str, backend: FakeBackend) -> None:
    wire = WIRES[name]
    backend.script("POST", wire.route, wire.partial(STALL))
    error, seconds, text = await call(wire, backend.url)
    assert_clear(error, "timeout")
    assert text == "Hello"  # what arrived before the stall was delivered
    assert TIMEOUT * 0.8 <= seconds < 3 * TIMEOUT + SLACK
    # The connection was closed, so the backend is not left waiting either.
    assert backend.wait_for_disconnect(backend.requests[0], timeout=5)


@pytest.mark.parametrize("name", WIRE_NAMES)
async def test_slow_but_steady_stream_is_not_a_timeout(name: str, backend: FakeBackend) -> None:
    """The timeout is per read, not per response: a stream that keeps
    sending (every 0.4 s, for 2.4 s in all) completes."""
    wire = WIRES[name]
    backend.script("POST", wire.route, wire.reply(
        [*wire.head, *[c for part in "abcdef" for c in (Pause(0.4), wire.text(part))],
         *wire.tail]))
    error, seconds, text = await call(wire, backend.url)
    assert error is None, error
    assert text == "abcdef" and seconds >= 2.0


@pytest.mark.parametrize("name", WIRE_NAMES)
async def test_connection_dropped_mid_stream(name: str, backend: FakeBackend) -> None:
    wire = WIRES[name]
    backend.script("POST", wire.route, wire.partial(CLOSE))
    error, seconds, text = await call(wire, backend.url)
    assert_clear(error, "connection")
    assert text == "Hello" and seconds < TIMEOUT + SLACK


@pytest.mark.parametrize("name", WIRE_NAMES)
async def test_stream_ended_without_its_terminal_event(name: str, backend: FakeBackend) -> None:
    wire = WIRES[name]
    backend.script("POST", wire.route, wire.partial())  # a clean end, but no [DONE] etc.
    error, _, text = await call(wire, backend.url)
    assert_clear(error, "connection", "ended")
    assert text == "Hello"


@pytest.mark.parametrize("name", WIRE_NAMES)
async def test_truncated_sse_frame_or_line(name: str, backend: FakeBackend) -> None:
    """The last frame is cut in the middle (half an event, half a JSON line)."""
    wire = WIRES[name]
    cut = wire.tail[0][: len(wire.tail[0]) // 2]
    backend.script("POST", wire.route, wire.partial(cut, chunked=False))
    error, _, text = await call(wire, backend.url)
    assert error is not None and error.code in ("connection", "invalid_response"), error
    assert text == "Hello"


# --------------------------------------------------------------------------- server errors


@pytest.mark.parametrize("name", WIRE_NAMES)
async def test_500_storm_gives_up_after_max_attempts(name: str, backend: FakeBackend) -> None:
    wire = WIRES[name]
    backend.script("POST", wire.route, Reply(500, body={"error": {"message": "boom"}}))
    error, seconds, _ = await call(wire, backend.url, options={"maxAttempts": 3})
    assert_clear(error, "server_error", "boom", "3 attempt")
    assert len(backend.requests_to(wire.route)) == 3
    assert seconds < 0.5 + 1.0 + SLACK  # two backoffs of at most 0.5 s and 1 s


@pytest.mark.parametrize("name", WIRE_NAMES)
async def test_500_storm_then_recovery(name: str, backend: FakeBackend) -> None:
    wire = WIRES[name]
    backend.script("POST", wire.route, Reply(503), Reply(502), wire.healthy("fine"))
    error, _, text = await call(wire, backend.url, options={"maxAttempts": 3})
    assert error is None and text == "fine"


@pytest.mark.parametrize("name", WIRE_NAMES)
async def test_retry_after_longer_than_the_timeout_is_not_waited_out(
    name: str, backend: FakeBackend
) -> None:
    """A 429 asking for 20 s when the request timeout is 1 s: the request
    must not sit in a backoff sleep far beyond its own timeout."""
    wire = WIRES[name]
    backend.script("POST", wire.route,
                   Reply(429, body={"error": {"message": "slow down"}},
                         headers={"Retry-After": "20"}))
    error, seconds, _ = await call(wire, backend.url, options={"maxAttempts": 3})
    assert_clear(error, "rate_limit", "slow down")
    assert seconds < 3 * TIMEOUT + SLACK


# --------------------------------------------------------------------------- sizes and bytes


@pytest.mark.parametrize("name", WIRE_NAMES)
async def test_gigantic_stream_is_capped(name: str, backend: FakeBackend) -> None:
    wire = WIRES[name]
    piece = "x" * 1000
    backend.script("POST", wire.route, wire.reply(
        [*wire.head, *[wire.text(piece)] * 3000, *wire.tail]))  # ~3 MB of text events
    error, seconds, text = await call(wire, backend.url,
                                      options={"maxResponseBytes": 512 * 1024})
    assert_clear(error, "invalid_response", "larger than")
    assert len(text) < 512 * 1024 and seconds < 2 * TIMEOUT + SLACK


@pytest.mark.parametrize("name", WIRE_NAMES)
async def test_gigantic_line_is_capped(name: str, backend: FakeBackend) -> None:
    wire = WIRES[name]
    backend.script("POST", wire.route, wire.partial(wire.text("y" * (3 << 20))))
    error, _, text = await call(wire, backend.url, options={"maxLineBytes": 1 << 20})
    assert_clear(error, "invalid_response", "line longer than")
    assert text == "Hello"


@pytest.mark.parametrize("name", WIRE_NAMES)
async def test_gigantic_error_body_is_read_only_in_part(name: str, backend: FakeBackend) -> None:
    wire = WIRES[name]
    huge = json.dumps({"error": {"message": "overloaded " + "z" * (40 << 20)}})
    backend.script("POST", wire.route, Reply(500, body=huge))
    error, seconds, _ = await call(wire, backend.url, options={"maxAttempts": 1})
    assert_clear(error, "server_error")
    assert len(str(error)) < 2000 and seconds < TIMEOUT + SLACK


async def test_gigantic_model_list_is_capped(backend: FakeBackend) -> None:
    wire = WIRES["openai"]
    models = {"data": [{"id": f"model-{i}-" + "m" * 200, "object": "model"}
                       for i in range(20_000)]}  # ~4.5 MB
    backend.script("GET", "/v1/models", Reply(body=models))
    provider = wire.provider(backend.url, options={"maxResponseBytes": 1 << 20})
    try:
        with pytest.raises(ModelError) as raised:
            await asyncio.wait_for(provider.list_models(), 10)
    finally:
        await provider.aclose()
    assert_clear(raised.value, "invalid_response", "larger than")


@pytest.mark.parametrize("name", WIRE_NAMES)
async def test_invalid_utf8_mid_stream(name: str, backend: FakeBackend) -> None:
    wire = WIRES[name]
    backend.script("POST", wire.route, wire.partial(wire.invalid_utf8, *wire.tail))
    error, _, text = await call(wire, backend.url)
    assert_clear(error, "invalid_response", "UTF-8")
    assert text == "Hello"


@pytest.mark.parametrize("name", WIRE_NAMES)
async def test_malformed_chunk_mid_stream(name: str, backend: FakeBackend) -> None:
    wire = WIRES[name]
    backend.script("POST", wire.route, wire.partial(wire.malformed, *wire.tail))
    error, _, text = await call(wire, backend.url)
    assert_clear(error, "invalid_response")
    assert text == "Hello"


@pytest.mark.parametrize("name", WIRE_NAMES)
async def test_html_error_page_instead_of_a_stream(name: str, backend: FakeBackend) -> None:
    wire = WIRES[name]
    backend.script("POST", wire.route, Reply(200, body="<html><body>Gateway</body></html>",
                                             headers={"Content-Type": "text/html"}))
    error, _, _ = await call(wire, backend.url)
    assert error is not None and error.code in ("invalid_response", "connection"), error


# --------------------------------------------------------------------------- random garbage

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64) | st.floats(allow_nan=False)
    | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=10,
)


@st.composite
def garbage_chunk(draw: st.DrawFn, wire_name: str) -> Any:
    """Random JSON, usually shaped like the provider's chunks so the decoder
    gets past its first checks."""
    value = draw(json_values)
    shape = draw(st.integers(0, 3))
    if shape == 0:
        return value
    if wire_name == "openai":
        return {"choices": [{"delta": draw(st.dictionaries(
            st.sampled_from(["content", "reasoning_content", "tool_calls", "function_call",
                             "role"]), json_values | st.lists(
                st.fixed_dictionaries({"index": json_values, "id": json_values,
                                       "function": json_values}), max_size=2),
            max_size=3)), "finish_reason": draw(json_values)}], "usage": draw(json_values)}
    if wire_name == "anthropic":
        kind = draw(st.sampled_from(["message_start", "content_block_start",
                                     "content_block_delta", "content_block_stop",
                                     "message_delta", "message_stop", "error", "ping"]))
        return {"type": kind, "index": draw(json_values | st.integers(0, 2)),
                "delta": draw(json_values), "content_block": draw(json_values),
                "message": draw(json_values), "usage": draw(json_values),
                "error": draw(json_values)}
    return {"message": draw(st.dictionaries(
        st.sampled_from(["role", "content", "thinking", "tool_calls", "images"]), json_values,
        max_size=3)), "done": draw(json_values), "done_reason": draw(json_values),
        "prompt_eval_count": draw(json_values), "eval_count": draw(json_values),
        "error": draw(json_values)}


@pytest.mark.parametrize("name", WIRE_NAMES)
def test_random_json_in_the_stream_is_a_model_error_or_text(name: str) -> None:
    """Whatever a broken or hostile server streams, the provider yields
    chunks or raises ModelError: never TypeError/KeyError/ValidationError,
    which would escape the turn loop as an internal error."""
    wire = WIRES[name]

    @settings(max_examples=40, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(chunks=st.lists(garbage_chunk(name), min_size=1, max_size=3))
    def check(chunks: list[Any]) -> None:
        with FakeBackend(hard_timeout=30) as fake:
            fake.script("POST", wire.route,
                        wire.partial(*(wire.garbage(c) for c in chunks), *wire.tail))
            try:
                asyncio.run(asyncio.wait_for(call(wire, fake.url), 20))
            except ModelError:
                pass  # call() returns ModelErrors; anything else is the bug

    check()


# --------------------------------------------------------------------------- the real server

FAULTS = {
    # name -> (replies for the chat route, expected ModelError code)
    "stall": (lambda w: [w.partial(STALL)], "timeout"),
    "never answers": (lambda w: [Reply(stall_before_headers=True)], "timeout"),
    "truncated": (lambda w: [w.partial(CLOSE)], "connection"),
    "500 storm": (lambda w: [Reply(500, body={"error": {"message": "boom"}})] * 2,
                  "server_error"),
    # Ever-new text (a repeating one is cut short as degenerate, stream_guard).
    "gigantic": (lambda w: [w.reply([*w.head, *[w.text(" ".join(f"{i}.{j}" for j in range(150)))
                                                 for i in range(1500)], *w.tail])],
                 "invalid_response"),
    "invalid utf-8": (lambda w: [w.partial(w.invalid_utf8, *w.tail)], "invalid_response"),
    "malformed chunk": (lambda w: [w.partial(w.malformed, *w.tail)], "invalid_response"),
}


def rescript(fake: FakeBackend, route: str, *replies: Reply) -> None:
    """Replace what `route` answers (FakeBackend.script appends, and its last
    reply repeats, so a fault would otherwise outlive its test step)."""
    with fake._lock:
        fake._routes.pop(("POST", route), None)
    fake.script("POST", route, *replies)


def start_server(tmp_path: Path, wire: Wire, url: str, workspace: Path) -> Any:
    settings = wire.settings(url, requestTimeoutSeconds=TIMEOUT,
                             connectTimeoutSeconds=CONNECT_TIMEOUT,
                             providerOptions={"maxAttempts": 2,
                                              "maxResponseBytes": 512 * 1024},
                             # The byte cap, not the output cap, must stop `gigantic`.
                             session={"maxOutputTokens": 1_000_000},
                             # Faults, not the context budget: the huge partial
                             # replies kept in the session must not trigger
                             # compaction calls that eat the scripted faults.
                             contextWindow=100_000_000)
    env = {wire.key_env: "sk-test-faults"} if wire.key_env else {}
    return LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                            settings=settings, env=env, log_file=tmp_path / "server.log")


def chat_fails_cleanly(lsp: LspProcess, code: str, session_id: str | None,
                       prompt: str) -> dict[str, Any]:
    params: dict[str, Any] = {"prompt": prompt}
    if session_id:
        params["sessionId"] = session_id
    started = time.monotonic()
    result = lsp.result("agentls/chat", params, timeout=30)
    seconds = time.monotonic() - started
    assert result["status"] == "failed", result
    assert result["error"]["code"] == code, result["error"]
    assert result["error"]["message"], result
    # Two attempts at most, each bounded by the (1 s) timeout, plus a backoff.
    assert seconds < 2 * TIMEOUT + 1.5 + SLACK, (code, seconds)
    stored = lsp.result("agentls/session", {"sessionId": result["sessionId"]})
    assert stored["messages"] and stored["messages"][-1]["role"] in ("user", "assistant")
    assert any(m["content"] == prompt for m in stored["messages"])
    # The turn really ended: not left "running" by an exception that
    # bypassed the turn loop.
    status = lsp.result("agentls/status", {})
    mine = [s for s in status["sessions"] if s["session_id"] == result["sessionId"]]
    assert mine and mine[0]["status"] == "failed", mine
    return result


@pytest.mark.parametrize("name", WIRE_NAMES)
def test_faults_through_the_server_fail_the_turn_and_keep_the_session(
    name: str, tmp_path: Path, workspace: Path
) -> None:
    wire = WIRES[name]
    with FakeBackend(hard_timeout=120) as fake, \
            start_server(tmp_path, wire, fake.url, workspace) as lsp:
        session_id = None
        prompts = []
        for fault, (replies, code) in FAULTS.items():
            rescript(fake, wire.route, *replies(wire))
            prompt = f"prompt during {fault}"
            prompts.append(prompt)
            result = chat_fails_cleanly(lsp, code, session_id, prompt)
            session_id = result["sessionId"]
            assert "result" in lsp.request("agentls/status", {})
        # The backend recovers: the same session goes on, with its whole history.
        rescript(fake, wire.route, wire.healthy("All ", "good."))
        after = lsp.result("agentls/chat", {"prompt": "and now?", "sessionId": session_id},
                           timeout=30)
        assert after["status"] == "completed", after
        assert after["messages"][-1]["content"] == "All good."
        stored = lsp.result("agentls/session", {"sessionId": session_id})
        users = [m["content"] for m in stored["messages"] if m["role"] == "user"]
        assert users == [*prompts, "and now?"]
        # Text that streamed before a fault is kept, marked incomplete.
        partial = [m["content"] for m in stored["messages"]
                   if (m.get("metadata") or {}).get("incomplete")]
        assert partial.count("Hello") >= 4, partial
        status = lsp.result("agentls/status", {})
        mine = [s for s in status["sessions"] if s["session_id"] == session_id]
        assert mine and mine[0]["status"] == "completed"
        sent = [r.json for r in fake.requests_to(wire.route)]
        # The model saw the history, not the broken partial replies twice over.
        assert sent[-1] is not None


@pytest.mark.parametrize("target", ["refused", "dns"])
def test_unreachable_provider_through_the_server(
    target: str, tmp_path: Path, workspace: Path
) -> None:
    wire = WIRES["openai"]
    url = f"http://127.0.0.1:{closed_port()}" if target == "refused" else (
        "http://nonexistent.invalid")
    with start_server(tmp_path, wire, url, workspace) as lsp:
        first = chat_fails_cleanly(lsp, "connection", None, "anyone there?")
        second = chat_fails_cleanly(lsp, "connection", first["sessionId"], "still there?")
        assert second["sessionId"] == first["sessionId"]
        # Shown once (actionable: check baseUrl), not per request.
        shown = [m for m in lsp.shown_messages() if "baseUrl" in m]
        assert len(shown) == 1, lsp.shown_messages()
        inline_uri = (workspace / "src" / "app.py").as_uri()
        lsp.open(inline_uri, "def main():\n    return 1\n")
        started = time.monotonic()
        inline = lsp.request("textDocument/inlineCompletion", {
            "textDocument": {"uri": inline_uri}, "position": {"line": 1, "character": 12},
            "context": {"triggerKind": 1}}, timeout=30)
        assert inline.get("result") == {"items": []}, inline
        assert time.monotonic() - started < 2 * CONNECT_TIMEOUT + 1.5 + SLACK
        assert "result" in lsp.request("agentls/status", {})
