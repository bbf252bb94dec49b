"""Protocol fuzzing against the REAL server process over stdio.

Hypothesis throws malformed and random JSON-RPC at one long-lived `agentls`
process: bodies that are not JSON (or not UTF-8, or nested too deep), values
that are not messages, envelopes with wrong types, unknown methods, random
and near-valid params for every handler (agentls/* included), document
operations with stale versions, out-of-range positions and positions inside
surrogate pairs, documents that were never opened; plus bad framing (missing
or wrong Content-Length) and 5 MB payloads. After every example the server
must have answered what it owed (the reference classifier `expected()` says
what: -32700 with id null, -32600, -32601, or a result / -32602 for a valid
envelope; never -32603, which would mean a handler crashed on bad input) and
must still answer `agentls/status`. At the end its log must show it logged
what it refused.

Bounded: max_examples per test and one time budget for the module
(FUZZ_BUDGET_SECONDS); examples past the budget are skipped quickly.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.harness import LspProcess, scripted_settings, wait_until

FUZZ_BUDGET_SECONDS = float(os.environ.get("AGENTLS_FUZZ_BUDGET", "75"))
ANSWER_TIMEOUT = 10.0  # generous: a 2-core CI machine under load
PROBE = "agentls/status"

FUZZ = settings(
    max_examples=int(os.environ.get("AGENTLS_FUZZ_EXAMPLES", "250")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                           HealthCheck.data_too_large],
)

# Requests every fuzzed envelope may name. Excluded on purpose: initialize,
# shutdown and exit (they end or reset the session under test) and
# workspace/didChangeConfiguration (random settings could point the
# provider at a real network endpoint).
REQUESTS = [
    "agentls/status", "agentls/models", "agentls/sessions", "agentls/session",
    "agentls/deleteSession", "agentls/chat", "agentls/complete", "agentls/templates",
    "agentls/uiSchema", "textDocument/inlineCompletion", "textDocument/completion",
    "textDocument/codeAction", "workspace/executeCommand",
]
NOTIFICATIONS = [
    "textDocument/didOpen", "textDocument/didChange", "textDocument/didClose",
    "textDocument/didSave", "textDocument/didShowCompletion",
    "textDocument/didPartiallyAcceptCompletion", "$/cancelRequest", "$/setTrace",
    "window/workDoneProgress/cancel",
]
COMMANDS = ["agentls.chat", "agentls.cancel", "agentls.newSession",
            "agentls.inlineCompletionAccepted", "agentls.unknownCommand"]


# --------------------------------------------------------------------------- the server


class Fuzzed:
    """The server under fuzz, its workspace and its time budget."""

    def __init__(self, lsp: LspProcess, root: Path, log: Path) -> None:
        self.lsp = lsp
        self.root = root
        self.log = log
        self.deadline = time.monotonic() + FUZZ_BUDGET_SECONDS
        self.counter = 0
        self.examples = 0

    def over_budget(self) -> bool:
        return time.monotonic() > self.deadline

    def next_id(self) -> str:
        self.counter += 1
        return f"fuzz-{self.counter}"

    def uri(self, name: str) -> str:
        return (self.root / name).as_uri()

    def probe(self) -> None:
        """The next valid request is served."""
        response = self.lsp.request(PROBE, {}, timeout=ANSWER_TIMEOUT)
        assert "result" in response, response
        assert self.lsp.alive()


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzzed]:
    base = tmp_path_factory.mktemp("fuzz")
    root = base / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    (root / "chat.prompt.md").write_text("Explain @file:src/app.py /explain\n")
    # The scripted provider answers every model call at once, forever.
    script, _ = scripted_settings(base, "fuzz", [{"text": "ok"}], loop=True,
                                  fim=[{"text": "x + 1"}])
    configured = {**script, "inlineCompletion": {"debounceMs": 0},
                  "session": {"maxIterations": 2},
                  # Payload sizes, not the context budget: a 100,000-character
                  # prompt is more than the scripted model's 32768 tokens.
                  "contextWindow": 1_000_000}
    log = base / "server.log"
    capabilities = {"window": {"workDoneProgress": True}}
    with LspProcess.start(state_dir=base / "state", workspace=root, settings=configured,
                          capabilities=capabilities, log_file=log,
                          stderr_file=base / "stderr.txt") as lsp:
        fuzzed = Fuzzed(lsp, root, log)
        yield fuzzed
        fuzzed.probe()
    assert lsp.proc.returncode == 0, "the server did not shut down cleanly after the fuzzing"


# --------------------------------------------------------------------------- the oracle


def _valid_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def expected(body: bytes) -> tuple[str, Any]:
    """What the server owes for one framed body: ("none", None) for
    notifications and responses, ("error", (code, id)) for an envelope error,
    ("answer", id) for a valid request (a result, or -32601/-32602)."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return "error", (-32700, None)
    if not isinstance(message, dict):
        return "error", (-32600, None)
    has_id = "id" in message
    msg_id = message.get("id")
    if "method" not in message:
        return "none", None  # a response: never answered
    if message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        return ("error", (-32600, msg_id if _valid_id(msg_id) else None)) if has_id else (
            "none", None)
    if not has_id:
        return "none", None
    if not _valid_id(msg_id):
        return "error", (-32600, None)
    if "result" in message or "error" in message:
        return "error", (-32600, msg_id)
    return "answer", msg_id


