"""Linter hooks: after the agent changes a file, lint the new content and
tell the agent (and the user) what is wrong, in the same turn.

Hook module `linters` (entry-point group `agentls.hooks`), on `tool:post`
for successful `write_file`, `edit_file` and `rename_file` calls:

1. The file tools' ToolResult.output gives the new text (the buffer as the
   user sees it, unsaved), the old text and the 0-based line ranges the edit
   touched (`changed_lines`).
2. Every configured linter whose `languages` match the file runs on the new
   text, and on the old text too (so findings can be told apart as new or
   pre-existing), as an asyncio subprocess with its timeout; a linter that
   cannot start, times out or fails is reported to the user once, never
   fatal.
3. Kept are findings in lines the edit touched, findings new since before
   the edit (by (code, message) multiset), and findings this hook already
   reported for the document that are still there (so a half-fixed file
   keeps its reminders).
4. They are injected (`inject_context`, role system, stored: the agent sees
   them on its next model call and fixes its own mistake), within
   `session.injectionSizeLimit` (the rest are counted, not listed); a
   `user_message` at warning level tells the user; and the same findings are
   published as diagnostics for the document (source "agentls"), replaced
   after every later edit and cleared when an edit leaves none.

Settings (`linters`, PROTOCOL.md): a list of
`{languages, command, timeoutSeconds}`. In `command` (an argv, no shell):

- `{file}` is replaced by the path of a temporary copy of the new text (same
  file name, in a fresh temp dir), so unsaved buffers are linted as shown;
- `{path}` by the document's real path (for options such as ruff's
  `--stdin-filename`, which find the project configuration from it);
- a command without `{file}` gets the text on its standard input.

Commands run in the workspace folder that holds the file. `languages`
entries match the languageId derived from the file extension (`python`,
`typescript`, ...), an extension (`.py`, `py`) or a file-name glob (`*.py`);
`*` matches every file. Output is parsed as ruff's JSON when it is a JSON
list, otherwise as `file:line[:col]: [severity:] [CODE] message` lines
(flake8, pylint --output-format=parseable, mypy, eslint -f unix, gcc style).

Default (`linters` null): ruff for Python when ruff is installed (on PATH,
next to the server's Python, or importable as a module), as
`ruff check --output-format json --no-cache --force-exclude --stdin-filename {path} -`
with the text on stdin: ruff then reads the workspace's own configuration
(pyproject.toml / ruff.toml / .ruff.toml nearest the real path, including
per-file ignores and excludes). `linters: []` turns linting off.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import fnmatch
import importlib.util
import json
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, Literal

from agentls.core.models import HookResult

if TYPE_CHECKING:
    from agentls.core.hook_modules import HookContext
    from agentls.core.hooks import HookRegistry
    from agentls.core.settings import AgentlsSettings

__all__ = [
    "DIAGNOSTIC_SOURCE",
    "LINTED_TOOLS",
    "Finding",
    "LintRun",
    "Linter",
    "LintersHook",
    "changed_line_ranges",
    "default_linters",
    "filter_findings",
    "format_injection",
    "language_id_for",
    "linters_for",
    "parse_output",
    "run_linter",
    "to_diagnostic",
]

log = logging.getLogger("agentls.linters")

DIAGNOSTIC_SOURCE = "agentls"
LINTED_TOOLS = frozenset({"write_file", "edit_file", "rename_file"})
# Tools after which diagnostics this hook published for a path are dropped.
CLEARING_TOOLS = frozenset({"delete_file", "rename_file"})
HOOK_PRIORITY = 100  # late on tool:post: after anything that may rewrite results
HANDLER_MARGIN_SECONDS = 3.0  # linters stop this long before the hook registry gives up

MAX_MESSAGE_CHARS = 400  # one finding's message, in the injection and diagnostics
MAX_OUTPUT_BYTES = 4_000_000  # linter stdout/stderr kept for parsing
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

# Extension -> LSP languageId (the common ones; VS Code's identifiers).
_LANGUAGE_BY_EXTENSION: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".jsx": "javascriptreact", ".ts": "typescript", ".mts": "typescript",
    ".cts": "typescript", ".tsx": "typescriptreact",
    ".rs": "rust", ".go": "go", ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp",
    ".java": "java", ".kt": "kotlin", ".kts": "kotlin", ".swift": "swift", ".cs": "csharp",
    ".rb": "ruby", ".php": "php", ".lua": "lua", ".sh": "shellscript", ".bash": "shellscript",
    ".zsh": "shellscript", ".json": "json", ".jsonc": "jsonc", ".yaml": "yaml", ".yml": "yaml",
    ".toml": "toml", ".md": "markdown", ".markdown": "markdown", ".html": "html",
    ".htm": "html", ".css": "css", ".scss": "scss", ".less": "less", ".sql": "sql",
    ".vue": "vue", ".svelte": "svelte", ".r": "r", ".dart": "dart", ".scala": "scala",
    ".ex": "elixir", ".exs": "elixir", ".erl": "erlang", ".hs": "haskell", ".ml": "ocaml",
    ".zig": "zig", ".nim": "nim", ".tf": "terraform", ".proto": "proto3",
}
_LANGUAGE_BY_NAME: dict[str, str] = {
    "Dockerfile": "dockerfile", "Makefile": "makefile", "makefile": "makefile",
    "GNUmakefile": "makefile",
}

# `file:line[:col][:]` then the message: flake8, pylint parseable, mypy, gcc,
# eslint -f unix, shellcheck -f gcc, ...
_LINE_FORMAT = re.compile(
    r"^(?P<file>.+?):(?P<line>\d+)(?::(?P<col>\d+))?(?:[:\-](?P<end_col>\d+))?:?\s+(?P<msg>\S.*)$"
)
_SEVERITY_PREFIX = re.compile(r"^\[?(?P<sev>[A-Za-z]+)\]?\s*:\s*(?P<rest>.*)$")
_LEADING_CODE = re.compile(r"^\[?(?P<code>[A-Z]{1,4}\d{2,5})\]?:?\s+(?P<rest>.*)$")
_TRAILING_CODE = re.compile(r"^(?P<rest>.*?)\s+\[(?P<code>[A-Za-z][\w\-/.@]*)\]$")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Linter:
    """One linter command (a `linters` entry, or the ruff default)."""

    name: str
    languages: tuple[str, ...]
    command: tuple[str, ...]
    timeout: float = 10.0
    output: Literal["auto", "ruff-json"] = "auto"

    @property
    def uses_stdin(self) -> bool:
        return not any("{file}" in arg for arg in self.command)


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


@dataclass(frozen=True)
class LintRun:
    linter: Linter
    findings: list[Finding] = field(default_factory=list)
    # Set when the linter did not produce a usable answer: "start" (could not
    # be run), "timeout", "failed" (crashed or printed nothing readable).
    failure: str | None = None
    failure_kind: Literal["start", "timeout", "failed"] | None = None
    omitted: int = 0  # findings past MAX_FINDINGS


# --------------------------------------------------------------------------- linters


def language_id_for(path: str | PurePath) -> str | None:
    """The LSP languageId most editors give a file of this name."""
    pure = PurePath(path)
    return _LANGUAGE_BY_NAME.get(pure.name) or _LANGUAGE_BY_EXTENSION.get(pure.suffix.lower())


def _matches(languages: Iterable[str], path: str | PurePath, language_id: str | None) -> bool:
    pure = PurePath(path)
    ids = {i.lower() for i in (language_id, language_id_for(pure)) if i}
    suffix = pure.suffix.lower()
    for entry in languages:
        wanted = entry.strip()
        low = wanted.lower()
        if low == "*" or low in ids:
            return True
        if suffix and low in (suffix, suffix.lstrip(".")):
            return True
        if any(c in wanted for c in "*?[") and fnmatch.fnmatch(pure.name, wanted):
            return True
    return False


def linters_for(
    linters: Sequence[Linter], path: str | PurePath, language_id: str | None = None
) -> list[Linter]:
    """The linters whose `languages` match this file."""
    return [linter for linter in linters if _matches(linter.languages, path, language_id)]


def _ruff_command() -> tuple[str, ...] | None:
    found = shutil.which("ruff")
    if found:
        return (found,)
    # The server's own environment (an editor may start it by absolute path,
    # with the virtualenv's bin/ not on PATH).
    bindir = Path(sys.executable).parent
    for name in ("ruff", "ruff.exe"):
        candidate = bindir / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return (str(candidate),)
    if importlib.util.find_spec("ruff") is not None:
        return (sys.executable, "-m", "ruff")
    return None


def default_linters() -> list[Linter]:
    """ruff for Python when ruff is installed, else nothing."""
    ruff = _ruff_command()
    if ruff is None:
        return []
    return [
        Linter(
            name="ruff",
            languages=("python",),
            command=(*ruff, "check", "--output-format", "json", "--no-cache",
                     "--force-exclude", "--stdin-filename", "{path}", "-"),
            timeout=10.0,
            output="ruff-json",
        )
    ]


def _linter_name(command: Sequence[str]) -> str:
    """`ruff` for ["ruff", ...], ["/venv/bin/ruff", ...] and ["python", "-m", "ruff", ...]."""
    first = PurePath(command[0]).name
    if first.lower().startswith("python") and len(command) > 2 and command[1] == "-m":
        return command[2]
    return first.removesuffix(".exe") or command[0]


def configured_linters(settings: AgentlsSettings) -> list[Linter]:
    if settings.linters is None:
        return default_linters()
    return [
        Linter(
            name=_linter_name(config.command),
            languages=tuple(config.languages),
            command=tuple(config.command),
            timeout=config.timeout_seconds,
        )
        for config in settings.linters
    ]


# --------------------------------------------------------------------------- running


async def run_linter(
    linter: Linter,
    text: str,
    path: str | Path,
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> LintRun:
    """Lint `text` as the content of `path` (which need not exist or match
    the disk). Never raises for linter trouble: see LintRun.failure."""
    real = Path(path)
    tmpdir: str | None = None
    try:
        if linter.uses_stdin:
            argv = [arg.replace("{path}", str(real)) for arg in linter.command]
            linted_names = {real.name}
        else:
            tmpdir = await asyncio.to_thread(tempfile.mkdtemp, prefix="agentls-lint-")
            copy = Path(tmpdir) / (real.name or "buffer")
            await asyncio.to_thread(_write_text, copy, text)
            argv = [
                arg.replace("{file}", str(copy)).replace("{path}", str(real))
                for arg in linter.command
            ]
            linted_names = {copy.name}
        return await _run(linter, argv, text, linted_names, cwd=cwd, env=env)
    finally:
        if tmpdir is not None:
            await asyncio.to_thread(shutil.rmtree, tmpdir, True)


def _write_text(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)


async def _run(
    linter: Linter,
    argv: list[str],
    text: str,
    linted_names: set[str],
    *,
    cwd: str | Path | None,
    env: Mapping[str, str] | None,
) -> LintRun:
    shown = " ".join(argv[:3]) + (" ..." if len(argv) > 3 else "")
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if linter.uses_stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=str(cwd) if cwd is not None else None,
            env=dict(env) if env is not None else None,
            # Its own process group, so a timeout kills what it started too.
            start_new_session=os.name == "posix",
        )
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        return LintRun(
            linter, failure=f"could not start `{shown}`: {reason}", failure_kind="start"
        )
    try:
        data = text.encode("utf-8") if linter.uses_stdin else None
        stdout, stderr = await asyncio.wait_for(proc.communicate(data), linter.timeout)
    except TimeoutError:
        return LintRun(
            linter,
            failure=f"`{shown}` did not finish within {linter.timeout:g} s and was stopped",
            failure_kind="timeout",
        )
    except (BrokenPipeError, ConnectionResetError) as exc:
        return LintRun(linter, failure=f"`{shown}` failed: {exc}", failure_kind="failed")
    finally:
        if proc.returncode is None:
            await _kill(proc)
    out = stdout[:MAX_OUTPUT_BYTES].decode("utf-8", "replace")
    err = stderr[:MAX_OUTPUT_BYTES].decode("utf-8", "replace")
    return _interpret(linter, proc.returncode or 0, out, err, linted_names, shown)


async def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    with contextlib.suppress(Exception):
        # Shielded: a cancelled hook must still reap its child.
        await asyncio.shield(proc.wait())


def _interpret(
    linter: Linter,
    returncode: int,
    out: str,
    err: str,
    linted_names: set[str],
    shown: str,
) -> LintRun:
    try:
        findings, omitted = parse_output(
            out, linter=linter.name, names=linted_names, fmt=linter.output
        )
    except ValueError as exc:
        detail = _first_line(err) or str(exc)
        return LintRun(
            linter,
            failure=f"`{shown}` exited with status {returncode}: {detail}",
            failure_kind="failed",
        )
    if not findings and linter.output == "auto" and err.strip():
        # Linters that write findings to stderr (e.g. some gcc-style tools).
        findings, omitted = parse_output(err, linter=linter.name, names=linted_names)
    if not findings and returncode != 0:
        # Nothing readable and a failing status: a usage or configuration
        # error, a crash, or a format this parser does not know.
        detail = _first_line(err) or _first_line(out) or "no output"
        return LintRun(
            linter,
            failure=f"`{shown}` exited with status {returncode}: {detail}",
            failure_kind="failed",
        )
    return LintRun(linter, findings, omitted=omitted)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return _clip(line.strip(), 200)
    return ""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------- parsing


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


# --------------------------------------------------------------------------- filtering


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


# --------------------------------------------------------------------------- reporting


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
        "(path:line:column, 1-based). Fix them now, before you continue:"
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


def _units(line: str, column: int, encoding: str) -> int:
    prefix = line[: max(column, 0)]
    if encoding == "utf-8":
        return len(prefix.encode("utf-8"))
    if encoding == "utf-32":
        return len(prefix)
    return len(prefix.encode("utf-16-le")) // 2


def _position(lines: Sequence[str], line: int, column: int, encoding: str) -> dict[str, int]:
    if line >= len(lines):
        last = len(lines) - 1
        return {"line": last, "character": _units(lines[last], len(lines[last]), encoding)}
    line = max(line, 0)
    text = lines[line]
    return {"line": line, "character": _units(text, min(column, len(text)), encoding)}


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


# --------------------------------------------------------------------------- the hook


@dataclass
class _Edit:
    tool_name: str
    path: Path
    uri: str
    old_text: str | None
    new_text: str | None
    changed: list[tuple[int, int]] | None
    old_path: Path | None = None  # rename_file: where the file was
    old_uri: str | None = None
    shown: str | None = None  # the path as the agent knows it (relative_path)
    unchanged: bool = False  # write_file with identical content: no edit was sent


class LintersHook:
    """Hook module `linters`. One instance per server process; `register`
    may be called again (settings changed) with a new context, and what was
    published or reported carries over."""

    name = "linters"
    description = "Lint files the agent edits and feed the findings back to it"

    def __init__(self) -> None:
        # uri -> (linter, code, message) counts of the findings last published
        self._outstanding: dict[str, Counter[tuple[str, str, str]]] = {}
        self._reported_failures: set[tuple[str, str]] = set()

    def register(self, hooks: HookRegistry, context: HookContext) -> None:
        resolved: list[list[Linter]] = []
        # The registry abandons a handler after `handler_timeout`; linters
        # are stopped a little earlier, so a slow one is reported as timed
        # out and the others' findings still arrive.
        limit = hooks.handler_timeout
        cap = max(limit - HANDLER_MARGIN_SECONDS, limit / 2) if limit is not None else None

        def linters() -> list[Linter]:
            if not resolved:  # resolved on first use: `which` is not free
                found = configured_linters(context.settings)
                if cap is not None:
                    found = [replace(linter, timeout=min(linter.timeout, cap))
                             for linter in found]
                resolved.append(found)
            return resolved[0]

        async def on_tool_post(event: str, data: dict[str, Any]) -> HookResult:
            return await self.handle(data, context, linters)

        hooks.register("tool:post", on_tool_post, priority=HOOK_PRIORITY, name=self.name)

    # -- one tool call -------------------------------------------------------------
    async def handle(
        self,
        data: Mapping[str, Any],
        context: HookContext,
        linters: Callable[[], list[Linter]],
    ) -> HookResult:
        edit = _edit_from(data, context.workspace_folders)
        if edit is None:
            return HookResult()
        if edit.old_path is not None:
            old_uri = edit.old_uri or edit.old_path.as_uri()
            if old_uri != edit.uri:
                self._clear(old_uri, context)
        if edit.new_text is None or edit.tool_name not in LINTED_TOOLS:
            self._clear(edit.uri, context)
            return HookResult()
        if edit.unchanged:
            return HookResult()
        snapshot = await _snapshot(context, edit.path)
        language_id = getattr(snapshot, "language_id", None) if snapshot is not None else None
        matching = linters_for(linters(), edit.path, language_id)
        if not matching:
            self._clear(edit.uri, context)
            return HookResult()

        new_text = edit.new_text
        changed = edit.changed
        if changed is None:
            changed = changed_line_ranges(edit.old_text, new_text)
        need_baseline = edit.old_text is not None and not _covers_all(changed, new_text)
        cwd = _cwd_for(edit.path, context.workspace_folders)
        env = _linter_env(context.settings)
        old_path = edit.old_path or edit.path

        async def lint(linter: Linter) -> tuple[LintRun, LintRun | None]:
            new_run = run_linter(linter, new_text, edit.path, cwd=cwd, env=env)
            if not need_baseline or edit.old_text is None:
                return await new_run, None
            old_run = run_linter(linter, edit.old_text, old_path, cwd=cwd, env=env)
            new_result, old_result = await asyncio.gather(new_run, old_run)
            return new_result, old_result

        runs = await asyncio.gather(*(lint(linter) for linter in matching))

        problems: list[str] = []
        kept: list[Finding] = []
        omitted = 0
        outstanding = self._outstanding.get(edit.uri, Counter())
        for new_run, old_run in runs:
            if new_run.failure is not None:
                self._note_failure(new_run, problems)
                continue
            baseline: list[Finding] | None
            if old_run is None:
                # A new file (all findings are new) or an edit that touched
                # every line (all findings are in touched lines).
                baseline = []
            elif old_run.failure is not None:
                baseline = None  # unknown: keep touched lines only
            else:
                baseline = old_run.findings
            kept.extend(
                filter_findings(
                    new_run.findings, changed=changed, baseline=baseline, outstanding=outstanding
                )
            )
            omitted += new_run.omitted
        kept.sort(key=lambda f: (f.line, f.column))

        shown_path = edit.shown or _shown_path(edit.path, context.workspace_folders)
        self._publish(edit.uri, kept, new_text, snapshot, context)
        messages = [*problems]
        if kept:
            messages.insert(0, f"{_summary(kept)} in {shown_path} after the agent's edit")
        user_message = "\n".join(messages) or None
        if not kept:
            if user_message:
                return HookResult(user_message=user_message, user_message_level="warning")
            return HookResult()
        max_bytes, max_chars = _injection_limits(context.settings)
        injection = format_injection(
            kept, shown_path=shown_path, tool_name=edit.tool_name,
            max_bytes=max_bytes, max_chars=max_chars, omitted=omitted,
        )
        if injection is None:
            return HookResult(user_message=user_message, user_message_level="warning")
        return HookResult(
            action="inject_context",
            context_injection=injection,
            context_injection_role="system",
            ephemeral=False,
            user_message=user_message,
            user_message_level="warning",
        )

    def _note_failure(self, run: LintRun, problems: list[str]) -> None:
        key = (run.linter.name + " " + " ".join(run.linter.command), run.failure_kind or "")
        log.warning("Linter %s: %s", run.linter.name, run.failure)
        if key in self._reported_failures:
            return
        self._reported_failures.add(key)
        problems.append(
            f"agentls: the linter {run.linter.name} {run.failure}; the agent's edits are not "
            "checked with it. Fix the `linters` setting or install the linter."
        )

    # -- diagnostics -----------------------------------------------------------------
    def _publish(
        self,
        uri: str,
        findings: Sequence[Finding],
        text: str,
        snapshot: Any,
        context: HookContext,
    ) -> None:
        if not findings:
            self._clear(uri, context)
            return
        version = None
        if snapshot is not None and getattr(snapshot, "text", None) == text:
            version = getattr(snapshot, "version", None)
        lines = split_lines(text)
        encoding = _encoding(context)
        diagnostics = [to_diagnostic(f, lines, encoding) for f in findings]
        self._outstanding[uri] = Counter(f.key for f in findings)
        _call_publish(context, uri, diagnostics, version)

    def _clear(self, uri: str, context: HookContext) -> None:
        if self._outstanding.pop(uri, None) is not None:
            _call_publish(context, uri, [], None)


def _call_publish(
    context: HookContext, uri: str, diagnostics: list[dict[str, Any]], version: int | None
) -> None:
    publish = context.publish_diagnostics
    if publish is None:
        return
    try:
        publish(uri, diagnostics, version)
    except Exception:
        log.exception("Publishing linter diagnostics for %s failed", uri)


def _encoding(context: HookContext) -> str:
    """The negotiated position encoding when the LSP side tells it
    (`extra["position_encoding"]`, or the document lookup's
    `position_encoding`; a str or a callable), else UTF-16."""
    value = context.extra.get("position_encoding")
    if value is None:
        value = getattr(context.documents, "position_encoding", None)
    if callable(value):
        try:
            value = value()
        except Exception:
            value = None
    value = getattr(value, "value", value)
    return str(value) if value in ("utf-8", "utf-16", "utf-32") else "utf-16"


def _edit_from(data: Mapping[str, Any], folders: Sequence[Path]) -> _Edit | None:
    tool_name = data.get("tool_name")
    if tool_name not in LINTED_TOOLS and tool_name not in CLEARING_TOOLS:
        return None
    result = data.get("result")
    if not isinstance(result, Mapping) or not result.get("success"):
        return None
    output = result.get("output")
    if not isinstance(output, Mapping) or output.get("applied") is False:
        return None
    raw_path = output.get("path")
    if not isinstance(raw_path, str) or not raw_path:
        return None
    path = Path(raw_path)
    uri = output.get("uri") if isinstance(output.get("uri"), str) else None
    old_text = output.get("old_text")
    new_text = output.get("new_text")
    changed = _ranges(output.get("changed_lines"))
    old_path = None
    old_uri = output.get("old_uri") if isinstance(output.get("old_uri"), str) else None
    if tool_name == "rename_file":
        tool_input = data.get("tool_input")
        source = tool_input.get("path") if isinstance(tool_input, Mapping) else None
        if isinstance(output.get("old_path"), str):
            source = output["old_path"]
        if isinstance(source, str) and source:
            candidate = Path(source)
            if not candidate.is_absolute() and folders:
                candidate = folders[0] / candidate
            if candidate != path:
                old_path = candidate
    return _Edit(
        tool_name=str(tool_name),
        path=path,
        uri=uri or path.as_uri(),
        old_text=old_text if isinstance(old_text, str) else None,
        new_text=new_text if isinstance(new_text, str) else None,
        changed=changed,
        old_path=old_path,
        old_uri=old_uri,
        shown=output["relative_path"] if isinstance(output.get("relative_path"), str) else None,
        unchanged=output.get("unchanged") is True,
    )


def _ranges(value: Any) -> list[tuple[int, int]] | None:
    if not isinstance(value, list):
        return None
    ranges: list[tuple[int, int]] = []
    for item in value:
        if (
            isinstance(item, list | tuple) and len(item) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in item)
        ):
            ranges.append((int(item[0]), int(item[1])))
    return ranges


def _covers_all(changed: Sequence[tuple[int, int]], text: str) -> bool:
    count = len(split_lines(text))
    covered: set[int] = set()
    for start, end in changed:
        covered.update(range(max(start, 0), min(end, count - 1) + 1))
    return len(covered) >= count


async def _snapshot(context: HookContext, path: Path) -> Any:
    lookup = context.documents
    if lookup is None:
        return None
    try:
        return await asyncio.to_thread(lookup, str(path))
    except Exception:
        log.debug("Document lookup for %s failed", path, exc_info=True)
        return None


def _containing_folder(path: Path, folders: Sequence[Path]) -> Path | None:
    for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
        if path == folder or folder in path.parents:
            return folder
    return None


def _cwd_for(path: Path, folders: Sequence[Path]) -> Path | None:
    folder = _containing_folder(path, folders)
    if folder is not None and folder.is_dir():
        return folder
    return path.parent if path.parent.is_dir() else None


def _shown_path(path: Path, folders: Sequence[Path]) -> str:
    folder = _containing_folder(path, folders)
    if folder is not None and path != folder:
        return path.relative_to(folder).as_posix()
    return str(path)


def _linter_env(settings: AgentlsSettings) -> dict[str, str]:
    """The server's environment without the provider's API key."""
    drop = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}
    name = settings.api_key_env_name()
    if name:
        drop.add(name)
    return {k: v for k, v in os.environ.items() if k not in drop}


def _injection_limits(settings: AgentlsSettings) -> tuple[int | None, int | None]:
    """session.injectionSizeLimit in bytes; the per-turn token budget as
    characters (the orchestrator estimates tokens as characters / 4)."""
    session = settings.session
    budget = session.injection_budget_per_turn
    return session.injection_size_limit, (budget * 4 if budget is not None else None)
