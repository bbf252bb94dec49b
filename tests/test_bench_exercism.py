"""bench/bench_exercism.py's parts (agentls/eval/exercism/): exercises drawn
by seed from a checkout, the prompts of Aider's protocol assembled from an
exercise's .docs, the test output cut for try 2, the result tables; and one
synthetic exercise end to end through the real server (a subprocess over
LSP) against a loopback fake model that writes the file whole: a wrong
file on try 1, the right one on try 2 after the failing tests' output."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from agentls.eval.exercism.exercises import (
    clean_output,
    failure_prompt,
    first_prompt,
    load_exercise,
    practice_exercises,
    select_exercises,
    truncate,
)
from agentls.eval.exercism.report import exercise_table, peer_summary, summary_table
from agentls.eval.exercism.runner import malformed_reasons, run_exercise
from tests.e2e.helpers import server_env
from tests.fakes.http_backend import (
    SSE_DONE,
    FakeBackend,
    RecordedRequest,
    Reply,
    openai_chunk,
    openai_usage_chunk,
    sse,
    sse_reply,
)

STUB = "def two_fer(name='you'):\n    pass\n"
TESTS = '''\
import unittest

from two_fer import two_fer


class TwoFerTest(unittest.TestCase):
    def test_no_name(self):
        self.assertEqual(two_fer(), "One for you, one for me.")

    def test_a_name(self):
        self.assertEqual(two_fer("Alice"), "One for Alice, one for me.")
'''
WRONG = "def two_fer(name='you'):\n    return 'One for you, one for me.'\n"
RIGHT = "def two_fer(name='you'):\n    return f'One for {name}, one for me.'\n"


def exercise_folder(root: Path, name: str = "two-fer", *, intro: bool = True,
                    append: bool = True) -> Path:
    folder = root / "exercises" / "practice" / name
    (folder / ".meta").mkdir(parents=True)
    (folder / ".docs").mkdir()
    module = name.replace("-", "_")
    (folder / ".meta" / "config.json").write_text(json.dumps({"files": {
        "solution": [f"{module}.py"], "test": [f"{module}_test.py"],
        "example": [".meta/example.py"]}}))
    (folder / ".meta" / "example.py").write_text(RIGHT)
    if intro:
        (folder / ".docs" / "introduction.md").write_text("# Introduction\n\nSharing.\n")
    (folder / ".docs" / "instructions.md").write_text("# Instructions\n\nSay two-fer.\n")
    if append:
        (folder / ".docs" / "instructions.append.md").write_text("# Append\n\nUse f-strings.\n")
    (folder / f"{module}.py").write_text(STUB if name == "two-fer" else "pass\n")
    (folder / f"{module}_test.py").write_text(TESTS if name == "two-fer" else "")
    return folder


def test_the_subset_is_drawn_by_seed_and_the_limit_takes_its_first(tmp_path: Path) -> None:
    for n in range(20):
        exercise_folder(tmp_path, f"ex-{n:02d}")
    (tmp_path / "exercises" / "practice" / "not-an-exercise").mkdir()  # skipped
    found = practice_exercises(tmp_path)
    assert len(found) == 20
    one = [e.name for e in select_exercises(found, seed=1, count=12)]
    assert len(one) == 12 == len(set(one))
    assert one == [e.name for e in select_exercises(list(reversed(found)), seed=1, count=12)]
    assert one != [e.name for e in select_exercises(found, seed=2, count=12)]
    assert [e.name for e in select_exercises(found, seed=1, count=12, limit=3)] == one[:3]
    everything = [e.name for e in select_exercises(found, everything=True)]
    assert everything == sorted(everything) and len(everything) == 20


def test_a_checkout_without_exercises_says_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exercism/python"):
        practice_exercises(tmp_path)


def test_try_one_is_the_docs_in_order_and_the_note_naming_the_stub(tmp_path: Path) -> None:
    exercise = load_exercise(exercise_folder(tmp_path))
    assert exercise.solution == ("two_fer.py",)  # not the example, not the tests
    prompt = first_prompt(exercise)
    assert prompt.index("Sharing.") < prompt.index("Say two-fer.") < prompt.index("f-strings")
    assert "modify the supplied files: two_fer.py\n" in prompt
    assert "Only use standard libraries" in prompt
    bare = load_exercise(exercise_folder(tmp_path / "b", intro=False, append=False))
    assert first_prompt(bare).startswith("# Instructions\n\nSay two-fer.\n\n####")


def test_try_two_is_the_cleaned_output_cut_to_its_head_and_tail(tmp_path: Path) -> None:
    exercise = load_exercise(exercise_folder(tmp_path))
    workspace = tmp_path / "ws" / "two-fer"
    raw = f"{workspace}/two_fer_test.py:8: AssertionError\n== 1 failed in 0.03s =="
    assert clean_output(raw, workspace) == "two-fer/two_fer_test.py:8: AssertionError\n" \
        "== 1 failed  =="
    text = "HEAD" + "x" * 1000 + "TAIL"
    cut = truncate(text, 100)
    assert cut.startswith("HEAD") and cut.endswith("TAIL") and len(cut) < 200
    assert "[... 908 characters of the test output cut ...]" in cut
    assert truncate(text, 0) == text and truncate("short", 100) == "short"
    prompt = failure_prompt(exercise, text, 100)
    assert prompt.startswith(cut)
    assert "The tests are correct, don't try and change them.\n" \
        "Fix the code in two_fer.py to resolve the errors." in prompt


def _row(peer: str, name: str, tries: list[tuple[bool, list[str]]], evaluated: list[int]
         ) -> dict[str, Any]:
    return {"peer": peer, "exercise": name, "passed_try1": tries[0][0],
            "passed": any(p for p, _ in tries), "well_formed": not any(m for _, m in tries),
            "seconds": 10.0 * len(tries), "error": "", "engine_calls": len(evaluated),
            "prompt_evaluated": evaluated, "tokens_in": sum(evaluated), "tokens_out": 50,
            "tries": [{"passed": p, "malformed": m} for p, m in tries]}


def test_the_tables_count_each_peer() -> None:
    rows = [_row("agentls", "a", [(True, [])], [100]),
            _row("agentls", "b", [(False, ["file block not applied"]), (True, [])], [300, 40]),
            _row("agentls", "c", [(False, []), (False, [])], [200, 20]),
            _row("aider", "a", [(False, []), (True, [])], [900, 60])]
    totals = peer_summary(rows)
    assert list(totals) == ["agentls", "aider"]
    mine = totals["agentls"]
    assert (mine["passed_try1"], mine["passed_try2"], mine["well_formed"]) == (1, 2, 2)
    assert mine["median_s"] == 20.0 and mine["prompt_evaluated_p50"] == 100
    assert (mine["tokens_in"], mine["tokens_out"]) == (660, 150)
    table = summary_table(totals)
    assert "| agentls | 1/3 | 2/3 | 2/3 | 20 | 5 | 100 | 660 / 150 |" in table
    assert "| aider | 0/1 | 1/1 | 1/1 | 20 | 2 | 480 | 960 / 50 |" in table
    lines = exercise_table(rows).splitlines()
    assert "| b | agentls | fail pass | no | 20 | 2 | 340 / 50 | file block not applied |" \
        in lines


def test_a_try_is_malformed_when_its_edit_did_not_reach_the_file() -> None:
    clean = {"unparsed_calls": 0, "invalid_calls": 0, "text_calls": 0, "reply_edits": 1,
             "reply_edits_applied": 1}
    assert malformed_reasons(clean, {"status": "completed"}, 0) == []
    dropped = {**clean, "reply_edits_applied": 0}
    assert malformed_reasons(dropped, None, 0) == ["file block not applied"]
    assert malformed_reasons(clean, {"error": {"code": "invalid_response"}}, 1) == [
        "edit refused by the editor", "invalid_response"]


def _whole_file(text: str) -> Reply:
    reply = f'<file path="two_fer.py">\n{text}</file>\n'
    return sse_reply([sse(openai_chunk(reply)), sse(openai_chunk(finish_reason="stop")),
                      sse(openai_usage_chunk(500, 40)), SSE_DONE])


async def _wrong_then_right(tmp_path: Path, test_after_edits: int, **env: str
                            ) -> tuple[dict[str, Any], list[RecordedRequest]]:
    """The synthetic exercise through the real server, the model answering
    a wrong whole file, then the right one."""
    exercise = load_exercise(exercise_folder(tmp_path / "checkout"))
    with FakeBackend(hard_timeout=120) as backend:
        backend.script("POST", "/v1/chat/completions", _whole_file(WRONG), _whole_file(RIGHT))
        settings = {"provider": "openai", "baseUrl": backend.url + "/v1", "model": "m",
                    "session": {"editFormat": "file-blocks", "testAfterEdits": test_after_edits},
                    "approval": {"mode": "message"}}
        row = await run_exercise(exercise, settings, env=server_env(**env), turn_time_limit=60)
        return row, backend.requests_to("/v1/chat/completions")


async def test_one_exercise_end_to_end_two_tries_through_the_real_server(
        tmp_path: Path) -> None:
    # The two tries alone: agentls's own test runs are off here (below).
    row, sent = await _wrong_then_right(tmp_path, 0)
    assert row["error"] == "", row
    first, second = row["tries"]
    assert first["passed"] is False and first["solution_changed"] is True
    assert "test_a_name" in first["test_output"]
    assert second["passed"] is True
    assert (row["passed_try1"], row["passed"], row["well_formed"]) == (False, True, True)
    assert first["edits_applied"] == 1 and first["reply_edits_applied"] == 1
    assert first["input_tokens"] == 500 and second["output_tokens"] == 40
    assert len(sent) == 2
    users = [m for m in sent[1].json["messages"] if m["role"] == "user"]
    assert "modify the supplied files: two_fer.py" in str(users[0]["content"])  # same session
    assert "One for Alice, one for me." in str(users[-1]["content"])  # the failing assertion
    assert "The tests are correct" in str(users[-1]["content"])
    assert row["engine_calls"] == 0  # no local engine behind this backend


async def test_agentls_runs_the_exercise_tests_itself_and_fixes_its_reply_within_try_one(
        tmp_path: Path) -> None:
    # This interpreter's pytest on PATH, as in a shell with the project's venv active.
    row, sent = await _wrong_then_right(tmp_path, 2,
                                        PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin")
    assert row["error"] == "", row
    [first] = row["tries"]
    assert first["passed"] is True and row["passed_try1"] is True and row["well_formed"]
    assert len(sent) == 2
    tool_results = [m for m in sent[1].json["messages"] if m["role"] == "tool"]
    assert "agentls ran the tests that cover the files you changed" in \
        str(tool_results[-1]["content"])
    assert "One for Alice, one for me." in str(tool_results[-1]["content"])
    assert (first["checks"], first["checks_failed"]) == (2, 1)
    assert "tests run by the agent: 2 (1 failed)" in exercise_table([row])
