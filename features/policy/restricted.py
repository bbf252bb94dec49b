"""Restricted mode: a workspace folder that is a home folder, `/` or a
system folder (docs/security.md, "Restricted mode").

Such a folder holds the files that make a shell, a login, git, the desktop
and systemd run commands, and every credential of the user; one "Allow for
session" there would be an open door. So, as VS Code's restricted mode and
Claude Code's home-folder protections do, agentls names the folder to the
user and, until the user lifts it (`approval.unrestrictedFolders` in the
user's own settings, never the workspace file), asks every time: each file
change, command and MCP call is asked with Allow once / Deny, "Allow for
session" is not offered and no approval rule allows one. Reads follow the
usual rules (secret files ask).

A project folder *inside* the home folder (`~/src/app`) or inside `/usr`,
`/opt`, `/srv`, `/var` (`/usr/src/app` is a common container workdir) is
an ordinary workspace.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath

__all__ = ["RestrictedFolder", "restricted_folders", "restricted_notice", "restricted_reason"]

# Folders that are restricted themselves; a project below them is not.
_SYSTEM_FOLDERS = frozenset({
    "/", "/usr", "/usr/local", "/usr/share", "/usr/lib", "/usr/bin", "/usr/sbin", "/opt",
    "/var", "/var/lib", "/srv", "/tmp", "/var/tmp", "/home", "/root", "/mnt", "/media",
    "/run", "/snap", "/nix", "/nix/store", "/Users", "/Volumes", "/Applications",
    "/private", "/private/var", "/private/tmp", "/Library",
})
# Folders whose whole tree is the system's (configuration, programs, kernel
# interfaces): never a project.
_SYSTEM_TREES = ("/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot",
                 "/dev", "/proc", "/sys", "/System", "/private/etc")


@dataclass(frozen=True)
class RestrictedFolder:
    folder: Path
    what: str  # "your home folder", "the root of the file system", ...

    def to_wire(self) -> dict[str, str]:
        return {"folder": str(self.folder), "why": self.what}


def _real(path: str | os.PathLike[str]) -> Path | None:
    try:
        return Path(os.path.realpath(os.path.expanduser(os.fspath(path))))
    except (OSError, ValueError):
        return None


def _homes() -> list[Path]:
    found = []
    for text in (os.environ.get("HOME"), os.environ.get("USERPROFILE"), "~"):
        if text:
            real = _real(text)
            if real is not None and real not in found and real != Path(real.anchor):
                found.append(real)
    return found


def _what(folder: Path, homes: Sequence[Path]) -> str | None:
    if folder == Path(folder.anchor):
        return "the root of the file system"
    if folder in homes:
        return "your home folder"
    if any(home.is_relative_to(folder) for home in homes):
        return "a folder that holds your home folder"
    posix = folder.as_posix()
    if os.name == "nt":
        windows = PurePath(folder).parts[1:]
        if windows and windows[0].casefold() in ("windows", "program files",
                                                 "program files (x86)", "programdata",
                                                 "users"):
            return "a system folder"
        return None
    if posix in _SYSTEM_FOLDERS:
        return "a system folder"
    if any(posix == tree or posix.startswith(tree + "/") for tree in _SYSTEM_TREES):
        return "a system folder"
    return None


def restricted_folders(folders: Iterable[str | os.PathLike[str]],
                       lifted: Iterable[str] = ()) -> list[RestrictedFolder]:
    """The workspace folders that run in restricted mode: a home folder,
    a folder above it, the root or a system folder, unless the user listed
    it in `approval.unrestrictedFolders` (`lifted`)."""
    homes = _homes()
    unrestricted = {real for text in lifted if text.strip()
                    for real in [_real(text.strip())] if real is not None}
    found = []
    for given in folders:
        folder = _real(given)
        if folder is None or folder in unrestricted:
            continue
        what = _what(folder, homes)
        if what is not None:
            found.append(RestrictedFolder(folder, what))
    return found


def restricted_notice(found: Sequence[RestrictedFolder]) -> str | None:
    """What the user is told once when a workspace runs in restricted mode."""
    if not found:
        return None
    named = "; ".join(f"{item.folder} is {item.what}" for item in found)
    return (f"agentls runs in restricted mode: the workspace folder {named}. Every file change, "
            "command and MCP call is asked each time (Allow once / Deny), \"Allow for "
            "session\" is not offered and approval rules do not allow them. Open a project "
            "folder instead, or list this folder in approval.unrestrictedFolders in your user "
            "settings to lift restricted mode.")


def restricted_reason(found: Sequence[RestrictedFolder]) -> str:
    """The line an approval question shows in restricted mode."""
    item = found[0]
    return (f"The workspace folder {item.folder} is {item.what}: agentls runs in restricted "
            "mode there, so every change is asked each time.")
