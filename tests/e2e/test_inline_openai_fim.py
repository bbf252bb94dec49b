"""Inline completion with provider `openai` through the real server: which
prompt form a model gets (the server's own FIM with `suffix`, the model's
FIM template in a raw prompt, the prefix alone, or chat prompts) is what the
server shows (fim_probe.py: a known-answer probe, its tokenizer), and
agentls/status says which and why. The fakes (tests/fakes/http_backend.py,
fim_engines.py) speak OpenAI's wire format, the errors real servers send
and the engines' FIM quirks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fakes import fim_engines
from tests.fakes.fim_engines import FimModel
from tests.fakes.http_backend import (
    SSE_DONE,
    FakeBackend,
    Reply,
    error_reply,
    openai_chunk,
    sse,
    sse_reply,
)
from tests.reliability.harness import LspProcess, wait_until

COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"
DOCS = {  # three documents, so no answer comes from the type-ahead cache
    "area.py": ("def area(r):\n    return \n\nprint(area(2))\n", 1, 11),
    "double.py": ("def double(x):\n    return \n\nprint(double(2))\n", 1, 11),
    "half.py": ("def half(x):\n    return \n\nprint(half(2))\n", 1, 11),
}


def serve(backend: FakeBackend, completions: Reply) -> None:
    backend.script("POST", COMPLETIONS, completions)
    backend.script("POST", CHAT, sse_reply([
        sse(openai_chunk("x * 2", finish_reason="stop")), SSE_DONE]))


def fim_stream() -> Reply:
    return sse_reply([sse(openai_chunk(text="x * 2", finish_reason="stop")), SSE_DONE])


def run(tmp_path: Path, backend: FakeBackend, model: str, docs: int = 1,
        **options: Any) -> tuple[list[list[str]], list[str], dict[str, Any]]:
    """Inline completions in `docs` documents; (items per request, the
    messages shown, agentls/status)."""
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    settings = {"provider": "openai", "baseUrl": backend.url + "/v1", "model": model,
                "apiKeyEnv": "AGENTLS_E2E_NO_KEY", "providerOptions": options,
                "inlineCompletion": {"debounceMs": 0}}
    answers = []
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings) as lsp:
        for name, (text, line, character) in list(DOCS.items())[:docs]:
            uri = (workspace / name).as_uri()
            lsp.open(uri, text)
            answer = lsp.result("textDocument/inlineCompletion", {
                "textDocument": {"uri": uri}, "position": {"line": line, "character": character},
                "context": {"triggerKind": 1}}, timeout=60)
            items = answer["items"] if isinstance(answer, dict) else answer
            answers.append([item["insertText"] for item in items])
        status = lsp.result("agentls/status", {}, timeout=30)
        shown = lsp.shown_messages()
    return answers, shown, status


def test_a_server_whose_suffix_fim_passes_the_probe_gets_it_for_any_model_name(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fim_engines.fim_server(fake_backend, FimModel())
    answers, shown, status = run(tmp_path, fake_backend, "my-coder:latest", docs=2)
    assert answers == [["x * 2"], ["x * 2"]]
    probe, *sent = fake_backend.requests_to(COMPLETIONS)
    assert probe.json["stream"] is False and probe.json["suffix"]
    assert len(sent) == 2 and not fake_backend.requests_to(CHAT)
    assert sent[0].json["model"] == "my-coder:latest"
    assert sent[0].json["prompt"].endswith("    return ")
    assert sent[0].json["suffix"] == "\n\nprint(area(2))\n"
    # a low temperature: the likeliest fill, not the server's default sampling
    assert sent[0].json["temperature"] == 0.1
    plan = status["fim"]["models"]["my-coder:latest"]
    assert plan["form"] == "suffix" and "probe" in plan["why"]
    assert status["fim"]["probes"] == 1
    assert "fim" in status["provider"]["capabilities"]
    assert not shown


def test_llama_cpp_python_ignoring_the_suffix_gets_the_models_fim_template(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    """The issue's case: llama-cpp-python accepts `suffix` but builds its
    FIM prompt with padding tokens; the probe shows it, and the model's own
    FIM tokens go in a raw prompt instead."""
    model = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    fim_engines.llama_cpp_python(fake_backend, FimModel(), model)
    answers, shown, status = run(tmp_path, fake_backend, model, docs=2)
    assert answers == [["x * 2"], ["x * 2"]]
    _, *sent = fake_backend.requests_to(COMPLETIONS)
    assert all("suffix" not in r.json for r in sent)
    assert sent[0].json["prompt"].startswith("<|fim_prefix|>")
    assert sent[0].json["prompt"].endswith(
        "    <|fim_suffix|>\n\nprint(area(2))\n<|fim_middle|>return ")
    assert "<|endoftext|>" in sent[0].json["stop"]
    plan = status["fim"]["models"][model]
    assert plan["form"] == "template" and plan["family"] == "qwen2.5-coder"
    assert "does not fill by it" in plan["why"]
    assert not shown


def test_a_server_without_completions_gets_chat_after_one_probe(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    # A coder name a name pattern would have sent to /completions.
    serve(fake_backend, error_reply(404, "This is a chat model and not supported in the "
                                         "v1/completions endpoint."))
    answers, shown, status = run(tmp_path, fake_backend, "qwen2.5-coder-7b-instruct", docs=3)
    assert answers == [["x * 2"]] * 3  # the probed request too: no error reaches the user
    assert len(fake_backend.requests_to(COMPLETIONS)) == 1
    assert len(fake_backend.requests_to(CHAT)) == 3
    assert "messages" in fake_backend.requests_to(CHAT)[0].json
    assert status["fim"]["models"]["qwen2.5-coder-7b-instruct"]["form"] == "none"
    assert not shown


def test_an_auth_failure_is_reported_and_not_taken_as_no_fim(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    serve(fake_backend, error_reply(401, "Incorrect API key provided: sk-...",
                                    type="invalid_request_error"))
    answers, shown, status = run(tmp_path, fake_backend, "my-coder:latest", docs=2)
    assert answers == [[], []]
    wait_until(lambda: shown, "the error shown")
    assert any("authentication" in m.lower() or "401" in m for m in shown), shown
    # Not taken as "no raw completion": the probe, then each request asked
    # /completions (the prefix alone for now), never chat; the probe is due
    # again later.
    assert len(fake_backend.requests_to(COMPLETIONS)) == 3 and not fake_backend.requests_to(CHAT)
    plan = status["fim"]["models"]["my-coder:latest"]
    assert plan["form"] == "continuation" and "asked again" in plan["why"]


@pytest.mark.parametrize(("option", "path"), [(True, COMPLETIONS), (False, CHAT)])
def test_the_fim_option_overrides_the_server(
    tmp_path: Path, fake_backend: FakeBackend, option: bool, path: str
) -> None:
    serve(fake_backend, fim_stream())
    answers, _, status = run(tmp_path, fake_backend, "any-model", docs=2, fim=option)
    assert answers == [["x * 2"], ["x * 2"]]
    other = CHAT if path == COMPLETIONS else COMPLETIONS
    assert len(fake_backend.requests_to(path)) == 2 and not fake_backend.requests_to(other)
    assert not fake_backend.requests_to("/props")
    assert status["fim"]["setting"] is option


def imported_modules(stderr: Path) -> set[str]:
    """The modules a server run with PYTHONPROFILEIMPORTTIME has imported so
    far: CPython lists each import statement's module on stderr as it
    finishes (not those loaded by importlib.import_module, such as entry
    points, though their own imports are listed)."""
    names = set()
    for line in stderr.read_text(errors="replace").splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def test_an_inline_completion_session_imports_no_pydantic(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    """The keystroke path stays off pydantic (its import alone costs the first
    completion ~75 ms and ~6 MiB; bench/bench_startup.py): the
    settings, the provider, the FIM stream and the inline feature; and so do
    the features loaded after the first completion (MCP without servers, the
    tools), so a session that only completes stays small. The first thing that
    needs a pydantic model (here agentls/status, which reports the provider's
    ProviderInfo) imports it, and this test sees that too."""
    fim_engines.fim_server(fake_backend, FimModel())
    workspace = tmp_path / "ws"
    workspace.mkdir()
    stderr = tmp_path / "stderr.txt"
    settings = {"provider": "openai", "baseUrl": fake_backend.url + "/v1",
                "model": "my-coder:latest", "apiKeyEnv": "AGENTLS_E2E_NO_KEY",
                "inlineCompletion": {"debounceMs": 0}}

    def pydantic_modules() -> list[str]:
        return sorted(name for name in imported_modules(stderr)
                      if name.split(".")[0] in ("pydantic", "pydantic_core"))

    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace, settings=settings,
                          stderr_file=stderr, env={"PYTHONPROFILEIMPORTTIME": "1"}) as lsp:
        for number, name in enumerate(("area.py", "double.py")):
            text, line, character = DOCS[name]
            uri = (workspace / name).as_uri()
            lsp.open(uri, text)
            answer = lsp.result("textDocument/inlineCompletion", {
                "textDocument": {"uri": uri},
                "position": {"line": line, "character": character},
                "context": {"triggerKind": 1}}, timeout=60)
            assert [item["insertText"] for item in answer["items"]] == ["x * 2"]
            assert {"agentls.providers.http.client",
                    "agentls.core.settings.load"} <= imported_modules(stderr)
            assert not pydantic_modules(), pydantic_modules()
            if number == 0:
                # The features load once the first completion was answered.
                wait_until(lambda: {"agentls.core.plugins.feature_host",
                                    "agentls.features.mcp.feature",
                                    "agentls.features.tools"} <= imported_modules(stderr),
                           "the features loaded")
        assert len(fake_backend.requests_to(COMPLETIONS)) == 3  # the probe, two completions
        assert not fake_backend.requests_to(CHAT)
        lsp.result("agentls/status", {}, timeout=30)
        wait_until(lambda: "pydantic" in imported_modules(stderr), "pydantic imported for status")
