"""Run a generated program with its tests, in a subprocess, confined as far
as Linux allows without root (docs/eval.md, "What a program may do").

What is confined, where the system allows it (`confinement()` says what
is on this machine; `agentls eval` prints it):

- a fresh Python in isolated mode (`-I`: no user site-packages, no
  PYTHON* variables) whose environment is only PATH, LANG, PYTHONHASHSEED
  and a private temporary HOME and TMPDIR: no proxy variables, no keys;
- a temporary folder as the working directory, removed afterwards;
- the network: a new, empty network namespace (`unshare -rn`, which also
  gives a new PID namespace); else, with Landlock ABI 4+, no TCP;
- writes: only below the working folder and the temporary HOME/TMPDIR
  (Landlock, confine.py);
- processes: RLIMIT_NPROC; every process the program started is killed
  when it ends, always (the PID namespace, else its process group and
  every process that inherited its marker variable);
- time and memory: a wall-clock limit, RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE,
  no core files; stdin closed, output kept only in part (for the report).

It is NOT a sandbox: the program runs as the user who runs the eval and
can READ everything they can; without Landlock it can write their files,
without `unshare` and Landlock 4 reach the network. Run the eval where that
is acceptable (a container, a throwaway user).
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from agentls.eval.completion import confine

__all__ = ["DEFAULT_TIME_LIMIT", "Confinement", "ExecResult", "confinement", "run_check",
           "run_program"]

DEFAULT_TIME_LIMIT = 10.0
MEMORY_LIMIT_BYTES = 1 << 30
FILE_SIZE_LIMIT_BYTES = 64 << 20
PROCESS_LIMIT = 64  # processes a program may add (threads count too)
OUTPUT_KEPT = 2000
MARK_ENV = "AGENTLS_EXEC_MARK"  # inherited by every process a program starts
_UNSHARE = ("unshare", "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child")


@dataclass(frozen=True, slots=True)
class ExecResult:
    passed: bool
    status: str  # "passed", "failed" (exit status), "timeout"
    returncode: int | None
    output: str  # the tail of stdout + stderr


@dataclass(frozen=True, slots=True)
class Confinement:
    """What this machine lets execute.py confine (see the module docstring)."""

    unshare: list[str] | None  # the command prefix, None when it cannot be used
    landlock: int  # Landlock ABI, 0 when there is none
    why_not_unshare: str

    def describe(self) -> list[str]:
        why = self.why_not_unshare
        if self.unshare:
            network = "network: none (a new network namespace, unshare -rn)"
        elif self.landlock >= 4:
            network = f"network: no TCP (Landlock); UDP and local sockets are open, since {why}"
        else:
            network = f"network: NOT confined, since {why} and Landlock 4+ is missing"
        if self.landlock:
            writes = "writes: only its working folder and its temporary HOME and TMPDIR (Landlock)"
        else:
            writes = "writes: NOT confined (no Landlock on this system): it can write your files"
        if self.unshare:
            children = "children: all killed when the program ends (a PID namespace)"
        else:
            children = ("children: its process group and every process that kept its "
                        f"environment are killed when it ends (no PID namespace, since {why})")
        return [network, writes, children, "reads: NOT confined: it can read what you can read",
                "limits: time, CPU, memory, file size, processes"]


@functools.cache
def confinement() -> Confinement:
    """Probed once: can `unshare` make namespaces here, is Landlock there."""
    landlock = confine.landlock_abi()
    if os.name != "posix" or sys.platform != "linux":
        return Confinement(None, landlock, "this is not Linux")
    binary = shutil.which("unshare")
    if binary is None:
        return Confinement(None, landlock, "the unshare command is not installed")
    prefix = [binary, *_UNSHARE[1:]]
    try:
        probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return Confinement(None, landlock, f"unshare failed ({exc})")
    if probe.returncode != 0:
        said = probe.stderr.decode("utf-8", "replace").strip().splitlines()
        return Confinement(None, landlock, "unshare is not allowed here "
                           f"({said[-1] if said else f'exit {probe.returncode}'})")
    return Confinement(prefix, landlock, "")


def _user_processes() -> int:
    """How many processes this user has (RLIMIT_NPROC counts them all)."""
    uid = os.getuid()
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                count += entry.stat().st_uid == uid
            except OSError:
                pass
    return count


def _limits(seconds: float, processes: int | None) -> None:  # pragma: no cover - in the child
    import resource

    cpu = int(seconds) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    for which, value in ((resource.RLIMIT_AS, MEMORY_LIMIT_BYTES),
                         (resource.RLIMIT_FSIZE, FILE_SIZE_LIMIT_BYTES),
                         (resource.RLIMIT_NPROC, processes)):
        if value is None:
            continue
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_program(source: str, *, time_limit: float = DEFAULT_TIME_LIMIT) -> ExecResult:
    """Run `source` as a script; passed when it exits 0 within the limit."""
    with tempfile.TemporaryDirectory(prefix="agentls-exec-") as folder:
        script = Path(folder) / "program.py"
        script.write_text(source, encoding="utf-8")
        return _run(script, Path(folder), time_limit)


def run_check(source: str, folder: Path, *, time_limit: float = DEFAULT_TIME_LIMIT,
              output_chars: int = OUTPUT_KEPT) -> ExecResult:
    """Run `source` with `folder` as the current directory and first on
    sys.path (an agent task's check on its workspace), under the same limits,
    keeping the last `output_chars` of its output.
    The script itself is written outside `folder` and removed afterwards."""
    prelude = f"import sys\nsys.path.insert(0, {str(folder)!r})\n"
    with tempfile.TemporaryDirectory(prefix="agentls-check-") as scratch:
        script = Path(scratch) / "check.py"
        script.write_text(prelude + source, encoding="utf-8")
        return _run(script, folder, time_limit, output_chars)


def _run(script: Path, cwd: Path, time_limit: float, output_chars: int = OUTPUT_KEPT
         ) -> ExecResult:
    posix = os.name == "posix"
    where = confinement() if posix else Confinement(None, 0, "this is not POSIX")
    mark = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="agentls-run-") as private:
        home, tmp = Path(private) / "home", Path(private) / "tmp"
        home.mkdir()
        tmp.mkdir()
        env = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8",
               "PYTHONHASHSEED": "0", "HOME": str(home), "TMPDIR": str(tmp), "TMP": str(tmp),
               "TEMP": str(tmp), MARK_ENV: mark}
        argv = [sys.executable, "-I", "-B", str(script)]
        if where.landlock:
            argv[3:] = [confine.__file__, "--write", str(cwd), "--write", private, "--",
                        str(script)]
        # RLIMIT_NPROC counts all the user's processes (in a user namespace
        # too, at the outer level); root is not limited by it.
        processes = _user_processes() + PROCESS_LIMIT if posix and os.getuid() != 0 else None
        with open(Path(private) / "output", "w+b") as output:
            process = subprocess.Popen(
                [*(where.unshare or []), *argv], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                stdout=output, stderr=subprocess.STDOUT, start_new_session=posix,
                preexec_fn=(lambda: _limits(time_limit, processes)) if posix else None)
            try:
                returncode: int | None = process.wait(timeout=time_limit)
            except subprocess.TimeoutExpired:
                returncode = None
            finally:
                _kill_all(process, posix, mark)
            output.seek(max(0, output.seek(0, os.SEEK_END) - output_chars * 4))
            tail = _tail(output.read(), output_chars)
    if returncode is None:
        return ExecResult(False, "timeout", None, tail)
    passed = returncode == 0
    return ExecResult(passed, "passed" if passed else "failed", returncode, tail)


def _kill_all(process: subprocess.Popen[bytes], posix: bool, mark: str) -> None:
    """The program and everything it started, whether it ended or not: its
    process group, and any process that left it (setsid) but kept the marker."""
    if not posix:
        process.kill()
        process.wait()
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    for _ in range(3):  # a marked process may fork while it is being killed
        marked = _marked(mark)
        if not marked:
            return
        for pid in marked:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def _marked(mark: str) -> list[int]:
    needle = f"{MARK_ENV}={mark}".encode()
    found = []
    try:
        entries = os.scandir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as handle:
                if needle in handle.read().split(b"\0"):
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def _tail(output: bytes | None, chars: int = OUTPUT_KEPT) -> str:
    return (output or b"").decode("utf-8", "replace")[-chars:]
