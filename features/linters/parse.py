"""Reading linter output: ruff's JSON and `file:line[:col]: message`
lines (flake8, pylint parseable, mypy, eslint -f unix, gcc style)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Literal

MAX_MESSAGE_CHARS = 400  # one finding's message, in the injection and diagnostics
MAX_FINDINGS = 200  # per linter run; more are counted, not parsed

Severity = Literal["error", "warning", "information", "hint"]
_LSP_SEVERITY: dict[str, int] = {"error": 1, "warning": 2, "information": 3, "hint": 4}
_SEVERITY_WORDS: dict[str, Severity] = {
    "error": "error", "fatal": "error", "e": "error", "f": "error",
    "warning": "warning", "warn": "warning", "w": "warning",
    "info": "information", "information": "information", "note": "information",
    "convention": "information", "refactor": "information", "c": "information",
    "r": "information", "i": "information",
    "hint": "hint", "help": "hint",
}


# eslint -f unix, shellcheck -f gcc, ...
_LINE_FORMAT = re.compile(
    r"^(?P<file>.+?):(?P<line>\d+)(?::(?P<col>\d+))?(?:[:\-](?P<end_col>\d+))?:?\s+(?P<msg>\S.*)$"
)
_SEVERITY_PREFIX = re.compile(r"^\[?(?P<sev>[A-Za-z]+)\]?\s*:\s*(?P<rest>.*)$")
_LEADING_CODE = re.compile(r"^\[?(?P<code>[A-Z]{1,4}\d{2,5})\]?:?\s+(?P<rest>.*)$")
_TRAILING_CODE = re.compile(r"^(?P<rest>.*?)\s+\[(?P<code>[A-Za-z][\w\-/.@]*)\]$")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Finding:
    """A linter finding. `line` is 0-based; columns are 0-based code points
    in the linted text (converted to the client's encoding on publishing)."""

    line: int
    column: int
    message: str
    code: str | None = None
    severity: Severity = "warning"
    end_line: int | None = None
    end_column: int | None = None
    linter: str = ""
    url: str | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        """What identifies a finding across edits (lines move, codes don't)."""
        return (self.linter, self.code or "", self.message)


_STDIN_NAMES = frozenset({"-", "<stdin>", "stdin", "<string>"})


def parse_output(
    stdout: str,
    *,
    linter: str,
    names: Iterable[str] = (),
    fmt: Literal["auto", "ruff-json"] = "auto",
) -> tuple[list[Finding], int]:
    """Findings in a linter's output, and how many more were left out
    (past MAX_FINDINGS). `names`: file names the findings must be about (the
    linted copy); findings for other files are dropped. ValueError when
    `fmt` is "ruff-json" and the output is not ruff's JSON list."""
    wanted = {n for n in names if n}
    stripped = stdout.strip()
    if fmt == "ruff-json" or stripped.startswith("["):
        try:
            data = json.loads(stripped or "[]")
        except json.JSONDecodeError as exc:
            if fmt == "ruff-json":
                raise ValueError(f"output is not JSON ({exc.msg})") from None
        else:
            if isinstance(data, list) and all(isinstance(d, dict) for d in data):
                findings = [
                    f for d in data
                    if _about(d.get("filename"), wanted)
                    and (f := _ruff_finding(d, linter)) is not None
                ]
                return findings[:MAX_FINDINGS], max(0, len(findings) - MAX_FINDINGS)
            if fmt == "ruff-json":
                raise ValueError("output is not a JSON list of findings")
    findings = []
    for line in stdout.splitlines():
        finding = _line_finding(line, linter, wanted)
        if finding is not None:
            findings.append(finding)
    return findings[:MAX_FINDINGS], max(0, len(findings) - MAX_FINDINGS)


def _about(filename: Any, wanted: set[str]) -> bool:
    if not wanted or not isinstance(filename, str) or not filename:
        return True
    return filename in _STDIN_NAMES or PurePath(filename).name in wanted or (
        PurePath(filename.replace("\\", "/")).name in wanted
    )


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _ruff_finding(item: Mapping[str, Any], linter: str) -> Finding | None:
    location = item.get("location")
    if not isinstance(location, Mapping):
        return None
    line = _int(location.get("row"), 1) - 1
    column = _int(location.get("column"), 1) - 1
    end = item.get("end_location")
    end_line = end_column = None
    if isinstance(end, Mapping):
        end_line = _int(end.get("row"), line + 1) - 1
        end_column = _int(end.get("column"), column + 1) - 1
    code = item.get("code")  # "invalid-syntax" for syntax errors; null in older ruff
    message = str(item.get("message") or "").strip()
    if not isinstance(code, str) or not code:
        code = None
    severity = _SEVERITY_WORDS.get(str(item.get("severity") or "").lower(), "error")
    url = item.get("url")
    return Finding(
        line=max(line, 0), column=max(column, 0), message=_clip(message, MAX_MESSAGE_CHARS),
        code=code, severity=severity, end_line=end_line, end_column=end_column,
        linter=linter, url=url if isinstance(url, str) and url else None,
    )


def _line_finding(line: str, linter: str, wanted: set[str]) -> Finding | None:
    match = _LINE_FORMAT.match(line.strip())
    if match is None or not _about(match["file"].strip(), wanted):
        return None
    number = int(match["line"])
    column = int(match["col"]) - 1 if match["col"] else 0
    rest = match["msg"].strip()
    severity: Severity = "warning"
    code: str | None = None
    prefix = _SEVERITY_PREFIX.match(rest)
    if prefix and prefix["sev"].lower() in _SEVERITY_WORDS:
        severity = _SEVERITY_WORDS[prefix["sev"].lower()]
        rest = prefix["rest"].strip()
    leading = _LEADING_CODE.match(rest)
    if leading:
        code, rest = leading["code"], leading["rest"].strip()
    else:
        trailing = _TRAILING_CODE.match(rest)
        if trailing:
            code, rest = trailing["code"], trailing["rest"].strip()
            kind, _, name = code.partition("/")
            if name and kind.lower() in _SEVERITY_WORDS:  # eslint -f unix: [Error/rule]
                severity, code = _SEVERITY_WORDS[kind.lower()], name
    if not rest:
        return None
    end_column = int(match["end_col"]) if match["end_col"] else None
    return Finding(
        line=max(number - 1, 0), column=max(column, 0), message=_clip(rest, MAX_MESSAGE_CHARS),
        code=code, severity=severity,
        end_line=max(number - 1, 0) if end_column is not None else None,
        end_column=end_column, linter=linter,
    )


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return _clip(line.strip(), 200)
    return ""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
