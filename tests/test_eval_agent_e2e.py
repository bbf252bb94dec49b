"""`agentls eval --agent` end to end: each task's repository in a fresh
workspace, the real server (a subprocess over LSP) running the turn with
the scripted provider as the model, every approval question answered
Allow and every applied edit written to disk by the eval's editor, then
the task's hidden check. A model that reads and edits passes; one that
does nothing, or whose calls are invalid, fails; a turn past its time
limit is cancelled."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentls.eval.agent.runner import run_agent_task
from agentls.eval.agent.suite import load_agent_tasks
from agentls.eval.cli import main
from tests.e2e.helpers import server_env


def _script(tmp_path: Path, responses: list[dict[str, Any]]) -> dict[str, Any]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": responses}))
    return {"provider": "scripted", "providerOptions": {"script": str(script)},
            "approval": {"mode": "message"}}


def _call(call_id: str, tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": tool, "arguments": arguments}],
            "usage": {"input_tokens": 300, "output_tokens": 20}}


def test_a_model_that_reads_and_edits_passes_through_the_cli(tmp_path: Path) -> None:
    script = tmp_path / "solve.json"
    script.write_text(json.dumps({"responses": [
        _call("c1", "read_file", path="pricing.py"),
        _call("c2", "edit_file", path="pricing.py", old_string="return price * percent / 100",
              new_string="return price - price * percent / 100"),
        {"text": "Fixed: the discount is now taken off the price.",
         "usage": {"input_tokens": 400, "output_tokens": 12}},
    ]}))
    out = tmp_path / "results.json"
    code = main(["--agent", "--only", "fix_discount", "--provider", "scripted",
                 "--setting", f"providerOptions.script={json.dumps(str(script))}",
                 "--json", str(out), "--quiet"])
    assert code == 0
    report = json.loads(out.read_text())
    [row] = report["tasks"]
    assert row["passed"] is True and row["check"] == "passed"
    assert row["status"] == "completed"
    assert row["approvals"] == 1 and row["edits_applied"] == 1  # asked, allowed, written
    assert row["tools"] == ["read_file", "edit_file"]
    # the turn, short, for --json readers: who said what, which calls
    assert [m["role"] for m in row["transcript"]][:3] == ["user", "assistant", "tool"]
    assert [c["tool"] for m in row["transcript"] for c in m.get("calls", [])] == [
        "read_file", "edit_file"]
    assert (row["tool_calls"], row["valid_calls"], row["model_calls"]) == (2, 2, 3)
    assert row["total_tokens"] == 300 + 20 + 300 + 20 + 400 + 12  # the turn's usage
    assert report["totals"]["all"]["pass_rate"] == 1.0
    assert report["totals"]["all"]["tool_call_validity"] == 1.0
    assert report["settings"]["approval"] == {"mode": "message"}


async def test_a_model_that_does_nothing_fails(tmp_path: Path) -> None:
    [task] = load_agent_tasks(ids=["rename_method"])
    settings = _script(tmp_path, [{"text": "Sure, rename it yourself."}])
    row = await run_agent_task(task, settings, env=server_env())
    assert row["passed"] is False and row["check"] == "failed"
    assert "add_itm" in row["check_detail"]  # the check's assertion, quoted
    assert row["status"] == "completed"
    assert (row["tool_calls"], row["model_calls"], row["approvals"]) == (0, 1, 0)


async def test_invalid_calls_are_counted_and_change_nothing(tmp_path: Path) -> None:
    [task] = load_agent_tasks(ids=["implement_chunk"])
    fenced = ('I will edit it:\n```json\n{"name": "edit_file", "arguments": '
              '{"path": "lists.py", "old_string": "raise", "new_string": "return []"}}\n```')
    settings = _script(tmp_path, [
        _call("c1", "read_lists.py"),  # no such tool
        _call("c2", "edit_file", path="lists.py"),  # arguments missing
        _call("c3", "read_file", path="lists.py"),
        _call("c4", "read_file", path="lists.py"),  # the same again
        {"text": fenced},
    ])
    row = await run_agent_task(task, settings, env=server_env())
    assert row["passed"] is False
    assert row["tool_calls"] == 5 and row["text_calls"] == 1
    assert row["valid_calls"] == 2 and row["invalid_calls"] == 3
    assert row["repeated_calls"] == 1
    assert row["edits_applied"] == 0


async def test_a_question_is_judged_by_the_answer(tmp_path: Path) -> None:
    [task] = load_agent_tasks(ids=["question_authors"])
    settings = _script(tmp_path, [
        _call("c1", "read_file", path="meta.py"),
        _call("c2", "read_file", path="about.py"),
        {"text": "The app is Zephyrine and its author is Ines Duarte."},
    ])
    row = await run_agent_task(task, settings, env=server_env())
    assert row["passed"] is True, row
    assert row["approvals"] == 0  # reading asks nothing
    wrong = _script(tmp_path, [{"text": "The app is Zephyrine."}])
    row = await run_agent_task(task, wrong, env=server_env())
    assert row["passed"] is False and "Ines Duarte" in row["check_detail"]


async def test_a_turn_past_its_time_limit_is_cancelled_and_checked(tmp_path: Path) -> None:
    [task] = load_agent_tasks(ids=["fix_mean"])
    settings = _script(tmp_path, [{"stall": True}])
    row = await run_agent_task(task, settings, env=server_env(), turn_time_limit=3.0)
    assert row["timed_out"] is True
    # "cancelled" also when the cancel lands before the turn has loaded its
    # session status (that was a KeyError, reported as `failed`: fixed in
    # core/sessions/statuses.py)
    assert row["status"] == "cancelled", row["error"]
    assert row["passed"] is False and row["check"] == "failed"
