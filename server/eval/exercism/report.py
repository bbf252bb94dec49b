"""Totals and tables of the exercise rows (runner.exercise_row), per peer."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

__all__ = ["exercise_table", "peer_summary", "summary_table"]


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def peer_summary(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per peer, in the order they first appear: the counts of the table."""
    peers: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        peers.setdefault(row["peer"], []).append(row)
    totals = {}
    for peer, own in peers.items():
        evaluated = [n for r in own for n in r.get("prompt_evaluated") or ()]
        totals[peer] = {
            "exercises": len(own),
            "passed_try1": sum(bool(r["passed_try1"]) for r in own),
            "passed_try2": sum(bool(r["passed"]) for r in own),
            "well_formed": sum(bool(r["well_formed"]) for r in own),
            "median_s": _median([r["seconds"] for r in own]),
            "engine_calls": len(evaluated),
            "prompt_evaluated_p50": _median(evaluated),
            "tokens_in": sum(r.get("tokens_in", 0) for r in own),
            "tokens_out": sum(r.get("tokens_out", 0) for r in own),
            "errors": sum(1 for r in own if r.get("error")),
        }
    return totals


def _number(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}"


def summary_table(totals: dict[str, dict[str, Any]]) -> str:
    """The markdown table bench/README.md records."""
    lines = ["| peer | passed try 1 | passed try 2 | well-formed | median s/exercise | "
             "model calls | prompt tokens evaluated/call p50 | tokens in / out |",
             "|---|---|---|---|---|---|---|---|"]
    for peer, t in totals.items():
        n = t["exercises"]
        lines.append(
            f"| {peer} | {t['passed_try1']}/{n} | {t['passed_try2']}/{n} | "
            f"{t['well_formed']}/{n} | {_number(t['median_s'])} | {t['engine_calls']} | "
            f"{_number(t['prompt_evaluated_p50'])} | {t['tokens_in']} / {t['tokens_out']} |")
    return "\n".join(lines)


def exercise_table(rows: Sequence[dict[str, Any]]) -> str:
    """One line per peer and exercise: the outcome of each try."""
    lines = ["| exercise | peer | tries | well-formed | s | calls | tokens in / out | note |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        tries = " ".join("pass" if t["passed"] else "fail" for t in row["tries"]) or "-"
        notes = sorted({m for t in row["tries"] for m in t["malformed"]})
        checks = [t.get("checks", 0) for t in row["tries"]]
        if any(checks):  # agentls ran the tests itself after its edits
            failed = sum(t.get("checks_failed", 0) for t in row["tries"])
            notes.append(f"tests run by the agent: {'+'.join(map(str, checks))}"
                         f" ({failed} failed)")
        note = "; ".join([*notes, row["error"][:80]] if row.get("error") else notes)
        lines.append(
            f"| {row['exercise']} | {row['peer']} | {tries} | "
            f"{'yes' if row['well_formed'] else 'no'} | {row['seconds']:.0f} | "
            f"{row.get('engine_calls', 0)} | {row.get('tokens_in', 0)} / "
            f"{row.get('tokens_out', 0)} | {note} |")
    return "\n".join(lines)
