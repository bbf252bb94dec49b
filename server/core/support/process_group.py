"""Stopping a child process together with everything it started.

The children agentls runs (the local model's server, linters, the agent's
commands) are started with `start_new_session=True`, so each leads its own
process group; killing the group also stops what the child started in the
background. Where there are no process groups (Windows), the child itself
is killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Protocol

__all__ = ["GroupLeader", "kill_process_group"]


class GroupLeader(Protocol):
    """A started child: subprocess.Popen and asyncio.subprocess.Process both are."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def kill(self) -> None: ...


def kill_process_group(proc: GroupLeader, sig: int | None = None) -> bool:
    """Send `sig` (SIGKILL by default) to the process group `proc` leads;
    True when there was a group (or, without process groups, a running
    process) to signal. The group outlives its leader's exit (the
    background children a command left), so it is signalled whether or not
    the leader has exited; a caller that must not signal a reaped leader's
    recycled id checks `returncode` first."""
    if hasattr(os, "killpg"):
        try:
            os.killpg(proc.pid, signal.SIGKILL if sig is None else sig)
        except OSError:  # no such group any more, or not ours
            return False
        return True
    if proc.returncode is None:  # pragma: no cover - Windows: the process itself
        with contextlib.suppress(OSError):
            proc.kill()
            return True
    return False
