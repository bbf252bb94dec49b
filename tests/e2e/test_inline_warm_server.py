"""A resting cursor warms the prompt on an engine of the user's own served
over HTTP (provider `openai` on a loopback llama-server, as bench_typing's
llama-server row runs it), through the real server; the fake speaks
llama-server's wire format (tests/fakes/fim_engines.py). A keystroke goes
before the warm-up: an HTTP engine serves one request at a time, so the
warm-up's connection is dropped, not waited for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes import fim_engines
from tests.fakes.fim_engines import FimModel
from tests.fakes.http_backend import FakeBackend, RecordedRequest
from tests.reliability.harness import LspProcess, wait_until

COMPLETIONS = "/v1/completions"
TEXT = "def double(x):\n    return \n\nprint(double(2))\n"
LINE, CHARACTER = 1, 11


def settings(backend: FakeBackend) -> dict[str, Any]:
    return {"provider": "openai", "baseUrl": backend.url + "/v1", "model": "model.gguf",
            "apiKeyEnv": "AGENTLS_E2E_NO_KEY", "inlineCompletion": {"debounceMs": 0}}


def is_warm_up(body: dict[str, Any]) -> bool:
    return body.get("max_tokens") == 1 and bool(body.get("stream"))


def warm_ups(backend: FakeBackend) -> list[RecordedRequest]:
    return [r for r in backend.requests_to(COMPLETIONS) if is_warm_up(r.json or {})]


def rest_and_type(lsp: LspProcess, uri: str) -> list[str]:
    answer = lsp.result("textDocument/inlineCompletion", {
        "textDocument": {"uri": uri}, "position": {"line": LINE, "character": CHARACTER},
        "context": {"triggerKind": 2}}, timeout=60)
    items = answer["items"] if isinstance(answer, dict) else answer
    return [item["insertText"] for item in items]


def test_a_resting_cursor_on_a_loopback_server_evaluates_the_keystrokes_prompt_ahead(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fim_engines.llama_cpp_server(fake_backend, FimModel())
    with LspProcess.start(state_dir=tmp_path / "state", workspace=tmp_path,
                          settings=settings(fake_backend)) as lsp:
        uri = (tmp_path / "double.py").as_uri()
        lsp.open(uri, TEXT)
        lsp.notify("agentls/didMoveCursor", {"textDocument": {"uri": uri},
                                             "position": {"line": LINE, "character": CHARACTER}})
        wait_until(lambda: lsp.result("agentls/status", {})["completions"]["warmed"] == 1,
                   "the warm-up at the cursor", 30)
        items = rest_and_type(lsp, uri)
    (warm,) = warm_ups(fake_backend)
    keystroke = [r for r in fake_backend.requests_to(COMPLETIONS)
                 if (r.json or {}).get("stream") and not is_warm_up(r.json or {})][-1]
    # The same prompt the keystroke then sent: llama-server's cache holds it.
    assert warm.json["prompt"] == keystroke.json["prompt"]
    assert "def double(x):\n    <|fim_suffix|>" in warm.json["prompt"]
    assert warm.json["prompt"].endswith("<|fim_middle|>return ")  # the line's code, last
    assert items == ["x * 2"]


def test_a_keystroke_drops_the_warm_up_the_server_is_still_evaluating(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    # The warm-up is a long window still being evaluated when the key comes.
    fim_engines.llama_cpp_server(fake_backend, FimModel(), busy=is_warm_up)
    with LspProcess.start(state_dir=tmp_path / "state", workspace=tmp_path,
                          settings=settings(fake_backend)) as lsp:
        uri = (tmp_path / "double.py").as_uri()
        lsp.open(uri, TEXT)
        lsp.notify("agentls/didMoveCursor", {"textDocument": {"uri": uri},
                                             "position": {"line": LINE, "character": CHARACTER}})
        wait_until(lambda: bool(warm_ups(fake_backend)), "the warm-up request", 30)
        items = rest_and_type(lsp, uri)
        (warm,) = warm_ups(fake_backend)
        assert fake_backend.wait_for_disconnect(warm, timeout=10), "the warm-up kept its connection"
        status = lsp.result("agentls/status", {})
    assert items == ["x * 2"]
    assert status["completions"]["warmed"] == 0  # dropped, not counted as evaluated ahead
