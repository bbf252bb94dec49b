"""Which findings to keep after an edit, and how they are told to the
agent (an injection) and shown to the user (LSP diagnostics)."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from agentls.core.editor.positions import code_units
from agentls.features.linters.parse import _LINE_BREAK, _LSP_SEVERITY, Finding

DIAGNOSTIC_SOURCE = "agentls"


def split_lines(text: str) -> list[str]:
    """Lines as LSP counts them (\\n, \\r\\n and \\r end a line)."""
    return _LINE_BREAK.split(text)


def changed_line_ranges(old: str | None, new: str) -> list[tuple[int, int]]:
    """0-based inclusive line ranges of `new` that differ from `old` (a
    deletion marks the line where it happened). Used when a tool result
    carries no `changed_lines`."""
    new_lines = split_lines(new)
    last = max(len(new_lines) - 1, 0)
    if old is None:
        return [(0, last)]
    matcher = difflib.SequenceMatcher(None, split_lines(old), new_lines, autojunk=False)
    ranges: list[tuple[int, int]] = []
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if j2 > j1:
            ranges.append((j1, j2 - 1))
        else:
            at = min(j1, last)
            ranges.append((at, at))
    return ranges


def filter_findings(
    findings: Sequence[Finding],
    *,
    changed: Sequence[tuple[int, int]],
    baseline: Sequence[Finding] | None,
    outstanding: Mapping[tuple[str, str, str], int] | None = None,
) -> list[Finding]:
    """Findings the agent must hear about: in lines the edit touched, new
    since before the edit (not matched in `baseline` by (linter, code,
    message) multiset), or still there from an earlier report
    (`outstanding`). `baseline` None means "unknown" (the old text could not
    be linted): then only touched and outstanding findings are kept. A new
    file has an empty baseline, so all its findings are new."""
    before: Counter[tuple[str, str, str]] = Counter(f.key for f in baseline or ())
    reported: Counter[tuple[str, str, str]] = Counter(dict(outstanding or {}))
    kept: list[Finding] = []
    for finding in findings:
        touched = any(start <= finding.line <= end for start, end in changed)
        existed = baseline is None or before[finding.key] > 0
        if before[finding.key] > 0:
            before[finding.key] -= 1
        still = reported[finding.key] > 0
        if still:
            reported[finding.key] -= 1
        if touched or not existed or still:
            kept.append(finding)
    return kept


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _finding_line(finding: Finding, shown_path: str, *, with_linter: bool) -> str:
    code = f"{finding.code} " if finding.code else ""
    origin = f" ({finding.linter})" if with_linter and finding.linter else ""
    return f"{shown_path}:{finding.line + 1}:{finding.column + 1}: {code}{finding.message}{origin}"


def _summary(findings: Sequence[Finding]) -> str:
    """'ruff found 2 problems' / 'ruff found 1 problem and mypy found 3 problems'."""
    counts = Counter(f.linter or "the linter" for f in findings)
    return " and ".join(f"{name} found {_plural(n, 'problem')}" for name, n in counts.items())


def format_injection(
    findings: Sequence[Finding],
    *,
    shown_path: str,
    tool_name: str,
    max_bytes: int | None = None,
    max_chars: int | None = None,
    omitted: int = 0,
) -> str | None:
    """The text injected for the agent: what is wrong and where, one
    `path:line:col: CODE message` per finding (1-based), within `max_bytes`
    (UTF-8) and `max_chars`; findings that do not fit are counted at the
    end. None when not even the header fits."""
    if not findings:
        return None
    total = len(findings) + omitted
    with_linter = len({f.linter for f in findings}) > 1
    header = (
        f"{_summary(findings)} in {shown_path} after your {tool_name} "
        "(path:line:column, 1-based; it runs after each edit by itself). Fix them now:"
    )

    def fits(text: str) -> bool:
        return (max_bytes is None or len(text.encode("utf-8")) <= max_bytes) and (
            max_chars is None or len(text) <= max_chars
        )

    def trailer(left: int) -> str:
        return f"... and {_plural(left, 'more problem')} not shown (injection size limit)."

    lines = [header]
    shown = 0
    for finding in findings:
        candidate = "\n".join([*lines, _finding_line(finding, shown_path, with_linter=with_linter)])
        left_after = total - shown - 1
        if fits(candidate + ("\n" + trailer(left_after) if left_after else "")):
            lines.append(_finding_line(finding, shown_path, with_linter=with_linter))
            shown += 1
        else:
            break
    left = total - shown
    if left:
        lines.append(trailer(left))
    text = "\n".join(lines)
    if fits(text):
        return text
    short = f"{_summary(findings)} in {shown_path} after your {tool_name}; " + (
        "the list is over the injection size limit. Read the file and fix them."
    )
    return short if fits(short) else None


def _position(lines: Sequence[str], line: int, column: int, encoding: str) -> dict[str, int]:
    if line >= len(lines):
        last = len(lines) - 1
        return {"line": last, "character": code_units(lines[last], encoding)}
    line = max(line, 0)
    text = lines[line]
    return {"line": line, "character": code_units(text[: max(column, 0)], encoding)}


def to_diagnostic(
    finding: Finding, lines: Sequence[str], encoding: str = "utf-16"
) -> dict[str, Any]:
    """An LSP Diagnostic (plain dict) for `finding` in a text split with
    split_lines; columns converted from code points to `encoding` units."""
    lines = list(lines) or [""]
    start = _position(lines, finding.line, finding.column, encoding)
    if finding.end_line is not None and finding.end_column is not None:
        end = _position(lines, finding.end_line, finding.end_column, encoding)
        if (end["line"], end["character"]) < (start["line"], start["character"]):
            end = dict(start)
    else:
        # No end: to the end of the line (the whole line when no column either).
        row = min(start["line"], len(lines) - 1)
        end = _position(lines, row, len(lines[row]), encoding)
    diagnostic: dict[str, Any] = {
        "range": {"start": start, "end": end},
        "severity": _LSP_SEVERITY[finding.severity],
        "source": DIAGNOSTIC_SOURCE,
        "message": f"{finding.linter}: {finding.message}" if finding.linter else finding.message,
    }
    if finding.code:
        diagnostic["code"] = finding.code
    if finding.url:
        diagnostic["codeDescription"] = {"href": finding.url}
    return diagnostic
