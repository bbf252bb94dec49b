"""Running one linter as a subprocess in its own process group, with a
timeout, on a temporary copy of the text or on its standard input."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agentls.core.support.process_group import kill_process_group
from agentls.features.linters.config import Linter
from agentls.features.linters.parse import Finding, _first_line, parse_output

MAX_OUTPUT_BYTES = 4_000_000  # linter stdout/stderr kept for parsing


@dataclass(frozen=True)
class LintRun:
    linter: Linter
    findings: list[Finding] = field(default_factory=list)
    # Set when the linter did not produce a usable answer: "start" (could not
    # be run), "timeout", "failed" (crashed or printed nothing readable).
    failure: str | None = None
    failure_kind: Literal["start", "timeout", "failed"] | None = None
    omitted: int = 0  # findings past MAX_FINDINGS


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
    kill_process_group(proc)
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


