"""Switching the local model through the real server and real llama.cpp
children: the model that serves keeps serving (inline completions and chat)
while the newly chosen one loads, and for good when the new one fails (a
truncated GGUF); the switch happens once the new child answers, and only
then is the previous child stopped. A `model` change rebuilds the provider:
the serving child is handed over, not stopped and loaded again."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import LocalModelEditor
from tests.reliability.harness import LspProcess, wait_until

local = pytest.importorskip("agentls.providers.local")

SKIP = None
if local.runtime_error() is not None or local.gemma3_chunk_paths() is None:
    SKIP = (f"the local model runtime or Gemma (a dev fixture) is not installed: "
            f"{local.INSTALL_COMMAND}")
elif not all(local.installed_parts(m) for m in (local.DEFAULT_CHAT_MODEL,
                                                  local.DEFAULT_COMPLETION_MODEL)):
    SKIP = f"the default local models are not installed: {local.INSTALL_COMMAND}"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(SKIP is not None, reason=SKIP or "")]

PROGRESS_CLIENT = {"window": {"workDoneProgress": True}}


@pytest.fixture(scope="module")
def gemma() -> Path:
    return Path(local.locate_model_file(local.GEMMA3))


def truncated_copy(gemma: Path, target: Path) -> Path:
    """The first 2 MB of a real GGUF: the header is fine, the tensors are
    not there (a download cut short)."""
    with gemma.open("rb") as source:
        target.write_bytes(source.read(2_000_000))
    return target


def answered(turn: dict[str, Any]) -> bool:
    """The model answered (a tool call cut short by maxIterations counts)."""
    return turn["status"] != "failed" or turn["error"]["code"] == "max_iterations"


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def test_inline_completion_model_switch(tmp_path: Path, gemma: Path) -> None:
    """inlineCompletion.model: a truncated GGUF never takes over (told
    once, tried once); a good one takes over once loaded, and the previous
    child is stopped then."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    broken = truncated_copy(gemma, tmp_path / "cut-short.gguf")
    good = tmp_path / "my-model.gguf"
    shutil.copyfile(gemma, good)
    base = {"provider": "local", "inlineCompletion": {"debounceMs": 0}}
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace, settings=base,
                          capabilities=PROGRESS_CLIENT) as lsp:
        editor = LocalModelEditor(lsp, workspace)
        editor.complete()
        first = editor.models()[local.DEFAULT_COMPLETION_MODEL]
        editor.settings({**base, "inlineCompletion": {"debounceMs": 0, "model": str(broken)}})
        editor.complete()  # answered by the running model meanwhile, no error
        shown = wait_until(lambda: editor.errors_naming("cut-short"), "the failure, named", 120)
        editor.complete()
        editor.complete()
        still = editor.models()
        serving = still[local.DEFAULT_COMPLETION_MODEL]
        assert serving["pid"] == first["pid"] and serving["starts"] == 1
        assert "cut-short" not in still
        assert len([v for v in editor.progress("Loading cut-short") if v["kind"] == "begin"]) == 1
        assert len(editor.errors_naming("cut-short")) == 1  # told once

        editor.settings({**base, "inlineCompletion": {"debounceMs": 0, "model": str(good)}})
        editor.complete()
        wait_until(lambda: any(v["kind"] == "end" for v in editor.progress("Loading my-model")),
                   "the new model loaded", 120)
        editor.complete()
        after = editor.models()
        wait_until(lambda: not alive(first["pid"]), "the previous child stopped", 30)
    assert "cut-short" in shown[0] and "truncated or corrupt" in shown[0]
    # The default completion model (Qwen2.5-Coder 0.5B, docs/local-model.md; was Gemma).
    assert f"{local.DEFAULT_COMPLETION_MODEL} keeps serving completion" in shown[0]
    assert "inlineCompletion.model" in shown[0]
    assert set(after) == {"my-model"} and after["my-model"]["gguf"] == str(good)


def test_chat_model_switch_keeps_the_serving_child(tmp_path: Path, gemma: Path) -> None:
    """`model` rebuilds the provider: the chat child is handed over (same
    pid, loaded once) and keeps answering turns when the new model fails."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    broken = truncated_copy(gemma, tmp_path / "cut-short-chat.gguf")
    # One short model call per turn: what is tested is who answers, not the answer.
    base = {"provider": "local", "session": {"maxOutputTokens": 32, "maxIterations": 1}}
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace, settings=base,
                          capabilities=PROGRESS_CLIENT) as lsp:
        editor = LocalModelEditor(lsp, workspace)
        turn = lsp.result("agentls/chat", {"prompt": "Say hello."}, timeout=180)
        assert answered(turn), turn
        (chat_model,) = editor.models()
        before = editor.models()[chat_model]
        editor.settings({**base, "model": str(broken)})
        again = lsp.result("agentls/chat", {"prompt": "Say hello again."}, timeout=180)
        shown = wait_until(lambda: editor.errors_naming("cut-short-chat"), "the failure", 120)
        after = editor.models()
    assert answered(again), again
    assert after[chat_model]["pid"] == before["pid"] and after[chat_model]["starts"] == 1
    assert "keeps serving chat" in shown[0] and "`model`" in shown[0]
