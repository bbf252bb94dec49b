"""Superseded completions cost the real engine (almost) nothing: the real
server, the packaged Qwen2.5-Coder-0.5B in its llama.cpp child. A cold
completion over a long document is superseded by a keystroke while the
engine evaluates its prompt; the engine's own counters (GET /agentls/engine,
named by agentls/status) show it stopped within a batch, and the next
keystroke's request, on the same line, evaluates only the tokens from the
cursor on (its prompt cache holds everything before it: the window and the
snippets do not move within a line). A keystroke where the cursor rested
first finds its window already evaluated (the warm-up at the cursor)."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import require_completion_model
from tests.reliability.harness import LspProcess, wait_until

local = require_completion_model()

pytestmark = pytest.mark.slow

# ~2,000 characters before the cursor (the embedded model's budget), code after it.
HEAD = "".join(f"def total_{i}(items):\n    return sum(item.price for item in items)\n\n\n"
               for i in range(40))
LINE = "def cheapest(items):\n    return min("
TAIL = "\n\n\nprint(cheapest([]))\n"


def engine(lsp: LspProcess) -> list[dict[str, Any]]:
    status = lsp.result("agentls/status", {})
    (url,) = [m["engineCounters"] for m in status["localModels"]
              if m.get("engineCounters") and "0.5b" in m["model"].lower()]
    with urllib.request.urlopen(url, timeout=10) as answer:
        return list(json.load(answer)["requests"])


def ask(lsp: LspProcess, uri: str, line: int, character: int) -> Any:
    return lsp.request_async("textDocument/inlineCompletion", {
        "textDocument": {"uri": uri}, "position": {"line": line, "character": character},
        "context": {"triggerKind": 2}})


def warm_up(lsp: LspProcess, folder: Path) -> int:
    """Load the model once, on another document; the last engine record's id."""
    lsp.open((folder / "warm.py").as_uri(), "def add(a, b):\n    return ")
    lsp.wait(ask(lsp, (folder / "warm.py").as_uri(), 1, 11), 300, "warm-up")
    return max(r["id"] for r in engine(lsp))


def test_a_superseded_completion_stops_the_engine_and_the_next_reuses_its_prompt(
    tmp_path: Path,
) -> None:
    settings = {"provider": "local", "inlineCompletion": {"debounceMs": 0}}
    with LspProcess.start(state_dir=tmp_path / "state", workspace=tmp_path,
                          settings=settings) as lsp:
        seen = warm_up(lsp, tmp_path)

        uri = (tmp_path / "shop.py").as_uri()
        text = HEAD + LINE + TAIL
        line = text[: len(HEAD) + len(LINE)].count("\n")
        lsp.open(uri, text)
        first = ask(lsp, uri, line, len("    return min("))
        # While the cold prompt (~700 tokens, seconds on 2 cores) is evaluated,
        # the user types one more key.
        wait_until(lambda: any(r["id"] > seen for r in engine(lsp)),
                   "the first request reached the engine", 60)
        time.sleep(0.3)
        running = [r for r in engine(lsp) if r["id"] > seen and r["outcome"] == "running"]
        lsp.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"range": {"start": {"line": line, "character": 15},
                                          "end": {"line": line, "character": 15}},
                                "text": "i"}]})
        second = ask(lsp, uri, line, len("    return min(i"))
        lsp.wait(second, 120, "the second completion")
        lsp.wait(first, 30, "the first (superseded) completion")
        third_text_char = "z"  # not what the model suggested: the engine is asked
        lsp.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": 3},
            "contentChanges": [{"range": {"start": {"line": line, "character": 16},
                                          "end": {"line": line, "character": 16}},
                                "text": third_text_char}]})
        lsp.wait(ask(lsp, uri, line, len("    return min(iz")), 120, "the third completion")
        wait_until(lambda: all(r["outcome"] != "running" for r in engine(lsp)),
                   "the engine settled", 30)
        records = [r for r in engine(lsp) if r["id"] > seen]
    if running:  # superseded mid-prompt (always so on 2 cores; a fast CPU may finish first)
        (first_record,) = [r for r in records if r["id"] == running[0]["id"]]
        assert first_record["outcome"] == "stopped", records  # not run to its end
        assert first_record["generated"] == 0 and first_record["prompt_evaluated"] < 700
    done = [r for r in records if r["outcome"] in ("done", "stopped") and r["generated"]]
    # The last keystroke's prompt differs from the one before it only from the
    # cursor on (the typed character and the short TAIL): a few tokens, not the
    # document.
    assert done and done[-1]["prompt_evaluated"] <= 16, records
    assert done[-1]["prompt_kept"] > 100, records  # the rest came from the cache
    assert len(records) == 3, records  # one request per keystroke reached the engine


# Code after the cursor: ~1,900 characters, of which the embedded engine is
# sent 600 (providerOptions.completion_suffix_chars), ~150 tokens.
LONG_TAIL = "\n\n\n" + "".join(
    f"def dearest_{i}(items):\n    return max(items, key=lambda item: item.price)\n\n\n"
    for i in range(24))


