"""`agentls eval --agent`'s pure parts: the packaged task set (every check
fails on the untouched repository and passes with the stored reference
solution: the checks can fail and the tasks are solvable), the task
loader's errors, the tool-call counts of a turn, the totals, and the
editor side of workspace/applyEdit on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentls.eval.agent.metrics import text_calls, turn_metrics
from agentls.eval.agent.report import agent_summary, agent_table, task_table
from agentls.eval.agent.suite import (
    AGENT_KINDS,
    AgentTask,
    check_task,
    load_agent_tasks,
    materialize,
)
from agentls.eval.agent.workspace_edit import EditRefused, apply_workspace_edit

TASKS = load_agent_tasks()


def test_the_set_has_at_least_20_tasks_and_several_of_every_kind() -> None:
    assert len(TASKS) >= 20
    for kind in AGENT_KINDS:
        assert sum(t.kind == kind for t in TASKS) >= 3, kind
    for task in TASKS:
        assert 1 <= len(task.files) <= 4, task.id
        assert (task.reference_answer if task.is_question else task.solution), task.id


@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
def test_the_check_fails_untouched_and_passes_with_the_reference(
    task: AgentTask, tmp_path: Path
) -> None:
    materialize(task, tmp_path)
    untouched = sorted(p.name for p in tmp_path.iterdir())
    before = check_task(task, tmp_path, answer="")
    assert not before.passed, f"{task.id}: the check passes on the untouched repository"
    if task.is_question:  # naming the files is not an answer
        assert not check_task(task, tmp_path, answer=" ".join(task.files)).passed
    materialize(task, tmp_path, solved=True)
    after = check_task(task, tmp_path, answer=task.reference_answer)
    assert after.passed, f"{task.id}: {after.status} {after.detail}"
    # the check leaves nothing behind (no bytecode, no script)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        set(untouched) | set(task.solution))


def test_a_question_fact_must_be_a_whole_word() -> None:
    [task] = load_agent_tasks(ids=["question_retries"])
    assert not check_task(task, Path("."), answer="BASE_DELAY is 0.755 and 16 retries").passed
    assert check_task(task, Path("."), answer="0.75, and RETRIES = 6.").passed


def test_the_loader_names_what_is_wrong(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('kind = "refactor"\nprompt = "x"\n')
    with pytest.raises(ValueError, match="bad: kind 'refactor' is not one of"):
        load_agent_tasks(tmp_path)
    (tmp_path / "bad.toml").write_text(
        'kind = "implement"\nprompt = "x"\n[files]\n"../up.py" = "x"\n[check]\nscript = "1"\n')
    with pytest.raises(ValueError, match="must be relative, inside the repository"):
        load_agent_tasks(tmp_path)
    (tmp_path / "bad.toml").write_text(
        'kind = "implement"\nprompt = "x"\n[files]\n"a.py" = "x"\n[check]\n')
    with pytest.raises(ValueError, match=r"either check\.script or check\.answer_contains"):
        load_agent_tasks(tmp_path)
    with pytest.raises(ValueError, match="unknown agent task"):
        load_agent_tasks(ids=["no_such_task"])
    assert {t.kind for t in load_agent_tasks(kinds=["rename"])} == {"rename"}


# --------------------------------------------------------------------------- counts


def _assistant(text: str = "", *calls: tuple[str, str, dict[str, object]]) -> dict[str, object]:
    metadata = {"tool_calls": [{"id": i, "tool": t, "arguments": a} for i, t, a in calls]}
    return {"role": "assistant", "content": text, "metadata": metadata if calls else None}


def _tool(call_id: str, code: str = "") -> dict[str, object]:
    result = {"success": False, "error": {"code": code, "message": "no"}} if code else {
        "success": True, "output": {}}
    return {"role": "tool", "content": "", "toolResult": result,
            "metadata": {"tool_call_id": call_id}}


def test_calls_are_valid_invalid_repeated_or_written_as_text() -> None:
    messages = [
        {"role": "user", "content": "fix it"},
        _assistant("", ("c1", "read_file", {"path": "a.py"})),
        _tool("c1"),
        _assistant("", ("c2", "read_file", {"path": "a.py"}), ("c3", "read_a.py", {})),
        _tool("c2"), _tool("c3", "unknown_tool"),
        _assistant("", ("c4", "edit_file", {"path": "a.py"})),
        _tool("c4", "invalid_arguments"),
        _assistant("", ("c5", "edit_file", {"path": "a.py", "old_string": "x",
                                            "new_string": "y"})),
        _tool("c5", "not_found"),  # a real call that did not find its text: valid
        _assistant('Here:\n```json\n{"name": "edit_file", "arguments": {"path": "a.py"}}\n```'),
    ]
    result = {"status": "completed", "usage": {"input_tokens": 90, "output_tokens": 10,
                                               "total_tokens": 100}}
    metrics = turn_metrics(messages, result)
    assert metrics["model_calls"] == 5
    assert metrics["tool_calls"] == 6 and metrics["text_calls"] == 1
    assert metrics["valid_calls"] == 3 and metrics["invalid_calls"] == 3
    assert metrics["repeated_calls"] == 1
    assert metrics["call_errors"] == ["unknown_tool", "invalid_arguments", "not_found"]
    assert metrics["total_tokens"] == 100
    assert metrics["answer"].startswith("Here:")


def test_edits_written_in_the_reply_are_counted_apart_from_the_models_calls() -> None:
    reply = _assistant('<file path="a.py">\nX = 1\n</file>\n<file path="b.py">\nY\n</file>',
                       ("e1", "write_file", {"path": "a.py", "content": "X = 1\n"}),
                       ("e2", "write_file", {"path": "b.py", "content": "Y\n"}))
    reply["metadata"]["reply_edits"] = 2  # type: ignore[index]
    messages = [{"role": "user", "content": "fix a.py"},
                _assistant("", ("c1", "read_file", {"path": "a.py"})), _tool("c1"),
                reply, _tool("e1"), _tool("e2", "declined")]
    metrics = turn_metrics(messages, {"status": "completed", "usage": {}})
    assert (metrics["tool_calls"], metrics["valid_calls"]) == (1, 1)
    assert (metrics["reply_edits"], metrics["reply_edits_applied"]) == (2, 1)
    assert metrics["model_calls"] == 2 and metrics["answer"].startswith("<file")


def test_a_call_the_server_could_not_parse_counts_as_invalid() -> None:
    result = {"status": "failed", "error": {
        "code": "invalid_response",
        "message": "local: m wrote a malformed tool call (bad JSON): '{'"}}
    metrics = turn_metrics([{"role": "user", "content": "x"}], result)
    assert (metrics["tool_calls"], metrics["valid_calls"], metrics["unparsed_calls"]) == (1, 0, 1)


def test_malformed_calls_kept_as_text_and_agentls_own_ending() -> None:
    bad = '<tool_call>\n{"name": "edit_file", "arguments": {"path": "a.py",\n</tool_call>'
    messages = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": bad, "metadata": {"malformed_tool_call": "bad JSON"}},
        {"role": "system", "content": "That call could not be read", "metadata": {
            "tool_error": True}},
        {"role": "assistant", "content": bad, "metadata": {"malformed_tool_call": "bad JSON"}},
        {"role": "assistant", "content": "agentls stopped the turn: ...",
         "metadata": {"source": "agentls", "explanation": "invalid_response"}},
    ]
    result = {"status": "failed", "error": {"code": "invalid_response",
                                            "message": "a tool call that could not be read"}}
    metrics = turn_metrics(messages, result)
    assert (metrics["model_calls"], metrics["tool_calls"], metrics["unparsed_calls"]) == (2, 2, 2)
    assert metrics["valid_calls"] == 0 and metrics["text_calls"] == 0
    assert metrics["answer"] == ""


def test_text_calls_finds_json_calls_and_tags_but_not_other_json() -> None:
    assert text_calls('{"name": "read_file", "arguments": {"path": "x"}}') == 1
    assert text_calls('[{"name": "a", "parameters": {}}, {"name": "b", "arguments": {}}]') == 2
    assert text_calls("<tool_call>\n{broken\n") == 1
    assert text_calls('{"name": "test_a.py", "arguments": {"path": "/tmp/x", "content": "de') == 1
    assert text_calls('The config is {"port": 8080, "name": "x"} and [1, 2].') == 0
    assert text_calls("def f(): return {}") == 0


def test_totals_and_tables() -> None:
    def row(task_id: str, kind: str, passed: bool, calls: int, valid: int,
            time_s: float) -> dict[str, object]:
        return {"id": task_id, "kind": kind, "passed": passed, "tool_calls": calls,
                "valid_calls": valid, "repeated_calls": 0, "model_calls": 2,
                "total_tokens": 1000, "time_s": time_s, "timed_out": False, "error": "",
                "status": "completed"}

    rows = [row("a", "rename", True, 4, 4, 10), row("b", "rename", False, 0, 0, 30),
            row("c", "question", False, 2, 1, 20)]
    totals = agent_summary(rows)
    assert totals["all"]["pass_rate"] == 0.333
    assert totals["all"]["tool_call_validity"] == 0.833
    assert totals["all"]["time_p50_s"] == 20
    assert totals["question"]["tool_call_validity"] == 0.5
    assert agent_summary([row("b", "rename", False, 0, 0, 1)])["all"]["tool_call_validity"] is None
    assert "5/6 83%" in agent_table(totals)
    assert task_table(rows).splitlines()[2].startswith("a ")
    assert "local engine" not in agent_table(totals)  # no engine counters: no line


def test_the_local_engines_counters_say_what_later_calls_evaluated() -> None:
    from agentls.eval.agent.runner import engine_metrics

    calls = [{"prompt_kept": 0, "prompt_evaluated": 1200, "generated": 40},
             {"prompt_kept": 1150, "prompt_evaluated": 150, "generated": 20},
             {"prompt_kept": 1319, "prompt_evaluated": 81, "generated": 5},
             {"prompt_kept": 300, "prompt_evaluated": 100}]  # compacted: shorter
    metrics = engine_metrics(calls)
    assert metrics["engine_prompt_evaluated"] == [1200, 150, 81, 100]
    assert metrics["engine_prompt_tokens"] == [1200, 1300, 1400, 400]
    assert metrics["later_calls_evaluated_share"] == round(331 / 3100, 3)
    # the second call evaluated 50 of the prompt and 40 of the reply before it again;
    # the third lost only the reply's last token; the fourth, compacted, evaluated
    # positions the call before had filled
    assert metrics["engine_seen_evaluated"] == [90, 1, 100]
    assert engine_metrics([]) == {}
    row = {"id": "a", "kind": "rename", "passed": True, "tool_calls": 1, "valid_calls": 1,
           "repeated_calls": 0, "model_calls": 3, "total_tokens": 10, "time_s": 1.0,
           "timed_out": False, "error": "", "status": "completed", **metrics}
    totals = agent_summary([row])
    assert totals["all"]["prompt_evaluated_p50"] == 150
    assert "later calls evaluated 11% of their prompts" in agent_table(totals)
    assert "191 tokens evaluated again (at most 100 in a call)" in agent_table(totals)


# --------------------------------------------------------------------------- applyEdit


def _range(line: int, start: int, end_line: int, end: int) -> dict[str, object]:
    return {"start": {"line": line, "character": start},
            "end": {"line": end_line, "character": end}}


def test_an_edit_is_written_to_disk_in_utf16_positions(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = '😀'\r\ny = 1\r\n")
    uri = (tmp_path / "a.py").as_uri()
    changed = apply_workspace_edit({"documentChanges": [
        {"textDocument": {"uri": uri, "version": None},
         "edits": [{"range": _range(0, 7, 0, 8), "newText": "!"},
                   {"range": _range(1, 4, 1, 5), "newText": "2"}]},
        {"kind": "create", "uri": (tmp_path / "new" / "b.py").as_uri()},
        {"textDocument": {"uri": (tmp_path / "new" / "b.py").as_uri(), "version": None},
         "edits": [{"range": _range(0, 0, 0, 0), "newText": "b = 1\n"}]},
        {"kind": "rename", "oldUri": uri, "newUri": (tmp_path / "c.py").as_uri()},
    ]}, tmp_path)
    assert len(changed) == 3
    assert (tmp_path / "c.py").read_bytes() == "x = '😀!\r\ny = 2\r\n".encode()
    assert not (tmp_path / "a.py").exists()
    assert (tmp_path / "new" / "b.py").read_text() == "b = 1\n"


def test_an_edit_that_cannot_be_made_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("one\n")
    edit_a = {"textDocument": {"uri": (tmp_path / "a.py").as_uri(), "version": None},
              "edits": [{"range": _range(0, 0, 0, 3), "newText": "two"}]}
    outside = {"kind": "create", "uri": (tmp_path.parent / "escape.py").as_uri()}
    with pytest.raises(EditRefused, match="outside the workspace"):
        apply_workspace_edit({"documentChanges": [edit_a, outside]}, tmp_path)
    past_end = {"textDocument": edit_a["textDocument"],
                "edits": [{"range": _range(5, 0, 5, 1), "newText": "x"}]}
    with pytest.raises(EditRefused, match="past the end"):
        apply_workspace_edit({"documentChanges": [edit_a, past_end]}, tmp_path)
    with pytest.raises(EditRefused, match="already exists"):
        apply_workspace_edit({"documentChanges": [
            {"kind": "create", "uri": (tmp_path / "a.py").as_uri()}]}, tmp_path)
    assert (tmp_path / "a.py").read_text() == "one\n"
    assert not (tmp_path.parent / "escape.py").exists()


def test_the_cli_names_a_bad_kind_or_task(capsys: pytest.CaptureFixture[str]) -> None:
    from agentls.eval.cli import main

    assert main(["--agent", "--kinds", "refactor"]) == 2
    assert "with --agent use some of fix-test, implement" in capsys.readouterr().err
    assert main(["--agent", "--only", "fix_mean,nope"]) == 2
    assert "unknown agent task(s) nope" in capsys.readouterr().err
    assert main(["--agent", "--only", "fix_mean", "--kinds", "rename"]) == 2
    assert "no task matches" in capsys.readouterr().err


def test_a_shared_engines_earlier_calls_are_not_counted() -> None:
    # the chat child is shared through the model host: its ledger holds the
    # previous task's calls too
    from agentls.eval.agent.runner import calls_since

    ledger = [{"id": 7, "received": 105.0}, {"id": 3, "received": 90.0},
              {"id": 5, "received": 100.0}, {"id": 1, "received": None}]
    assert [r["id"] for r in calls_since(ledger, 100.0)] == [5, 7]
    assert calls_since(ledger, 200.0) == []
