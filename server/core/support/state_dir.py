"""Where agentls keeps its per-user state (the session database, the
workspace-trust decisions): $AGENTLS_STATE_DIR or the platform's user state
directory. Its own module so that reading the trust file at start-up does not
import the session store (sqlite3).

What is kept there is private (approved secret files' text is in the
session database and its checkpoints): the folder is created 0700 and the
files 0600 (`ensure_private_dir`, `restrict_file`, `write_private_file`),
also for the log file and the runtime folder of the socket transports.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

import platformdirs

STATE_DIR_ENV = "AGENTLS_STATE_DIR"
DB_FILENAME = "sessions.sqlite3"
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600

log = logging.getLogger("agentls.state_dir")


class PrivatePathError(OSError):
    """A folder or file meant to be private cannot be made so (another
    user owns it, or it is not what it should be); the message says what to do."""


def default_state_dir(environ: Mapping[str, str] = os.environ) -> Path:
    override = environ.get(STATE_DIR_ENV, "").strip()
    return Path(override).expanduser() if override else Path(
        platformdirs.user_state_dir("agentls"))


def default_store_path(environ: Mapping[str, str] = os.environ) -> Path:
    """Where the session database lives: $AGENTLS_STATE_DIR or the user state dir."""
    return default_state_dir(environ) / DB_FILENAME


def runtime_base(environ: Mapping[str, str] = os.environ, *,
                 run_user: Path = Path("/run/user"), tmp: Path = Path("/tmp")) -> Path:
    """The user's runtime folder, by the one rule the editors follow too
    (docs/security.md): $XDG_RUNTIME_DIR when set, else /run/user/UID when it
    is a folder, else /tmp/runtime-UID."""
    base = environ.get("XDG_RUNTIME_DIR", "").strip()
    if base:
        return Path(base)
    if not hasattr(os, "getuid"):
        return Path(platformdirs.user_runtime_dir())
    uid = os.getuid()
    if (run_user / str(uid)).is_dir():
        return run_user / str(uid)
    return tmp / f"runtime-{uid}"


def runtime_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """runtime_base()/agentls, created 0700; every folder on the way must be
    this user's or root's and writable by nobody else (or sticky, as /tmp)."""
    base = runtime_base(environ)
    if not environ.get("XDG_RUNTIME_DIR", "").strip() and not base.exists():
        ensure_private_dir(base)  # /tmp/runtime-UID, 0700 as XDG asks of a runtime folder
    check_folders_on_the_way(base)
    return ensure_private_dir(base / "agentls")


def ensure_private_dir(folder: Path) -> Path:
    """Create `folder` (and its parents) and make it 0700. A folder that
    already exists and belongs to this user is tightened to 0700; one owned
    by another user, or that is not a folder, raises PrivatePathError."""
    folder = Path(folder)
    folder.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    info = folder.lstat()
    if stat.S_ISLNK(info.st_mode):
        info = folder.stat()  # a link the user made on purpose (e.g. into another disk)
    if not stat.S_ISDIR(info.st_mode):
        raise PrivatePathError(f"{folder} is not a folder")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise PrivatePathError(f"{folder} belongs to another user (uid {info.st_uid}); "
                               "choose a folder of your own")
    if stat.S_IMODE(info.st_mode) != PRIVATE_DIR_MODE:
        os.chmod(folder, PRIVATE_DIR_MODE)
        log.info("Made %s private (0700)", folder)
    return folder


def check_own_dir(folder: Path) -> Path:
    """A folder the user chose (not one agentls made): it must exist, belong
    to this user and be writable by nobody else, or PrivatePathError says
    so. Its mode is not changed (it may be the home folder)."""
    folder = Path(folder)
    try:
        info = folder.stat()
    except FileNotFoundError:
        return ensure_private_dir(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise PrivatePathError(f"{folder} is not a folder")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise PrivatePathError(f"{folder} belongs to another user (uid {info.st_uid}); "
                               "choose a folder of your own")
    if stat.S_IMODE(info.st_mode) & 0o022:
        raise PrivatePathError(f"{folder} is writable by other users (mode "
                               f"{stat.S_IMODE(info.st_mode):o}), who could replace what "
                               "agentls puts there; choose a folder only you can write")
    return folder


def check_folders_on_the_way(folder: Path) -> Path:
    """Every folder from `folder` up to `/`, as written and as resolved, must
    belong to this user or root and be writable by nobody else, as OpenSSH
    asks of the paths it trusts; a sticky folder (`/tmp`) may be writable by
    all, since others cannot rename or remove what is below it. Otherwise
    PrivatePathError names the folder: another user could swap what is
    below it (a socket, a token file) for their own."""
    if not hasattr(os, "getuid"):
        return folder
    uid = os.getuid()
    folder = Path(os.path.abspath(folder))
    seen: set[Path] = set()
    for start in (folder, Path(os.path.realpath(folder))):
        for each in (start, *start.parents):
            if each in seen:
                continue
            seen.add(each)
            try:
                info = each.lstat()
            except FileNotFoundError:
                continue  # made later, by us, inside a folder checked here
            if stat.S_ISLNK(info.st_mode):
                continue  # its folder is checked here, and its target in the resolved walk
            mode = stat.S_IMODE(info.st_mode)
            if info.st_uid not in (uid, 0):
                raise PrivatePathError(
                    f"{each} belongs to another user (uid {info.st_uid}), who could replace "
                    "what agentls puts below it; use a folder of your own")
            if mode & 0o022 and not mode & stat.S_ISVTX:
                raise PrivatePathError(
                    f"{each} is writable by other users (mode {mode:o}), who could replace "
                    "what agentls puts below it; use a folder only you (or root) can write")
    return folder


def restrict_file(path: Path) -> bool:
    """Make an existing file of this user 0600; True when its mode changed.
    A file that does not exist is left alone."""
    try:
        info = Path(path).stat()
    except FileNotFoundError:
        return False
    if stat.S_IMODE(info.st_mode) & 0o077 == 0:
        return False
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise PrivatePathError(f"{path} belongs to another user (uid {info.st_uid}) and is "
                               "readable by others; choose a file of your own")
    os.chmod(path, stat.S_IMODE(info.st_mode) & ~0o077)
    return True


def open_private_log(path: Path) -> tuple[TextIO, bool]:
    """`path` opened for appending, created 0600: (file, True when an existing
    file readable by others was tightened). A symlink, or a file that is not
    this user's own regular file, raises PrivatePathError: a log in a shared
    folder (/tmp) could otherwise be a link planted to make the server append
    to another file, or a file another user reads."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, PRIVATE_FILE_MODE)
    except OSError as exc:
        if Path(path).is_symlink():
            raise PrivatePathError(f"{path} is a symbolic link; give the log file's real "
                                   "path") from exc
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PrivatePathError(f"{path} is not a regular file")
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise PrivatePathError(f"{path} belongs to another user (uid {info.st_uid}); "
                                   "choose a log file of your own")
        tightened = bool(stat.S_IMODE(info.st_mode) & 0o077)
        if tightened:
            os.fchmod(fd, stat.S_IMODE(info.st_mode) & ~0o077)
        return os.fdopen(fd, "a", encoding="utf-8"), tightened
    except BaseException:
        os.close(fd)
        raise


def create_private_file(path: Path) -> bool:
    """Create `path` empty with mode 0600 unless it exists; an existing one
    is tightened to 0600. True when an existing file was tightened."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    except FileExistsError:
        if restrict_file(path):
            log.warning("%s was readable by other users; it is now 0600", path)
            return True
        return False
    os.close(fd)
    return False


def write_private_file(path: Path, text: str) -> None:
    """Write `text` to `path` (replacing it) with mode 0600 from the start."""
    path = Path(path)
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def free_socket_path(path: Path) -> str | None:
    """Make `path` free for a new Unix socket: nothing is there, or a socket
    nobody answers (left by a killed server) is removed. Otherwise why not:
    "not a socket" (never followed or removed) or "listening"."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    if not stat.S_ISSOCK(info.st_mode):
        return "not a socket"
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except OSError as exc:
        if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT):
            raise
        path.unlink(missing_ok=True)
        return None
    finally:
        probe.close()
    return "listening"