def test_a_keystroke_before_a_long_suffix_evaluates_its_own_tokens_not_the_suffix(
    tmp_path: Path,
) -> None:
    """A key typed within the line adds to the prompt's end only (the line's
    code goes after the middle token), and the cache keeps the rest; a new
    line started moves the suffix in the cache past the finished line
    (providers/local/prompt_reuse.py). Each evaluates a few tokens, not the
    ~150 after the cursor."""
    settings = {"provider": "local", "inlineCompletion": {"debounceMs": 0}}
    with LspProcess.start(state_dir=tmp_path / "state", workspace=tmp_path,
                          settings=settings) as lsp:
        uri = (tmp_path / "shop.py").as_uri()
        head = HEAD[-1500:]
        text = head + LINE + LONG_TAIL
        line = text[: len(head) + len(LINE)].count("\n")
        lsp.open(uri, text)
        lsp.wait(ask(lsp, uri, line, len("    return min(")), 300, "the first (cold) completion")
        seen = max(r["id"] for r in engine(lsp))
        edits = [((line, 15), "i", (line, 16)), ((line, 16), "tems)\n    ", (line + 1, 4))]
        for version, ((at_line, at), typed, (to_line, to)) in enumerate(edits, 2):
            lsp.notify("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"range": {"start": {"line": at_line, "character": at},
                                              "end": {"line": at_line, "character": at}},
                                    "text": typed}]})
            lsp.wait(ask(lsp, uri, to_line, to), 120, f"the completion after {typed!r}")
        wait_until(lambda: all(r["outcome"] != "running" for r in engine(lsp)),
                   "the engine settled", 30)
        records = [r for r in engine(lsp) if r["id"] > seen]
    assert len(records) == 2, records
    for record in records:
        # Ran to its end, or to the end of a line once its time was up.
        assert record["outcome"] in ("done", "stopped") and record["generated"], records
    within, new_line = records
    assert within["prompt_moved"] == 0 and within["prompt_kept"] > 300, records  # all kept
    assert within["prompt_evaluated"] <= 4, records  # "i" and what the model wrote after it
    assert new_line["prompt_moved"] > 100, records  # the suffix, moved rather than evaluated
    assert new_line["prompt_evaluated"] <= 40, records  # the finished line and a few after it


def test_an_inline_completion_goes_before_a_next_edit_the_engine_is_working_on(
    tmp_path: Path,
) -> None:
    """A next edit is background work (engine_work.py): an inline completion
    that arrives while the engine evaluates one stops it within a batch, and
    the next edit answers nothing, quietly (the user typed: it is stale)."""
    settings = {"provider": "local", "inlineCompletion": {"debounceMs": 0},
                "nextEdit": {"debounceMs": 0}}
    with LspProcess.start(state_dir=tmp_path / "state", workspace=tmp_path,
                          settings=settings) as lsp:
        seen = warm_up(lsp, tmp_path)

        uri = (tmp_path / "shop.py").as_uri()
        body = "def cheapest(items):\n    return min(items, key=lambda item: item.price)\n"
        text = HEAD + body + TAIL
        line = HEAD.count("\n")
        lsp.open(uri, text)
        # The user renames the parameter: an edit for the next-edit prompt.
        lsp.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"range": {"start": {"line": line, "character": 13},
                                          "end": {"line": line, "character": 18}},
                                "text": "goods"}]})
        edit = lsp.request_async("textDocument/copilotInlineEdit", {
            "textDocument": {"uri": uri, "version": 2},
            "position": {"line": line, "character": 18}})
        wait_until(lambda: [r for r in engine(lsp) if r["id"] > seen and r["background"]
                            and r["outcome"] == "running"],
                   "the next edit reached the engine", 60)
        inline = ask(lsp, uri, line + 1, 4)
        lsp.wait(inline, 120, "the inline completion")
        answer = lsp.wait(edit, 60, "the next edit")
        wait_until(lambda: all(r["outcome"] != "running" for r in engine(lsp)),
                   "the engine settled", 30)
        records = [r for r in engine(lsp) if r["id"] > seen]
        shown = lsp.shown_messages()
    assert "error" not in answer and answer["result"]["edits"] == [], answer
    assert not [m for m in shown if "preempt" in m or "failed" in m.lower()], shown
    (background,) = [r for r in records if r["background"]]
    (typed,) = [r for r in records if not r["background"]]
    assert background["outcome"] == "preempted", records  # not run to its end
    assert typed["outcome"] in ("done", "stopped") and typed["generated"], records
    # The next edit ended (within a batch) before the completion did.
    assert (background["received"] + background["ms"] / 1000
            < typed["received"] + typed["ms"] / 1000), records


BODY = "def cheapest(items):\n    "


def warmed(lsp: LspProcess) -> int:
    """How many warm-ups at a resting cursor agentls/status counts."""
    return int(lsp.result("agentls/status", {})["completions"]["warmed"])


def test_a_resting_cursor_warms_the_prompt_its_first_keystroke_sends(tmp_path: Path) -> None:
    """The first keystroke at a new place, warmed while the cursor rested
    there (`agentls/didMoveCursor`, docs/protocol.md): the warm-up evaluates
    the window ahead, and the keystroke that follows evaluates its own few
    tokens, not the window (without it: hundreds, seconds on 2 cores)."""
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
