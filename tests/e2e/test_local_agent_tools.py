"""The embedded agent calls a tool with the default chat model, for real:
the packaged Qwen2.5-Coder-1.5B-Instruct (its own chat template, native
Hermes `<tool_call>` format) run by llama.cpp in the provider's child,
driven by the real server over LSP.

One short turn that needs one `read_file` call. Skipped, with the install
command, when the runtime or the packaged model is absent (CI installs
both). Slow by nature (a 1.1 GB model on CPU), so it is kept to one turn
with a small iteration limit and a generous timeout; no timing is asserted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.harness import LspProcess

local = pytest.importorskip("agentls.providers.local")

if local.runtime_error() is not None or local.installed_parts(local.DEFAULT_CHAT_MODEL) is None:
    pytest.skip(f"the local runtime or the default chat model ({local.DEFAULT_CHAT_MODEL}) is "
                f"not installed: {local.INSTALL_COMMAND}", allow_module_level=True)

pytestmark = pytest.mark.slow  # one real 1.1 GB model on the CPU (still run in CI)

SECRET = "PERIWINKLE"


def test_default_chat_model_reads_a_file_through_a_native_tool_call(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text(f"The secret word is {SECRET}.\n")
    # named-files off: with notes.txt attached to the prompt, the model
    # could answer without the call this test is about.
    settings = {"provider": "local", "session": {"maxIterations": 3},
                "features": {"disabled": ["named-files"]}}
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings) as lsp:
        # Reading needs no approval; anything else the model tries is refused.
        lsp.responder = lambda method, params: None
        turn = lsp.result("agentls/chat", {
            "prompt": "Use the read_file tool to read notes.txt, then tell me the secret word.",
        }, timeout=900)
        status = lsp.result("agentls/status", {}, timeout=60)
    chat_model = next(m for m in status["localModels"] if m["model"] == local.DEFAULT_CHAT_MODEL)
    assert chat_model["toolFormat"] == "hermes"  # the GGUF's own format, not the grammar
    messages = turn["messages"]
    calls = [call for m in messages if m["role"] == "assistant"
             for call in (m.get("metadata") or {}).get("tool_calls") or []]
    assert calls, f"no tool call: {messages}"
    first = calls[0]
    assert first["tool"] == "read_file", calls
    assert Path(str(first["arguments"].get("path", ""))).name == "notes.txt", calls
    results = [m for m in messages if m["role"] == "tool"]
    assert results and SECRET in str(results[0].get("toolResult") or results[0].get("content"))
    assert turn["status"] == "completed", (turn.get("error"), [
        (m["role"], str(m.get("content"))[:300]) for m in messages])
    answer = messages[-1]
    assert answer["role"] == "assistant" and answer["content"].strip(), messages
