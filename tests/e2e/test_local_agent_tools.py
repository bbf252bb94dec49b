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

import importlib
import json
import shutil
import sys
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentls.eval.agent.runner import seen_evaluated
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
    # could answer without the call this test is about. Tool-call edits:
    # this test is about the model's own call (in file-blocks mode, the
    # default for local models, the 1.5B may "write" notes.txt instead and
    # agentls reads it for it: tests/e2e/test_reply_edits.py).
    settings = {"provider": "local", "session": {"maxIterations": 3, "editFormat": "tool-calls"},
                "features": {"disabled": ["named-files"]}}
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings) as lsp:
        # Reading needs no approval; anything else the model tries is refused.
        lsp.responder = lambda method, params: None
        turn = lsp.result("agentls/chat", {
            "prompt": "Use the read_file tool to read notes.txt, then tell me the secret word.",
        }, timeout=900)
        status = lsp.result("agentls/status", {}, timeout=60)
        chat_model = next(m for m in status["localModels"]
                          if m["model"] == local.DEFAULT_CHAT_MODEL)
        with urllib.request.urlopen(chat_model["engineCounters"], timeout=10) as answer:
            records = sorted(json.load(answer)["requests"], key=lambda r: r["id"])
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
    # The engine's own counters: each call after the first found the call
    # before it (its prompt and its reply, the tool call as the model wrote
    # it) in llama.cpp's prompt cache and evaluated only what is new after it.
    # Here the first call streams until the model opens its tool call and
    # the second decodes the call under the tools' grammar from the prompt
    # plus the opener (constrained.py); seen run: 1,704 prompt tokens, then
    # 2 and 29 evaluated, of which 2 and 1 the engine had held (the opener,
    # and a reply's last token, which llama.cpp never evaluates).
    chat_calls = [r for r in records if r["generated"]]
    assert len(chat_calls) >= 2, records
    seen = seen_evaluated(chat_calls)
    assert all(n <= 2 for n in seen), (seen, [
        {k: r[k] for k in ("prompt_evaluated", "prompt_kept", "generated")} for r in chat_calls])


# A client that asks the user in messages and applies edits (message mode).
MESSAGE_MODE = {"window": {"showMessage": {"messageActionItem": {}}},
                "workspace": {"applyEdit": True,
                              "workspaceEdit": {"documentChanges": True,
                                                "resourceOperations": ["create"]}}}
GREET = 'def hello(name):\n    return "Hello, " + name + "!"\n'


def allowing_editor(workspace: Path, asked: list[str]) -> Callable[[str, Any], Any]:
    """An editor that answers every question Allow (recording it in `asked`)
    and applies every edit to the files of `workspace`."""

    def editor(method: str, params: Any) -> Any:
        if method == "window/showMessageRequest":
            asked.append(params["message"])
            return {"title": "Allow once"}
        if method == "workspace/applyEdit":
            for change in params["edit"]["documentChanges"]:
                path = workspace / Path(change["textDocument"]["uri"]).name
                path.write_text(_apply(path.read_text(), change["edits"]))
            return {"applied": True}
        return None

    return editor


def _apply(text: str, edits: list[dict[str, Any]]) -> str:
    """LSP text edits on ASCII text (UTF-16 units are characters here)."""
    starts = [0, *(i + 1 for i, c in enumerate(text) if c == "\n")]

    def offset(position: dict[str, int]) -> int:
        line = position["line"]
        return (starts[line] if line < len(starts) else len(text)) + position["character"]

    for edit in sorted(edits, key=lambda e: offset(e["range"]["start"]), reverse=True):
        text = (text[:offset(edit["range"]["start"])] + edit["newText"]
                + text[offset(edit["range"]["end"]):])
    return text


