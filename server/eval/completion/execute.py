"""Run a generated program with its tests, in a subprocess, with limits.

What the limits are, and are not:

- a fresh Python in isolated mode (`-I`: no user site-packages, no
  PYTHON* variables) whose environment is only PATH, LANG and
  PYTHONHASHSEED: no proxy variables, no keys;
- a temporary folder as the working directory, removed afterwards;
- a wall-clock time limit; past it the whole process group is killed;
- on POSIX, a CPU-time and an address-space limit (RLIMIT_CPU, RLIMIT_AS)
  and no core files;
- stdin closed, output kept only in part (for the report).

It is NOT a sandbox: the program runs as the user who runs the eval, can
read and write their files and open network connections (nothing stops a
socket; the environment only carries no proxy settings). HumanEval's tests
do none of this, but the completion is a model's text: run the eval where
that is acceptable (a container, a throwaway user).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEFAULT_TIME_LIMIT", "ExecResult", "run_check", "run_program"]

DEFAULT_TIME_LIMIT = 10.0
MEMORY_LIMIT_BYTES = 1 << 30
OUTPUT_KEPT = 2000


@dataclass(frozen=True, slots=True)
class ExecResult:
    passed: bool
    status: str  # "passed", "failed" (exit status), "timeout"
    returncode: int | None
    output: str  # the tail of stdout + stderr


def _limits(seconds: float) -> None:  # pragma: no cover - runs in the child
    import resource

    cpu = int(seconds) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    try:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    except (ValueError, OSError):
        pass
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_program(source: str, *, time_limit: float = DEFAULT_TIME_LIMIT) -> ExecResult:
    """Run `source` as a script; passed when it exits 0 within the limit."""
    with tempfile.TemporaryDirectory(prefix="agentls-exec-") as folder:
        script = Path(folder) / "program.py"
        script.write_text(source, encoding="utf-8")
        return _run(script, Path(folder), time_limit)


def run_check(source: str, folder: Path, *, time_limit: float = DEFAULT_TIME_LIMIT
              ) -> ExecResult:
    """Run `source` with `folder` as the current directory and first on
    sys.path (an agent task's check on its workspace), under the same limits.
    The script itself is written outside `folder` and removed afterwards."""
    prelude = f"import sys\nsys.path.insert(0, {str(folder)!r})\n"
    with tempfile.TemporaryDirectory(prefix="agentls-check-") as scratch:
        script = Path(scratch) / "check.py"
        script.write_text(prelude + source, encoding="utf-8")
        return _run(script, folder, time_limit)


def _run(script: Path, cwd: Path, time_limit: float) -> ExecResult:
    env = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8",
           "PYTHONHASHSEED": "0"}
    posix = os.name == "posix"
    process = subprocess.Popen(
        [sys.executable, "-I", "-B", str(script)], cwd=cwd, env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=posix,
        preexec_fn=(lambda: _limits(time_limit)) if posix else None)
    try:
        output, _ = process.communicate(timeout=time_limit)
    except subprocess.TimeoutExpired:
        _kill(process, posix)
        output, _ = process.communicate()
        return ExecResult(False, "timeout", None, _tail(output))
    passed = process.returncode == 0
    return ExecResult(passed, "passed" if passed else "failed", process.returncode,
                      _tail(output))


def _kill(process: subprocess.Popen[bytes], posix: bool) -> None:
    try:
        if posix:
            os.killpg(process.pid, signal.SIGKILL)  # the program's children too
        else:
            process.kill()
    except (ProcessLookupError, PermissionError):
        process.kill()


def _tail(output: bytes | None) -> str:
    return (output or b"").decode("utf-8", "replace")[-OUTPUT_KEPT:]
