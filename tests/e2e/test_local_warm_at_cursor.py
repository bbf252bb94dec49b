"""The first keystroke at a new place, warmed while the cursor rested there:
the real server, the packaged Qwen2.5-Coder-0.5B in its llama.cpp child.
The editor says where the cursor came to rest (`agentls/didMoveCursor`,
docs/protocol.md); the engine's own counters (GET /agentls/engine) show the
warm-up evaluated the window there, and the keystroke that follows
evaluates its own few tokens, not the window. Without the warm-up that
keystroke is the cold prompt (hundreds of tokens, seconds on 2 cores)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_local_engine_work import HEAD, LONG_TAIL, ask, engine, warm_up
from tests.reliability.harness import LspProcess, wait_until

local = pytest.importorskip("agentls.providers.local")
if local.runtime_error() is not None:
    pytest.skip(f"the local model runtime is not installed: {local.INSTALL_COMMAND}",
                allow_module_level=True)
if local.installed_parts(local.DEFAULT_COMPLETION_MODEL) is None:
    pytest.skip(f"the default completion model is not installed: {local.INSTALL_COMMAND}",
                allow_module_level=True)

pytestmark = pytest.mark.slow

BODY = "def cheapest(items):\n    "


def warmed(lsp: LspProcess) -> int:
    return int(lsp.result("agentls/status", {})["completions"]["warmed"])


def test_a_resting_cursor_warms_the_prompt_its_first_keystroke_sends(tmp_path: Path) -> None:
    settings = {"provider": "local", "inlineCompletion": {"debounceMs": 0}}
    with LspProcess.start(state_dir=tmp_path / "state", workspace=tmp_path,
                          settings=settings) as lsp:
        seen = warm_up(lsp, tmp_path)
        uri = (tmp_path / "shop.py").as_uri()
        head = HEAD[-1500:]
        text = head + BODY + LONG_TAIL
        line = text[: len(head) + len(BODY)].count("\n")
        lsp.open(uri, text)
        lsp.notify("agentls/didMoveCursor", {"textDocument": {"uri": uri},
                                             "position": {"line": line, "character": 4}})
        wait_until(lambda: warmed(lsp) == 1, "the warm-up at the cursor", 120)
        records = [r for r in engine(lsp) if r["id"] > seen]
        (warm,) = records
        lsp.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"range": {"start": {"line": line, "character": 4},
                                          "end": {"line": line, "character": 4}},
                                "text": "r"}]})
        lsp.wait(ask(lsp, uri, line, 5), 120, "the first keystroke's completion")
        wait_until(lambda: all(r["outcome"] != "running" for r in engine(lsp)),
                   "the engine settled", 30)
        records = [r for r in engine(lsp) if r["id"] > seen]
        # A malformed notification is dropped without an answer or a crash.
        lsp.notify("agentls/didMoveCursor", {"position": "here"})
        status: dict[str, Any] = lsp.result("agentls/status", {})
    assert warm["outcome"] == "done" and warm["generated"] <= 1, records
    assert warm["prompt_evaluated"] > 300, records  # the window and the suffix, ahead
    keystroke = records[-1]
    assert len(records) == 2 and keystroke["generated"], records
    # The typed key and the few tokens after it: the window came from the cache.
    assert keystroke["prompt_evaluated"] <= 24, records
    assert keystroke["prompt_kept"] + keystroke["prompt_moved"] > 300, records
    assert status["completions"]["warmed"] == 1
