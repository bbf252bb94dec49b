"""A superseded inline completion closes its HTTP stream at once, however
the client cancels it: VS Code sends $/cancelRequest for the older request
and then the newer one (which supersedes it as well), other clients the
other way round or not at all. Cancelled twice, the stream's close used to
be interrupted: the connection stayed open and a local engine went on
generating the superseded suggestion while the newer ones queued behind it.
The real server, over LSP, against a loopback backend that streams slowly
and records when its client hangs up."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.http_backend import SSE_DONE, FakeBackend, Pause, openai_chunk, sse, sse_reply
from tests.reliability.harness import LspProcess

COMPLETIONS = "/v1/completions"
TEXT = "def area(r):\n    return \n\nprint(area(2))\n"


def slow_fill() -> object:
    """Forty pieces a tenth of a second apart: four seconds of stream."""
    pieces = [c for _ in range(40) for c in (Pause(0.1), sse(openai_chunk(text="x")))]
    return sse_reply([*pieces, sse(openai_chunk(text="", finish_reason="stop")), SSE_DONE])


@pytest.mark.parametrize("order", ["cancel-then-newer", "newer-then-cancel", "newer-only"])
def test_a_superseded_request_hangs_up_on_the_backend(
    tmp_path: Path, fake_backend: FakeBackend, order: str
) -> None:
    for _ in range(3):
        fake_backend.script("POST", COMPLETIONS, slow_fill())
    settings = {"provider": "openai", "baseUrl": fake_backend.url + "/v1",
                "model": "qwen2.5-coder-1.5b", "apiKeyEnv": "AGENTLS_E2E_NO_KEY",
                "providerOptions": {"fim": True}, "inlineCompletion": {"debounceMs": 0}}
    with LspProcess.start(state_dir=tmp_path / "state", workspace=tmp_path,
                          settings=settings) as lsp:
        uri = (tmp_path / "area.py").as_uri()
        lsp.open(uri, TEXT)
        first = lsp.request_async("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": 1, "character": 11},
            "context": {"triggerKind": 2}}, msg_id=501)
        (streaming,) = fake_backend.wait_for_requests(1, timeout=30)

        def cancel() -> None:
            lsp.notify("$/cancelRequest", {"id": 501})

        def newer() -> None:
            lsp.notify("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": 2},
                "contentChanges": [{"range": {"start": {"line": 1, "character": 11},
                                              "end": {"line": 1, "character": 11}},
                                    "text": "r"}]})
            lsp.request_async("textDocument/inlineCompletion", {
                "textDocument": {"uri": uri}, "position": {"line": 1, "character": 12},
                "context": {"triggerKind": 2}}, msg_id=502)

        steps = {"cancel-then-newer": (cancel, newer), "newer-then-cancel": (newer, cancel),
                 "newer-only": (newer,)}[order]
        for step in steps:
            step()
        answer = lsp.wait(first, 10, "the superseded request")
        # Answered at once (no items, or RequestCancelled), and the backend saw it go
        # long before its four seconds of stream were over.
        assert answer.get("error", {}).get("code") == -32800 or not answer["result"]["items"]
        assert fake_backend.wait_for_disconnect(streaming, 2.0), order
