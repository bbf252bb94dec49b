"""agentls on one exercise: a workspace holding the stub and the tests, the
real server started on it (eval/agent/runner.py: every question answered
Allow, every applied edit written to disk), try 1 in a chat session, the
tests, and when they fail try 2 in the same session; then the engine's
own records of the model calls (providers/local/engine_work.py).

A try is well-formed when its reply reached the files or was a plain
answer: no tool call that could not be read or was refused for its
arguments, no call written out as text, no file block agentls failed to
apply, no edit the editor refused, and no `invalid_response` or
`empty_reply` end.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentls.eval.agent.metrics import transcript, turn_metrics
from agentls.eval.agent.runner import (
    chat_turn,
    engine_calls,
    fixed_scratch,
    seen_evaluated,
    start_editor,
)
from agentls.eval.exercism.exercises import (
    DEFAULT_OUTPUT_CHARS,
    TEST_TIME_LIMIT,
    Exercise,
    failure_prompt,
    first_prompt,
    materialize,
    run_tests,
)

__all__ = ["DEFAULT_TRIES", "DEFAULT_TURN_TIME_LIMIT", "engine_totals", "exercise_row",
           "malformed_reasons", "run_exercise"]

DEFAULT_TRIES = 2
DEFAULT_TURN_TIME_LIMIT = 600.0  # a whole-file reply of a 1.5B on 2 cores takes minutes
_BAD_ENDS = ("invalid_response", "empty_reply")
TRANSCRIPT_CHARS = 8000  # per message, in the JSON: enough for a whole-file reply


def malformed_reasons(metrics: Mapping[str, Any], result: Mapping[str, Any] | None,
                      refused: int) -> list[str]:
    """Why a try's reply was not well-formed ([] when it was)."""
    reasons = []
    if metrics.get("unparsed_calls"):
        reasons.append("unparsed tool call")
    if metrics.get("invalid_calls", 0) - metrics.get("unparsed_calls", 0) - metrics.get(
            "text_calls", 0) > 0:
        reasons.append("invalid tool call")
    if metrics.get("text_calls"):
        reasons.append("tool call written as text")
    if metrics.get("reply_edits", 0) > metrics.get("reply_edits_applied", 0):
        reasons.append("file block not applied")
    if refused:
        reasons.append("edit refused by the editor")
    code = str(((result or {}).get("error") or {}).get("code", ""))
    if code in _BAD_ENDS:
        reasons.append(code)
    return reasons


def engine_totals(calls: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the engine did for an exercise's model calls: prompt tokens
    evaluated per call (after its prompt cache), tokens in (the prompts,
    cached or not) and out (generated)."""
    return {
        "engine_calls": len(calls),
        "prompt_evaluated": [int(c.get("prompt_evaluated", 0)) for c in calls],
        # of the call before, what each later call evaluated again (0: only what is new)
        "seen_evaluated": seen_evaluated(calls),
        "tokens_in": sum(int(c.get("prompt_evaluated", 0)) + int(c.get("prompt_kept", 0))
                         for c in calls),
        "tokens_out": sum(int(c.get("generated", 0)) for c in calls),
    }


def _texts(exercise: Exercise, workspace: Path) -> dict[str, str | None]:
    texts: dict[str, str | None] = {}
    for path in exercise.solution:
        try:
            texts[path] = (workspace / path).read_text(encoding="utf-8")
        except OSError:
            texts[path] = None
    return texts


async def run_exercise(exercise: Exercise, settings: Mapping[str, Any], *,
                       command: Sequence[str] | None = None,
                       env: Mapping[str, str] | None = None, tries: int = DEFAULT_TRIES,
                       turn_time_limit: float = DEFAULT_TURN_TIME_LIMIT,
                       test_time_limit: float = TEST_TIME_LIMIT,
                       output_chars: int = DEFAULT_OUTPUT_CHARS,
                       peer: str = "agentls") -> dict[str, Any]:
    """One exercise, start to last test run, in a workspace of its own
    (removed after); the row bench_exercism.py reports, named `peer`."""
    scratch = fixed_scratch("agentls-exercism", exercise.name)
    workspace = scratch / exercise.name
    workspace.mkdir()
    materialize(exercise, workspace)
    rows: list[dict[str, Any]] = []
    session_id: str | None = None
    prompt = first_prompt(exercise)
    calls: list[dict[str, Any]] = []
    since = time.time()
    editor, error = await start_editor(workspace, settings, command=command, env=env,
                                       state_dir=scratch / "state")
    try:
        for _ in range(tries if not error else 0):
            before = _texts(exercise, workspace)
            editor.streamed.clear()
            applied, refused = editor.edits_applied, len(editor.edits_refused)
            started = time.perf_counter()
            result, timed_out, error = await chat_turn(editor, prompt, turn_time_limit,
                                                       session_id=session_id)
            seconds = time.perf_counter() - started
            session_id = (result or {}).get("sessionId") or session_id
            messages = (result or {}).get("messages") or list(editor.streamed)
            metrics = turn_metrics(messages, result)
            changed = _texts(exercise, workspace) != before
            test = await asyncio.to_thread(run_tests, exercise, workspace,
                                           time_limit=test_time_limit)
            failure = (result or {}).get("error") or {}
            rows.append({
                "passed": test.passed, "test_status": test.status,
                "test_output": test.output[-1500:], "seconds": round(seconds, 1),
                "status": (result or {}).get("status", "none"), "timed_out": timed_out,
                "error": error or (f"{failure.get('code', '')}: {failure.get('message', '')}"
                                   [:300] if failure else ""),
                "malformed": malformed_reasons(metrics, result,
                                               len(editor.edits_refused) - refused),
                "edits_applied": editor.edits_applied - applied,
                "solution_changed": changed,
                **{k: metrics[k] for k in ("model_calls", "tool_calls", "valid_calls",
                                           "reply_edits", "reply_edits_applied", "checks",
                                           "checks_failed", "tools",
                                           "call_errors", "input_tokens", "output_tokens")},
                # Whole replies: a failed try is read for why (a reply cut at 300 hid its edits).
                "transcript": transcript(messages, chars=TRANSCRIPT_CHARS),
            })
            if test.passed or error:
                break
            prompt = failure_prompt(exercise, test.output, output_chars)
        calls = await engine_calls(editor, since) if rows else []
    finally:
        await editor.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return exercise_row(peer, exercise, rows, calls, error)


def exercise_row(peer: str, exercise: Exercise, tries: Sequence[dict[str, Any]],
                 calls: Sequence[Mapping[str, Any]], error: str = "") -> dict[str, Any]:
    """One peer's row for one exercise, from its tries (each with `passed`,
    `seconds` and `malformed`) and the engine's records of its calls."""
    return {
        "peer": peer, "exercise": exercise.name,
        "passed_try1": bool(tries) and bool(tries[0]["passed"]),
        "passed": any(t["passed"] for t in tries),
        "well_formed": bool(tries) and not any(t["malformed"] for t in tries),
        "seconds": round(sum(t["seconds"] for t in tries), 1),
        "error": error,
        **engine_totals(calls),
        "tries": list(tries),
    }
