"""Inline completion with provider `ollama` through the real server: whether
a model gets fill-in-the-middle (/api/generate with `suffix`) or a chat
prompt (/api/chat) is what the server's /api/show says, not the model's name.
The fake Ollama (tests/fakes/http_backend.py) answers /api/show per model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.http_backend import FakeBackend, RecordedRequest, Reply, json_reply, ndjson_reply
from tests.reliability.harness import LspProcess

DOC = "def area(r):\n    return \n\nprint(area(2))\n"
CAPABILITIES = {
    "my-coder:latest": ["completion", "insert"],  # no name pattern knows this tag
    "qwen2.5-coder:7b-instruct": ["completion", "tools"],  # a coder name, no suffix
}


def ndjson_line(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode() + b"\n"


def serve(backend: FakeBackend) -> None:
    def show(request: RecordedRequest) -> Reply:
        name = (request.json or {}).get("model")
        return json_reply({"template": "{{ .Prompt }}", "details": {"family": "qwen2"},
                           "capabilities": CAPABILITIES.get(str(name), ["completion"])})

    def generate(request: RecordedRequest) -> Reply:
        if (request.json or {}).get("stream") is False:  # the known-answer FIM probe
            return json_reply({"model": "m", "response": "lantern_id", "done": True})
        return ndjson_reply([
            ndjson_line({"model": "m", "response": "3.14 * r * r", "done": False}),
            ndjson_line({**done, "response": ""})])

    backend.respond("POST", "/api/show", show)
    done = {"model": "m", "done": True, "done_reason": "stop", "eval_count": 3}
    backend.respond("POST", "/api/generate", generate)
    backend.script("POST", "/api/chat", ndjson_reply([
        ndjson_line({"model": "m", "message": {"role": "assistant", "content": "3.14 * r * r"},
                     "done": False}),
        ndjson_line({**done, "message": {"role": "assistant", "content": ""}})]))


def complete(tmp_path: Path, backend: FakeBackend, model: str, **options: Any) -> list[str]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    settings = {"provider": "ollama", "baseUrl": backend.url, "model": model,
                "providerOptions": options, "inlineCompletion": {"debounceMs": 0}}
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings) as lsp:
        uri = (workspace / "area.py").as_uri()
        lsp.open(uri, DOC)
        answer = lsp.result("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": 1, "character": 11},
            "context": {"triggerKind": 1}}, timeout=60)
    items = answer["items"] if isinstance(answer, dict) else answer
    return [item["insertText"] for item in items]


def test_a_model_whose_server_says_insert_gets_fim(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    serve(fake_backend)
    assert complete(tmp_path, fake_backend, "my-coder:latest") == ["3.14 * r * r"]
    probe, sent = fake_backend.requests_to("/api/generate")
    assert probe.json["stream"] is False and sent.json["raw"] is False
    assert sent.json["suffix"] == "\n\nprint(area(2))\n" and sent.json["model"] == "my-coder:latest"
    assert fake_backend.requests_to("/api/show")[0].json == {"model": "my-coder:latest"}
    assert not fake_backend.requests_to("/api/chat")


@pytest.mark.parametrize(
    ("model", "options", "path"),
    [
        # No `insert`: the FIM template of the family the name says, raw.
        ("qwen2.5-coder:7b-instruct", {}, "/api/generate"),
        ("qwen2.5-coder:7b-instruct", {"fim": True}, "/api/generate"),  # the override wins
        ("my-coder:latest", {"fim": False}, "/api/chat"),
    ],
)
def test_no_insert_gets_the_template_and_the_fim_option_overrides(
    tmp_path: Path, fake_backend: FakeBackend, model: str, options: dict[str, Any], path: str
) -> None:
    serve(fake_backend)
    assert complete(tmp_path, fake_backend, model, **options) == ["3.14 * r * r"]
    other = "/api/chat" if path == "/api/generate" else "/api/generate"
    assert len(fake_backend.requests_to(path)) == 1 and not fake_backend.requests_to(other)
    if path == "/api/generate" and not options:
        (sent,) = fake_backend.requests_to(path)
        assert sent.json["raw"] is True and "suffix" not in sent.json
        assert sent.json["prompt"].startswith("<|fim_prefix|>def area(r):")
        assert "<|endoftext|>" in sent.json["options"]["stop"]