def check_answer(fz: Fuzzed, body: bytes, method: str | None = None) -> dict[str, Any] | None:
    """Send one framed body and check the server's answer against the oracle."""
    kind, detail = expected(body)
    lsp = fz.lsp
    if kind == "answer":
        future = lsp.expect(detail)
    elif kind == "error":
        future = lsp.expect(detail[1])
    else:
        future = None
    lsp.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    if future is None:
        return None
    response = lsp.wait(future, ANSWER_TIMEOUT, f"the answer to {body[:120]!r}")
    if kind == "error":
        code, msg_id = detail
        assert response.get("id", "missing") == msg_id, response
        assert response.get("error", {}).get("code") == code, (body[:300], response)
        assert response["error"].get("message"), response
        return response
    error = response.get("error")
    if error is not None:
        # A valid envelope: the method is unknown, its params are wrong, or
        # the request was refused for a stated reason. Never an internal
        # error: that is a handler crashing on bad input.
        assert error.get("code") in (-32601, -32602, -32600, -32800), (method, body[:300],
                                                                         response)
        assert error.get("message"), response
    else:
        assert "result" in response, response
    return response


# --------------------------------------------------------------------------- strategies

json_scalars = (st.none() | st.booleans() | st.integers(-2**40, 2**40)
                | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20))
json_values = st.recursive(
    json_scalars,
    lambda children: (st.lists(children, max_size=4)
                      | st.dictionaries(st.text(max_size=10), children, max_size=4)),
    max_leaves=12,
)
ids = st.one_of(st.integers(0, 2**31), st.text(min_size=1, max_size=12), json_values)


