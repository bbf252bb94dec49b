"""The completion after a suggestion, asked ahead (features/inline_completion/
flights.py): the real server over LSP against a loopback OpenAI-style FIM
backend. Accepting the suggestion is answered from the work ahead, with no
new model call; typing something else hangs up on it at once; off (the
default) it never asks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakes.http_backend import SSE_DONE, FakeBackend, Pause, openai_chunk, sse, sse_reply
from tests.reliability.harness import LspProcess

COMPLETIONS = "/v1/completions"
TEXT = "def area(r):\n    return \n\nprint(area(2))\n"
FIRST = "3.14 * r * r"


def fill(text: str, pause: float = 0.0, pieces: int = 1) -> Any:
    parts = [c for _ in range(pieces) for c in (Pause(pause), sse(openai_chunk(text=text)))]
    return sse_reply([*parts, sse(openai_chunk(text="", finish_reason="stop")), SSE_DONE])


def settings(backend: FakeBackend, speculative: bool | None) -> dict[str, Any]:
    inline: dict[str, Any] = {"debounceMs": 0}
    if speculative is not None:
        inline["speculative"] = speculative
    return {"provider": "openai", "baseUrl": backend.url + "/v1",
            "model": "qwen2.5-coder-1.5b", "apiKeyEnv": "AGENTLS_E2E_NO_KEY",
            "providerOptions": {"fim": True}, "inlineCompletion": inline}


def ask(lsp: LspProcess, uri: str, line: int, character: int) -> list[str]:
    answer = lsp.result("textDocument/inlineCompletion", {
        "textDocument": {"uri": uri}, "position": {"line": line, "character": character},
        "context": {"triggerKind": 2}}, timeout=30)
    return [item["insertText"] for item in answer["items"]]


def insert(lsp: LspProcess, uri: str, version: int, line: int, character: int,
           text: str) -> None:
    lsp.notify("textDocument/didChange", {
        "textDocument": {"uri": uri, "version": version},
        "contentChanges": [{"range": {"start": {"line": line, "character": character},
                                      "end": {"line": line, "character": character}},
                            "text": text}]})


def sent(request: Any) -> str:
    return json.dumps(request.json)


def test_an_accepted_suggestion_is_followed_by_the_one_asked_ahead(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    # The second reply is slow: the editor's request after the accept comes
    # while the work ahead still runs, and waits for it instead of asking.
    fake_backend.script("POST", COMPLETIONS, fill(FIRST), fill(" + 1", 0.1, 5))
    with LspProcess.start(state_dir=tmp_path / "state", workspace=tmp_path,
                          settings=settings(fake_backend, True)) as lsp:
        uri = (tmp_path / "area.py").as_uri()
        lsp.open(uri, TEXT)
        assert ask(lsp, uri, 1, 11) == [FIRST]
        _, ahead = fake_backend.wait_for_requests(2, timeout=30)
        assert "return 3.14 * r * r" in sent(ahead)  # the document once accepted
        insert(lsp, uri, 2, 1, 11, FIRST)  # Tab
        assert ask(lsp, uri, 1, 11 + len(FIRST)) == [" + 1 + 1 + 1 + 1 + 1"]
        assert len(fake_backend.requests) == 2  # no model call for it


def test_typing_something_else_hangs_up_on_the_work_ahead(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", COMPLETIONS, fill(FIRST), fill("x", 0.1, 40), fill("adius"))
    with LspProcess.start(state_dir=tmp_path / "state", workspace=tmp_path,
                          settings=settings(fake_backend, True)) as lsp:
        uri = (tmp_path / "area.py").as_uri()
        lsp.open(uri, TEXT)
        assert ask(lsp, uri, 1, 11) == [FIRST]
        _, ahead = fake_backend.wait_for_requests(2, timeout=30)
        insert(lsp, uri, 2, 1, 11, "r")  # not the suggestion
        assert ask(lsp, uri, 1, 12) == ["adius"]
        # Gone long before its four seconds of stream were over.
        assert fake_backend.wait_for_disconnect(ahead, 2.0)
        third = fake_backend.requests[2]
        assert "return r" in sent(third) and "3.14" not in sent(third)


def test_nothing_is_asked_ahead_unless_the_user_says_so(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", COMPLETIONS, fill(FIRST), fill("adius"))
    with LspProcess.start(state_dir=tmp_path / "state", workspace=tmp_path,
                          settings=settings(fake_backend, None)) as lsp:
        uri = (tmp_path / "area.py").as_uri()
        lsp.open(uri, TEXT)
        assert ask(lsp, uri, 1, 11) == [FIRST]
        insert(lsp, uri, 2, 1, 11, "r")
        assert ask(lsp, uri, 1, 12) == ["adius"]
        # The backend's second request is the user's, not one asked ahead.
        _, second = fake_backend.wait_for_requests(2, timeout=30)
        assert len(fake_backend.requests) == 2
        assert "return r" in sent(second) and "3.14" not in sent(second)