def test_default_chat_model_writes_a_change_in_its_reply_which_is_approved_and_applied(
        tmp_path: Path) -> None:
    """The default edit format for local models (session.editFormat auto ->
    file-blocks): the 1.5B writes greet.py with the new function in its
    reply, the user is asked, the editor applies the edit, the code runs."""
    # The same folder on every run, so the model sees the same prompt.
    workspace = Path(tempfile.gettempdir()) / "agentls-e2e-reply-edit" / "ws"
    shutil.rmtree(workspace.parent, ignore_errors=True)
    workspace.mkdir(parents=True)
    greet = workspace / "greet.py"
    greet.write_text(GREET)
    asked: list[str] = []
    editor = allowing_editor(workspace, asked)

    # A fixed workspace path and sampler seed give the same prompt and reply on
    # every run: the test shows the path (reply -> approval -> edit -> code
    # runs), not the model's odds. Those are poor: with today's file-blocks
    # instructions seeds 1, 2 and 3 did not add the function, seed 5 did (the
    # seed moves with the system prompt; bench/README.md, agent tasks).
    settings = {"provider": "local", "session": {"maxIterations": 3},
                "providerOptions": {"seed": 5}}
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings, capabilities=MESSAGE_MODE) as lsp:
        lsp.responder = editor
        status = lsp.result("agentls/status", {}, timeout=60)
        turn = lsp.result("agentls/chat", {
            "prompt": "Add a function farewell(name) to greet.py that returns 'Bye, ' + name + "
                      "'!'. Keep hello as it is.",
        }, timeout=900)
    assert status["editFormat"] == "file-blocks"
    shown = [(m["role"], str(m.get("content"))[:400]) for m in turn["messages"]]
    assert asked and "greet.py" in asked[0], (asked, shown)
    namespace: dict[str, Any] = {}
    exec(compile(greet.read_text(), "greet.py", "exec"), namespace)  # the model's code runs
    assert namespace["hello"]("Ada") == "Hello, Ada!", greet.read_text()
    assert namespace["farewell"]("Ada") == "Bye, Ada!", (greet.read_text(), shown)
    reply = next(m for m in turn["messages"] if m["role"] == "assistant"
                 and (m.get("metadata") or {}).get("reply_edits"))
    assert reply["metadata"]["tool_calls"][0]["tool"] == "write_file"


QUICK_START = Path(__file__).resolve().parents[2] / "examples" / "sample-workspace"


def test_the_quick_start_request_finishes_cheapest_in_the_sample_workspace(
        tmp_path: Path) -> None:
    """The request examples/sample-workspace/README.md suggests, with the
    packaged 1.5B and default settings: the agent writes cheapest() in
    main.py, the user allows it, and the function works. Seeds 1, 2 and 5
    all did it here; the test pins one so its prompt and reply are the same
    on every run."""
    workspace = Path(tempfile.gettempdir()) / "agentls-e2e-quickstart" / "ws"
    shutil.rmtree(workspace.parent, ignore_errors=True)
    shutil.copytree(QUICK_START, workspace)
    editor = allowing_editor(workspace, [])

    settings = {"provider": "local", "providerOptions": {"seed": 1}}
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings, capabilities=MESSAGE_MODE) as lsp:
        lsp.responder = editor
        turn = lsp.result("agentls/chat", {"prompt": QUICK_START_REQUEST}, timeout=900)
    shown = [(m["role"], str(m.get("content"))[:400]) for m in turn["messages"]]
    namespace: dict[str, Any] = {}
    sys.path.insert(0, str(workspace))
    try:
        sys.modules.pop("inventory", None)  # the sample's, not another test's
        exec(compile((workspace / "main.py").read_text(), "main.py", "exec"), namespace)
        inventory = importlib.import_module("inventory")
    finally:
        sys.path.remove(str(workspace))
    assert namespace["cheapest"](namespace["load_demo"]()).name == "apple", shown
    assert namespace["cheapest"](inventory.Inventory()) is None, shown


QUICK_START_REQUEST = ("Finish cheapest() in main.py: return the in-stock item with the lowest "
                       "price, or None when nothing is in stock.")