@st.composite
def envelopes(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly well-formed envelopes with random parts missing or mistyped."""
    message: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        message["jsonrpc"] = "2.0"
    else:
        message["jsonrpc"] = draw(st.sampled_from(["1.0", "2", 2.0, None, ""]) | json_values)
    if draw(st.integers(0, 9)):
        message["method"] = draw(st.sampled_from(REQUESTS + NOTIFICATIONS)
                                 | st.text(max_size=30)
                                 | st.just("$/unknown") | st.just("agentls/nope"))
    elif draw(st.booleans()):
        message["method"] = draw(json_values)
    if draw(st.integers(0, 4)):
        message["id"] = draw(ids)
    if draw(st.integers(0, 4)):
        message["params"] = draw(json_values)
    if draw(st.integers(0, 20)) == 0:
        message[draw(st.sampled_from(["result", "error"]))] = draw(json_values)
    return message


POSITION_LINES = st.one_of(st.integers(0, 12), st.integers(-3, 2**31 + 5),
                           st.sampled_from([2**31 - 1, 2**32]))
POSITION_CHARS = st.one_of(st.integers(0, 40), st.integers(-3, 2**31 + 5))
# Text with astral characters (two UTF-16 code units), CRLF, tabs, combining marks.
DOC_TEXT = st.lists(st.sampled_from(
    [*"abc xyz_():=\t\n", "\r\n", "😀", "𝄞", "é", "\u0301", "中", "\u2028", "    return "]
), max_size=120).map("".join)


def position(draw: st.DrawFn) -> dict[str, Any]:
    return {"line": draw(POSITION_LINES), "character": draw(POSITION_CHARS)}


def mutate(draw: st.DrawFn, value: Any, rate: int = 8) -> Any:
    """A near-valid value: now and then a field is dropped or replaced by a
    random JSON value, recursively."""
    if draw(st.integers(0, rate)) == 0:
        return draw(json_values)
    if isinstance(value, dict):
        out = {}
        for key, inner in value.items():
            if draw(st.integers(0, rate * 2)) == 0:
                continue
            out[key] = mutate(draw, inner, rate)
        return out
    if isinstance(value, list):
        return [mutate(draw, inner, rate) for inner in value]
    return value


@st.composite
def near_valid_requests(draw: st.DrawFn, uris: tuple[str, ...]) -> tuple[str, Any]:
    uri = draw(st.sampled_from(uris))
    pos = position(draw)
    rng = {"start": position(draw), "end": position(draw)}
    method = draw(st.sampled_from(REQUESTS))
    templates: dict[str, Any] = {
        "agentls/status": {},
        "agentls/models": None,
        "agentls/sessions": {"limit": draw(st.integers(-2, 5))},
        "agentls/session": {"sessionId": draw(st.text(max_size=8))},
        "agentls/deleteSession": {"sessionId": draw(st.text(max_size=8))},
        "agentls/chat": {"prompt": draw(st.text(max_size=30)),
                         "context": {"uri": uri, "range": rng},
                         "workDoneToken": draw(st.text(max_size=5) | st.integers())},
        "agentls/complete": {"text": draw(st.text(max_size=40))},
        "agentls/templates": {},
        "agentls/uiSchema": {},
        "textDocument/inlineCompletion": {"textDocument": {"uri": uri}, "position": pos,
                                          "context": {"triggerKind": draw(st.integers(0, 3))}},
        "textDocument/completion": {"textDocument": {"uri": uri}, "position": pos,
                                    "context": {"triggerKind": 2, "triggerCharacter": "@"}},
        "textDocument/codeAction": {
            "textDocument": {"uri": uri}, "range": rng,
            "context": {"diagnostics": [{"range": rng, "message": "boom"}]}},
        "workspace/executeCommand": {
            "command": draw(st.sampled_from(COMMANDS)),
            "arguments": draw(st.lists(json_values, max_size=2))},
    }
    return method, mutate(draw, templates[method])


@st.composite
def document_operations(draw: st.DrawFn, uris: tuple[str, ...]) -> list[tuple[str, Any]]:
    """A short burst of document traffic: opens, incremental and full
    changes (often out of range, often with stale versions), closes, and
    requests at random positions, surrogate-pair middles included."""
    ops: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(1, 8))):
        uri = draw(st.sampled_from(uris))
        kind = draw(st.sampled_from(["open", "change", "change", "full", "close",
                                     "inline", "inline", "completion", "action", "save"]))
        version = draw(st.integers(-1, 6))
        if kind == "open":
            ops.append(("textDocument/didOpen", {"textDocument": {
                "uri": uri, "languageId": draw(st.sampled_from(["python", "agentls-chat", ""])),
                "version": version, "text": draw(DOC_TEXT)}}))
        elif kind in ("change", "full"):
            change: dict[str, Any] = {"text": draw(DOC_TEXT)}
            if kind == "change":
                change["range"] = {"start": position(draw), "end": position(draw)}
            ops.append(("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": version}, "contentChanges": [change]}))
        elif kind == "close":
            ops.append(("textDocument/didClose", {"textDocument": {"uri": uri}}))
        elif kind == "save":
            ops.append(("textDocument/didSave", {"textDocument": {"uri": uri}}))
        elif kind == "inline":
            ops.append(("textDocument/inlineCompletion", {
                "textDocument": {"uri": uri}, "position": position(draw),
                "context": {"triggerKind": draw(st.sampled_from([1, 2]))}}))
        elif kind == "completion":
            ops.append(("textDocument/completion", {
                "textDocument": {"uri": uri}, "position": position(draw)}))
        else:
            ops.append(("textDocument/codeAction", {
                "textDocument": {"uri": uri},
                "range": {"start": position(draw), "end": position(draw)},
                "context": {"diagnostics": []}}))
    return ops


def document_uris(fz: Fuzzed) -> tuple[str, ...]:
    return (fz.uri("src/app.py"), fz.uri("a.py"), fz.uri("chat.prompt.md"),
            fz.uri("never/opened.py"), "untitled:Untitled-1", "file:///etc/passwd.prompt.md",
            "not a uri", "")


def frame_request(fz: Fuzzed, method: str, params: Any) -> bytes:
    is_request = not method.startswith("textDocument/did") and method not in NOTIFICATIONS
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if is_request:
        message["id"] = fz.next_id()
    return json.dumps(message).encode()


# --------------------------------------------------------------------------- tests

not_json = st.one_of(
    st.binary(min_size=1, max_size=120),
    st.text(min_size=1, max_size=80).map(lambda t: t.encode()),
    st.builds(lambda n: b"[" * n, st.integers(2000, 200_000)),  # recursion depth
    st.builds(lambda cut: json.dumps({"jsonrpc": "2.0", "id": 1, "method": PROBE,
                                      "params": {}}).encode()[:cut], st.integers(1, 60)),
    st.sampled_from([b"\xff\xfe{}", b"{\"a\": \"\xed\xa0\x80\"}", b"\x00", b"{'a': 1}",
                     b"NaN", b"[1,]", b"{\"a\":1}{\"b\":2}"]),
)


@FUZZ
@given(body=not_json)
def test_unparsable_and_non_message_bodies_are_answered(fuzzed: Fuzzed, body: bytes) -> None:
    if fuzzed.over_budget():
        return
    check_answer(fuzzed, body)
    fuzzed.probe()


@FUZZ
@given(message=envelopes())
def test_random_envelopes_get_the_proper_json_rpc_answer(fuzzed: Fuzzed,
                                                          message: dict[str, Any]) -> None:
    if fuzzed.over_budget():
        return
    if message.get("method") in ("exit", "shutdown", "initialize"):
        message["method"] = "agentls/nope"
    if isinstance(message.get("id"), str):
        message["id"] = f"env-{message['id']}"  # clear of the harness' own ids
    check_answer(fuzzed, json.dumps(message).encode(), str(message.get("method")))
    fuzzed.probe()


@FUZZ
@given(data=st.data())
def test_near_valid_params_for_every_handler(fuzzed: Fuzzed, data: st.DataObject) -> None:
    if fuzzed.over_budget():
        return
    method, params = data.draw(near_valid_requests(document_uris(fuzzed)))
    check_answer(fuzzed, frame_request(fuzzed, method, params), method)
    fuzzed.probe()


@FUZZ
@given(data=st.data())
def test_document_traffic_with_stale_versions_and_bad_positions(
    fuzzed: Fuzzed, data: st.DataObject
) -> None:
    if fuzzed.over_budget():
        return
    ops = data.draw(document_operations(document_uris(fuzzed)))
    for method, params in ops:
        check_answer(fuzzed, frame_request(fuzzed, method, params), method)
    fuzzed.probe()


# --------------------------------------------------------------------------- framing

VALID = json.dumps({"jsonrpc": "2.0", "method": "$/setTrace", "params": {"value": "off"}}
                   ).encode()


@pytest.mark.parametrize(
    ("name", "data", "owed", "parse_errors"),
    [
        # (what is sent, how many more bytes the server waits for, -32700s due)
        ("no header", VALID, 0, 0),
        ("lower-case header", b"content-length: %d\r\n\r\n" % len(VALID) + VALID, 0, 0),
        ("non-numeric length", b"Content-Length: ten\r\n\r\n" + VALID, 0, 0),
        ("negative length", b"Content-Length: -5\r\n\r\n" + VALID, 0, 0),
        ("length too short", b"Content-Length: 10\r\n\r\n" + VALID, 0, 1),
        ("length too long", b"Content-Length: %d\r\n\r\n" % (len(VALID) + 40) + VALID, 40, 1),
        ("header without blank line", b"Content-Length: %d\r\n" % len(VALID) + VALID, 0, 0),
        ("garbage headers", b"X: y\r\nZ\r\nContent-Length: %d\r\nContent-Type: nonsense\r\n\r\n"
         % len(VALID) + VALID, 0, 0),
        ("over-long header line", b"X-Junk: " + b"j" * 200_000 + b"\r\n", 0, 0),
    ],
)
def test_bad_framing_is_survived_and_the_stream_recovers(
    fuzzed: Fuzzed, name: str, data: bytes, owed: int, parse_errors: int
) -> None:
    lsp = fuzzed.lsp
    before = _parse_errors(lsp)
    lsp.send_raw(data)
    if owed:
        lsp.send_raw(b"x" * (owed - 2) + b"\r\n")  # what the announced length still covers
    # A client that lost sync sends its next messages normally; the first may
    # be swallowed as the tail of the broken one, but the stream must get
    # back in step within a couple of messages.
    answered = False
    for _ in range(3):
        future = lsp.request_async(PROBE, {})
        try:
            response = lsp.wait(future, 3.0, f"a probe after {name}")
        except AssertionError:
            continue
        assert "result" in response, response
        answered = True
        break
    assert answered, f"the server stopped answering after: {name}"
    assert lsp.alive()
    if parse_errors:
        wait_until(lambda: _parse_errors(lsp) >= before + parse_errors, "the ParseError answer",
                   timeout=ANSWER_TIMEOUT)
    fuzzed.probe()


def _parse_errors(lsp: LspProcess) -> int:
    return sum(1 for m in list(lsp.unmatched)
               if m.get("id") is None and m.get("error", {}).get("code") == -32700)


# --------------------------------------------------------------------------- huge payloads

FIVE_MB = 5 * 1024 * 1024


def test_five_megabyte_payloads_are_served(fuzzed: Fuzzed) -> None:
    lsp = fuzzed.lsp
    big_line = "x = 1  # " + "y" * 100 + "\n"
    text = big_line * (FIVE_MB // len(big_line))
    uri = fuzzed.uri("big.py")
    lsp.open(uri, text)
    last_line = text.count("\n")
    started = time.monotonic()
    inline = lsp.request("textDocument/inlineCompletion", {
        "textDocument": {"uri": uri}, "position": {"line": last_line, "character": 0},
        "context": {"triggerKind": 1}}, timeout=30)
    assert "result" in inline, inline
    beyond = lsp.request("textDocument/inlineCompletion", {
        "textDocument": {"uri": uri}, "position": {"line": last_line + 5, "character": 0},
        "context": {"triggerKind": 1}}, timeout=30)
    assert beyond["error"]["code"] == -32602 and "past the end" in beyond["error"]["message"]
    lsp.notify("textDocument/didChange", {
        "textDocument": {"uri": uri, "version": 2},
        "contentChanges": [{"range": {"start": {"line": 0, "character": 0},
                                      "end": {"line": 0, "character": 0}}, "text": "# top\n"}]})
    lsp.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    huge = "z" * FIVE_MB
    complete = lsp.request("agentls/complete", {"text": huge}, timeout=30)
    assert "result" in complete, str(complete)[:300]
    unknown = lsp.request("agentls/noSuchMethod", {"blob": huge}, timeout=30)
    assert unknown["error"]["code"] == -32601
    # A 5 MB prompt is over session.maxPromptChars: refused with a clear
    # error (it was stored and re-sent every later turn), and the next turn
    # is served.
    refused = lsp.request("agentls/chat", {"prompt": "summarise: " + huge}, timeout=60)
    assert refused["error"]["code"] == -32602, str(refused)[:300]
    assert "session.maxPromptChars" in refused["error"]["message"]
    chat = lsp.request("agentls/chat", {"prompt": "summarise: " + huge[:100_000]}, timeout=60)
    assert chat.get("result", {}).get("status") == "completed", str(chat)[:300]
    stored = lsp.result("agentls/session", {"sessionId": chat["result"]["sessionId"]},
                        timeout=30)
    assert len(stored["messages"][0]["content"]) > 100_000
    assert time.monotonic() - started < 120
    fuzzed.probe()


# --------------------------------------------------------------------------- last: logs


def test_zz_refusals_were_logged(fuzzed: Fuzzed) -> None:
    """Runs last in this module (pytest keeps file order): what the fuzzing
    sent was logged, with the reason, and the server is still serving."""
    fuzzed.probe()
    log = fuzzed.log.read_text(encoding="utf-8", errors="replace")
    assert "Answered an unparsable message with ParseError" in log
    assert "Answered an invalid JSON-RPC message with InvalidRequest" in log
    assert "with InvalidParams" in log
    assert "MemoryError" not in log
    # didChange/didClose for documents never opened fail in pygls on every
    # such message; the user is told once per kind of failure, not per message.
    popups = [m for m in fuzzed.lsp.shown_messages() if m.startswith("Error in server")]
    assert len(popups) <= 5, popups


def test_requests_after_shutdown_are_refused_not_dropped(tmp_path: Path) -> None:
    lsp = LspProcess.spawn(state_dir=tmp_path / "state")
    try:
        lsp.initialize(settings={"provider": "scripted"})
        assert lsp.request("shutdown", None)["result"] is None
        after = lsp.request(PROBE, {}, timeout=ANSWER_TIMEOUT)
        assert after["error"]["code"] == -32600 and "shutting down" in after["error"]["message"]
        lsp.notify("exit", None)
        assert lsp.proc.wait(10) == 0
    finally:
        lsp.kill()


def test_positions_inside_surrogate_pairs(fuzzed: Fuzzed) -> None:
    """UTF-16 positions that split an astral character (two code units) are
    answered as a neighbouring boundary, never with an error or a lone
    surrogate in the answer."""
    lsp = fuzzed.lsp
    code = fuzzed.uri("emoji.py")
    lsp.open(code, "s = '😀😀'\nt = '𝄞x'\n")
    chat = fuzzed.uri("emoji.prompt.md")
    lsp.open(chat, "Look at 😀@fi and 😀/ex\n", language_id="agentls-chat")
    for character in range(0, 12):
        inline = lsp.request("textDocument/inlineCompletion", {
            "textDocument": {"uri": code}, "position": {"line": 0, "character": character},
            "context": {"triggerKind": 1}}, timeout=ANSWER_TIMEOUT)
        assert "result" in inline, inline
        completion = lsp.request("textDocument/completion", {
            "textDocument": {"uri": chat}, "position": {"line": 0, "character": character + 8}},
            timeout=ANSWER_TIMEOUT)
        assert "result" in completion, completion
        action = lsp.request("textDocument/codeAction", {
            "textDocument": {"uri": code},
            "range": {"start": {"line": 0, "character": 6},
                      "end": {"line": 1, "character": character}},
            "context": {"diagnostics": []}}, timeout=ANSWER_TIMEOUT)
        assert "result" in action, action
        for answer in (inline, completion, action):
            text = json.dumps(answer, ensure_ascii=False)
            assert not any(0xD800 <= ord(ch) <= 0xDFFF for ch in text), text
    fuzzed.probe()
