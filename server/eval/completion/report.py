"""Scores of completion outcomes: pass@1 by execution (HumanEval tasks),
exact match, edit similarity, first-line exact match, empty rate, latency
p50/p95, prompt size; a table for people and a dict for JSON."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from agentls.eval.completion.runner import Outcome

__all__ = ["edit_similarity", "percentile", "score", "summary", "table"]


def _normal(text: str) -> str:
    """Trailing whitespace per line and at the end does not count."""
    return "\n".join(line.rstrip() for line in text.rstrip().split("\n"))


def edit_similarity(predicted: str, expected: str) -> float:
    """1 - Levenshtein distance / the longer length (1.0: identical)."""
    a, b = _normal(predicted), _normal(expected)
    if not a and not b:
        return 1.0
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (char_a != char_b)))
        previous = current
    return 1.0 - previous[-1] / max(len(a), len(b))


def score(outcome: Outcome) -> dict[str, Any]:
    predicted, expected = outcome.completion, outcome.task.expected
    first_predicted = _normal(predicted).split("\n")[0].strip()
    first_expected = _normal(expected).split("\n")[0].strip()
    return {
        **outcome.task.to_dict(),
        "completion": predicted,
        "exact": _normal(predicted) == _normal(expected),
        "edit_similarity": round(edit_similarity(predicted, expected), 4),
        "first_line_exact": bool(first_expected) and first_predicted == first_expected,
        "empty": not predicted.strip(),
        "latency_ms": round(outcome.latency_ms, 1),
        "prompt_chars": outcome.prompt_chars,
        "input_tokens": outcome.input_tokens,
        "error": outcome.error,
    }


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def summary(scored: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Totals over `scored`, overall and per kind."""
    def totals(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
        count = len(rows)
        if not count:
            return {"tasks": 0}
        latencies = [r["latency_ms"] for r in rows]
        # Reported by the provider, else estimated as prompt chars / 4.
        tokens = [r["input_tokens"] or r["prompt_chars"] / 4 for r in rows]
        return {
            "tasks": count,
            "exact_match": round(sum(r["exact"] for r in rows) / count, 3),
            "edit_similarity": round(statistics.fmean(r["edit_similarity"] for r in rows), 3),
            "first_line_exact": round(sum(r["first_line_exact"] for r in rows) / count, 3),
            "empty_rate": round(sum(r["empty"] for r in rows) / count, 3),
            "errors": sum(1 for r in rows if r["error"]),
            "latency_p50_ms": round(percentile(latencies, 0.5), 1),
            "latency_p95_ms": round(percentile(latencies, 0.95), 1),
            "prompt_chars_mean": round(statistics.fmean(r["prompt_chars"] for r in rows)),
            "tokens_sent_mean": round(statistics.fmean(tokens)),
            "tokens_estimated": any(not r["input_tokens"] for r in rows),
            # by execution (HumanEval): the share whose program passed its tests
            **({"pass_at_1": round(sum(bool(r["passed"]) for r in rows) / count, 3)}
               if all("passed" in r for r in rows) else {}),
        }

    kinds = sorted({r["kind"] for r in scored})
    return {"all": totals(scored), **{k: totals([r for r in scored if r["kind"] == k])
                                      for k in kinds}}


def table(totals: dict[str, Any]) -> str:
    executed = "pass_at_1" in totals.get("all", {})
    pass_column = f"{'pass@1':>6} " if executed else ""
    header = (f"{'kind':<6} {'tasks':>5} {pass_column}{'exact':>6} "
              f"{'edit sim':>8} {'1st line':>8} "
              f"{'empty':>6} {'p50 ms':>8} {'p95 ms':>8} {'tokens':>7}")
    lines = [header, "-" * len(header)]
    for kind, row in totals.items():
        if not row.get("tasks"):
            continue
        tokens = f"{row['tokens_sent_mean']}{'~' if row['tokens_estimated'] else ''}"
        passed = f"{row['pass_at_1']:>6.2f} " if executed else ""
        lines.append(
            f"{kind:<6} {row['tasks']:>5} {passed}{row['exact_match']:>6.2f} "
            f"{row['edit_similarity']:>8.2f} {row['first_line_exact']:>8.2f} "
            f"{row['empty_rate']:>6.2f} {row['latency_p50_ms']:>8.0f} "
            f"{row['latency_p95_ms']:>8.0f} {tokens:>7}")
    lines.append("(tokens: mean sent per request; ~ = some estimated as prompt chars / 4 where "
                 "the provider reported no usage)")
    return "\n".join(lines)
