"""What an eval program may do, on Linux without root (execute.py runs each
program through this file; docs/eval.md, "What a program may do").

As a script, `python -I -B confine.py --write DIR ... -- program.py` cuts
the process down, irreversibly, and then runs the program in it:

- Landlock (Linux 5.13+, no root needed): files may be created, written,
  truncated, renamed or removed only below the --write folders (and
  /dev/null written); with Landlock ABI 4+ no TCP connection or bind
  either; with ABI 6+ no signal to a process outside and no abstract Unix
  socket outside;
- RLIMIT_NPROC: a bounded number of processes (set by execute.py).

Only the standard library: it runs in the program's own fresh interpreter.
"""

from __future__ import annotations

import ctypes
import os
import platform
import runpy
import sys

# linux/landlock.h
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on every arch
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
WRITE_FILE, REMOVE_DIR, REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKES = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
REFER, TRUNCATE = 1 << 13, 1 << 14
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none."""
    if platform.system() != "Linux":
        return 0
    try:
        version = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0),
                                  ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def restrict(writable: list[str]) -> int:
    """Allow writes only below `writable` from now on, for this process and
    everything it starts; returns the ABI used. Raises OSError when Landlock
    is there but refuses."""
    abi = landlock_abi()
    if abi < 1:
        return 0
    dir_rights = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | _MAKES
    if abi >= 2:
        dir_rights |= REFER
    if abi >= 3:
        dir_rights |= TRUNCATE
    file_rights = dir_rights & (WRITE_FILE | TRUNCATE)
    fields = [dir_rights]
    if abi >= 4:
        fields.append(NET_BIND_TCP | NET_CONNECT_TCP)
    if abi >= 6:
        fields.append(SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL)
    attr = (ctypes.c_uint64 * len(fields))(*fields)
    libc = _libc()
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr),
                           ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        for path in [*writable, "/dev/null"]:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rights = dir_rights if os.path.isdir(path) else file_rights
                rule = _PathBeneath(rights, fd)
                if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule),
                                ctypes.c_uint32(0)) < 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


def main(argv: list[str]) -> None:  # pragma: no cover - runs in the program's process
    writable: list[str] = []
    while argv and argv[0] == "--write":
        writable.append(argv[1])
        argv = argv[2:]
    if not argv or argv[0] != "--":
        raise SystemExit("usage: confine.py --write DIR ... -- program.py")
    program = argv[1]
    restrict(writable)
    sys.argv = [program]
    runpy.run_path(program, run_name="__main__")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
