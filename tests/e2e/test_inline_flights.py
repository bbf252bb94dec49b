"""A model call outlives its request while the user types what it streams
(features/inline_completion/flights.py): the real server over LSP against a
loopback OpenAI-style FIM backend that streams slowly. VS Code's order, the
older request cancelled and then the newer one sent, keeps the stream when
the typed characters agree with it (one model call, and the answer is its
rest), and hangs up on it when they do not."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.fakes.http_backend import SSE_DONE, FakeBackend, Pause, openai_chunk, sse, sse_reply
from tests.reliability.harness import LspProcess

COMPLETIONS = "/v1/completions"
TEXT = "def area(r):\n    return \n\nprint(area(2))\n"
PIECES = ["3", ".14", " *", " r", " *", " r"]


def slow_fill(pieces: list[str], pause: float = 0.3, at_once: int = 0) -> Any:
    """The first `at_once` pieces at once, then one each `pause` seconds."""
    parts = [c for n, piece in enumerate(pieces)
             for c in (Pause(0.0 if n < at_once else pause), sse(openai_chunk(text=piece)))]
    return sse_reply([*parts, sse(openai_chunk(text="", finish_reason="stop")), SSE_DONE])


def settings(backend: FakeBackend, partial_ms: int = 0) -> dict[str, Any]:
    """The whole answer is waited for unless `partial_ms` says otherwise."""
    return {"provider": "openai", "baseUrl": backend.url + "/v1",
            "model": "qwen2.5-coder-1.5b", "apiKeyEnv": "AGENTLS_E2E_NO_KEY",
            "providerOptions": {"fim": True},
            "inlineCompletion": {"debounceMs": 0, "showPartialAfterMs": partial_ms}}


def keystroke(lsp: LspProcess, uri: str, old_id: int, new_id: int, typed: str,
              version: int, character: int) -> Any:
    """VS Code's order: cancel the older request, change the text, ask again."""
    lsp.notify("$/cancelRequest", {"id": old_id})
    lsp.notify("textDocument/didChange", {
        "textDocument": {"uri": uri, "version": version},
        "contentChanges": [{"range": {"start": {"line": 1, "character": character},
                                      "end": {"line": 1, "character": character}},
                            "text": typed}]})
    return lsp.request_async("textDocument/inlineCompletion", {
        "textDocument": {"uri": uri},
        "position": {"line": 1, "character": character + len(typed)},
        "context": {"triggerKind": 2}}, msg_id=new_id)


def first_request(lsp: LspProcess, uri: str) -> Any:
    return lsp.request_async("textDocument/inlineCompletion", {
        "textDocument": {"uri": uri}, "position": {"line": 1, "character": 11},
        "context": {"triggerKind": 2}}, msg_id=601)


def test_typing_what_the_model_streams_keeps_its_stream(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", COMPLETIONS, slow_fill(PIECES, 0.5, at_once=2),
                        slow_fill(["never"]))
    with LspProcess.start(state_dir=tmp_path / "state", workspace=tmp_path,
                          settings=settings(fake_backend)) as lsp:
        uri = (tmp_path / "area.py").as_uri()
        lsp.open(uri, TEXT)
        first = first_request(lsp, uri)
        fake_backend.wait_for_requests(1, timeout=30)
        # "3.14" streams at once, the rest half a second a piece: the user
        # types "3." meanwhile, and the rest comes from the same stream.
        time.sleep(0.25)  # for "3.14" to cross the loopback (if it has not, this fails)
        second = keystroke(lsp, uri, 601, 602, "3.", 2, 11)
        answer = lsp.wait(second, 10, "the request typed into the stream")
        lsp.wait(first, 10, "the cancelled request")
    assert [item["insertText"] for item in answer["result"]["items"]] == ["14 * r * r"]
    assert len(fake_backend.requests) == 1  # no second model call


def test_typing_something_else_hangs_up_on_the_stream(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", COMPLETIONS, slow_fill(PIECES), slow_fill(["adius"], 0.0))
    with LspProcess.start(state_dir=tmp_path / "state", workspace=tmp_path,
                          settings=settings(fake_backend)) as lsp:
        uri = (tmp_path / "area.py").as_uri()
        lsp.open(uri, TEXT)
        first_request(lsp, uri)
        (streaming,) = fake_backend.wait_for_requests(1, timeout=30)
        second = keystroke(lsp, uri, 601, 602, "r", 2, 11)
        answer = lsp.wait(second, 10, "the request after another key")
        assert fake_backend.wait_for_disconnect(streaming, 2.0)
    assert [item["insertText"] for item in answer["result"]["items"]] == ["adius"]


def test_a_slow_answer_is_shown_in_part_and_the_next_keys_get_its_rest(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    """Past showPartialAfterMs the request is answered with what streamed so
    far; the stream runs on, and a key typed into that part is answered
    from the same model call."""
    fake_backend.script("POST", COMPLETIONS, slow_fill(PIECES, 0.4, at_once=2),
                        slow_fill(["never"]))
    with LspProcess.start(state_dir=tmp_path / "state", workspace=tmp_path,
                          settings=settings(fake_backend, partial_ms=200)) as lsp:
        uri = (tmp_path / "area.py").as_uri()
        lsp.open(uri, TEXT)
        first = first_request(lsp, uri)
        answer = lsp.wait(first, 10, "the request answered in part")
        assert [item["insertText"] for item in answer["result"]["items"]] == ["3.14"]
        second = keystroke(lsp, uri, 601, 602, "3.", 2, 11)
        rest = lsp.wait(second, 10, "the key typed into the part")
        latency = lsp.result("agentls/status", {})["completions"]["latency"]
    # What the stream holds 200 ms after the key, less the typed "3.": its
    # rest so far (more pieces may have come meanwhile).
    (shown,) = [item["insertText"] for item in rest["result"]["items"]]
    assert shown.startswith("14") and "14 * r * r".startswith(shown)
    assert len(fake_backend.requests) == 1  # no second model call
    assert latency["answers"] == 2 and latency["partial"] >= 1  # agentls/status counts the parts
