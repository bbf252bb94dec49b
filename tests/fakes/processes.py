"""Programs for process-supervision tests (run_command's supervisor)."""

from __future__ import annotations

from pathlib import Path


def setsid_daemon(pidfile: Path, *, then: str = "") -> str:
    """Python source for `python -c`: fork -> setsid -> fork -> sleep 300 (a
    daemon that leaves the command's process group and closes its output),
    writing the daemon's pid to `pidfile`; the command itself exits after
    0.3 s, running `then` last."""
    return ("import os, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            f"        open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
            "        os.closerange(0, 3)\n"
            "        time.sleep(300)\n"
            "    os._exit(0)\n"
            "time.sleep(0.3)\n"
            + then)
