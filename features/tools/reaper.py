"""run_command's supervisor: runs one command and, when it ends (or on
SIGTERM from the server), kills every process the command left behind,
including ones that left its process group with setsid (docs/security.md).

Run as a script, not imported: `python -I reaper.py REPORT -- argv...`
(standard library only, so it starts fast). On Linux it makes itself a
child subreaper (prctl PR_SET_CHILD_SUBREAPER): every orphaned descendant,
daemons included, is re-parented to it instead of to init, so it can find
and stop them. It writes what it stopped to REPORT as JSON
({"killed": [{"pid", "name"}], "error": ...}) and exits with the command's
status (re-raising the command's signal). Elsewhere it still runs the
command and stops its process group.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

PR_SET_CHILD_SUBREAPER = 36
_SETTLE_ROUNDS = 3


class _Stop(Exception):
    """SIGTERM/SIGINT/SIGHUP from the server: stop everything now."""


def _subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _children(parent: int) -> list[int]:
    """Live children of `parent`, from /proc (Linux)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == parent and fields[0] != b"Z":
            found.append(int(entry))
    return found


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return "?"


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _stop_descendants(killed: list[dict[str, Any]]) -> None:
    """SIGKILL every child until none is left for a few rounds (killing a
    process re-parents its own children to us)."""
    me, quiet = os.getpid(), 0
    while quiet < _SETTLE_ROUNDS:
        _reap()
        pids = _children(me)
        if not pids:
            quiet += 1
            time.sleep(0.02)
            continue
        quiet = 0
        for pid in pids:
            name = _name(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.append({"pid": pid, "name": name})
        time.sleep(0.02)


def _raise_stop(signum: int, frame: Any) -> None:
    raise _Stop


def main(argv: list[str]) -> int:
    report_path, command = argv[0], argv[2:]
    report: dict[str, Any] = {"killed": []}
    subreaper = _subreaper()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _raise_stop)
    status = 1
    child: subprocess.Popen[bytes] | None = None
    try:
        try:
            child = subprocess.Popen(command)
        except OSError as exc:
            report["error"] = {"kind": type(exc).__name__, "strerror": exc.strerror or str(exc)}
            return 127
        status = child.wait()
    except _Stop:
        report["stopped"] = True
        if child is not None and child.poll() is None:
            child.kill()
            with contextlib.suppress(Exception):
                child.wait(2)
        status = -signal.SIGKILL
    finally:
        if subreaper:
            _stop_descendants(report["killed"])
        with open(report_path, "w", encoding="utf-8") as handle:
            json.dump(report, handle)
    if status < 0:  # end the way the command ended, so the server sees its signal
        if -status not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
