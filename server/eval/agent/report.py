"""Totals and tables of `agentls eval --agent` rows (agent_runner)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from agentls.eval.completion.report import percentile

__all__ = ["agent_summary", "agent_table", "task_table"]


def _totals(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    count = len(rows)
    if not count:
        return {"tasks": 0}
    calls = sum(r["tool_calls"] for r in rows)
    valid = sum(r["valid_calls"] for r in rows)
    times = [r["time_s"] for r in rows]
    return {
        "tasks": count,
        "passed": sum(bool(r["passed"]) for r in rows),
        "pass_rate": round(sum(bool(r["passed"]) for r in rows) / count, 3),
        "tool_calls": calls,
        "valid_calls": valid,
        "invalid_calls": calls - valid,
        "repeated_calls": sum(r["repeated_calls"] for r in rows),
        "reply_edits": sum(r.get("reply_edits", 0) for r in rows),
        "reply_edits_applied": sum(r.get("reply_edits_applied", 0) for r in rows),
        # None when no call was made: nothing to be valid or not
        "tool_call_validity": round(valid / calls, 3) if calls else None,
        "model_calls_mean": round(statistics.fmean(r["model_calls"] for r in rows), 2),
        "tokens_mean": round(statistics.fmean(r["total_tokens"] for r in rows)),
        "tokens_total": sum(r["total_tokens"] for r in rows),
        "time_p50_s": round(percentile(times, 0.5), 1),
        "time_p95_s": round(percentile(times, 0.95), 1),
        "timeouts": sum(bool(r["timed_out"]) for r in rows),
        # the local engine's counters: prompt tokens it evaluated per call, and
        # the share of later calls' prompts evaluated (not kept by its cache)
        **_engine_totals(rows),
        "errors": sum(1 for r in rows if r["error"]),
    }


def _engine_totals(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    evaluated = [n for r in rows for n in r.get("engine_prompt_evaluated") or ()]
    if not evaluated:
        return {}
    later_evaluated = sum(sum((r.get("engine_prompt_evaluated") or [0])[1:]) for r in rows)
    later_prompt = sum(sum((r.get("engine_prompt_tokens") or [0])[1:]) for r in rows)
    seen = [n for r in rows for n in r.get("engine_seen_evaluated") or ()]
    return {
        "engine_calls": len(evaluated),
        "prompt_evaluated_p50": round(percentile(evaluated, 0.5)),
        # what later calls evaluated again of the call before them (runner.seen_evaluated)
        "later_calls_seen_evaluated": sum(seen),
        "later_calls_seen_evaluated_max": max(seen, default=0),
        "later_calls_evaluated_share": (round(later_evaluated / later_prompt, 3)
                                        if later_prompt else None),
    }


def agent_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Totals overall ("all") and per task kind."""
    kinds = sorted({r["kind"] for r in rows})
    return {"all": _totals(rows), **{k: _totals([r for r in rows if r["kind"] == k])
                                     for k in kinds}}


def agent_table(totals: dict[str, Any]) -> str:
    header = (f"{'kind':<10} {'tasks':>5} {'pass':>5} {'valid calls':>12} {'repeat':>6} "
              f"{'edits':>5} {'model calls':>11} {'tokens':>7} {'p50 s':>6} {'p95 s':>6}")
    lines = [header, "-" * len(header)]
    for kind, row in totals.items():
        if not row.get("tasks"):
            continue
        validity = row["tool_call_validity"]
        valid = (f"{row['valid_calls']}/{row['tool_calls']}"
                 f" {validity:.0%}" if validity is not None else "0/0")
        lines.append(
            f"{kind:<10} {row['tasks']:>5} {row['pass_rate']:>5.2f} {valid:>12} "
            f"{row['repeated_calls']:>6} {row.get('reply_edits', 0):>5} "
            f"{row['model_calls_mean']:>11.1f} "
            f"{row['tokens_mean']:>7} {row['time_p50_s']:>6.0f} {row['time_p95_s']:>6.0f}")
    lines.append("(pass: share of tasks whose check passed; valid calls: valid/all tool calls; "
                 "edits: files changed from the replies' file blocks (session.editFormat); "
                 "model calls and tokens: mean per task; p50/p95: seconds per turn)")
    every = totals.get("all") or {}
    if every.get("engine_calls"):
        share = every["later_calls_evaluated_share"]
        lines.append(
            f"local engine: {every['engine_calls']} model calls, p50 "
            f"{every['prompt_evaluated_p50']} prompt tokens evaluated per call; a turn's later "
            "calls evaluated " + (f"{share:.0%}" if share is not None else "-")
            + " of their prompts (the rest from llama.cpp's prompt cache); of the call "
            f"before them, {every.get('later_calls_seen_evaluated', 0)} tokens evaluated "
            f"again (at most {every.get('later_calls_seen_evaluated_max', 0)} in a call)")
    return "\n".join(lines)


def task_table(rows: Sequence[dict[str, Any]]) -> str:
    """One line per task, for the report and bench/README."""
    header = (f"{'task':<22} {'kind':<10} {'pass':<4} {'calls':>5} {'valid':>5} "
              f"{'edits':>5} {'model':>5} {'tokens':>7} {'s':>6}  status")
    lines = [header, "-" * len(header)]
    for r in rows:
        status = r["status"] + (" (time limit)" if r["timed_out"] else "")
        if r["error"]:
            status += f": {r['error'][:60]}"
        lines.append(
            f"{r['id']:<22} {r['kind']:<10} {'yes' if r['passed'] else 'no':<4} "
            f"{r['tool_calls']:>5} {r['valid_calls']:>5} {r.get('reply_edits', 0):>5} "
            f"{r['model_calls']:>5} "
            f"{r['total_tokens']:>7} {r['time_s']:>6.1f}  {status}")
    return "\n".join(lines)
