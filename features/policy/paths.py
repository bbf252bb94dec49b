"""Where a tool's paths lead: the approval policy's confinement
(features/policy/rules.py, step 1). Each path is resolved the way the operating
system will see it: relative to the first workspace folder, `..` and
symlinks resolved (for a file that does not exist yet, through its deepest
existing parent), letter case canonicalised on case-insensitive file
systems, and on POSIX also read with `\\` as a separator (`..\\..\\x`);
Windows drive and UNC paths are refused there. Anything outside every
workspace folder is refused with the reason.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ["Refused", "Resolver", "Target", "canonical_case", "is_case_insensitive"]

log = logging.getLogger("agentls.policy")

DRIVE = re.compile(r"^[A-Za-z]:([\\/]|$)")


@dataclass(frozen=True)
class Target:
    """One resolved reading of one path argument."""

    argument: str
    given: str
    resolved: Path
    folder: Path
    rel: str  # posix path relative to `folder` ("." for the folder itself)


class Refused(Exception):
    def __init__(self, reason: str, *, security: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.security = security


# --------------------------------------------------------------------------- paths


def is_case_insensitive(folder: Path) -> bool:
    """Whether `folder` lives on a case-insensitive file system (macOS and
    Windows defaults): the same path with its letters' case swapped exists
    and is the same directory."""
    probe = folder
    while probe != probe.parent:
        swapped = probe.name.swapcase()
        if swapped != probe.name:
            other = probe.parent / swapped
            try:
                return os.path.samefile(probe, other)
            except OSError:
                return False
        probe = probe.parent
    return os.path.normcase("A") == "a"


def _fold(name: str) -> str:
    return unicodedata.normalize("NFC", name).casefold()


def canonical_case(path: Path) -> Path:
    """`path` with each existing component spelled as the directory lists
    it (on a case- or normalisation-insensitive file system `SRC/App.py`
    and `src/app.py` are one file; rules must see one spelling)."""
    parts = path.parts
    current = Path(parts[0])
    for index, name in enumerate(parts[1:], start=1):
        candidate = current / name
        if not os.path.lexists(candidate):
            return current.joinpath(*parts[index:])
        try:
            entries = os.listdir(current)
        except OSError:
            current = candidate
            continue
        if name not in entries:
            folded = _fold(name)
            match = next((entry for entry in entries if _fold(entry) == folded), None)
            if match is not None:
                candidate = current / match
        current = candidate
    return current


class Resolver:
    """Resolves tool paths against the workspace folders (POSIX and Windows)."""

    def __init__(self, folders: Sequence[str | Path]) -> None:
        resolved: list[Path] = []
        for folder in folders:
            text = str(folder).strip()
            if not text:
                continue
            try:
                resolved.append(Path(os.path.realpath(Path(text).expanduser())))
            except (OSError, ValueError):
                log.warning("Workspace folder %r cannot be resolved; ignored", text)
        self.fold_case = any(is_case_insensitive(f) for f in resolved)
        self.folders = tuple(canonical_case(f) if self.fold_case else f for f in resolved)

    def readings(self, argument: str, value: str) -> list[Target]:
        """Every way the OS, a tool or a confused model may read `value`
        (as given, stripped, a file:// URI decoded, `\\` as a separator on
        POSIX); each must land inside a workspace folder, else Refused."""
        text = value.strip()
        if not text:
            raise Refused(f"The argument {argument!r} is empty; give a path inside the "
                           "workspace.", security=False)
        if "\0" in value:
            raise Refused(f"The argument {argument!r} contains a NUL character; not a path.")
        texts = [value, text]
        if text.startswith("file://"):
            texts.append(unquote(urlsplit(text).path))
        if os.sep == "/":
            for reading in list(texts):
                if DRIVE.match(reading) or reading.startswith("\\\\"):
                    raise Refused(
                        f"{value!r} is a Windows drive or network path, which is outside the "
                        f"workspace folders ({self._shown_folders()}). Use a path relative to "
                        "the workspace root, with '/' between folders."
                    )
                if "\\" in reading:
                    # The OS reads a backslash as part of a name, a model may
                    # mean a separator: both readings must stay inside.
                    texts.append(reading.replace("\\", "/"))
        unique = list(dict.fromkeys(texts))
        return [self._target(argument, value, t) for t in unique]

    def _target(self, argument: str, given: str, text: str) -> Target:
        raw = Path(text)
        candidate = raw if raw.is_absolute() else self.folders[0] / raw
        try:
            resolved = Path(os.path.realpath(candidate))
        except (OSError, ValueError) as exc:
            raise Refused(f"{given!r} cannot be resolved ({exc}); denied.") from exc
        # realpath leaves a symlink loop unresolved; a path that still holds a
        # symlink leads who knows where. One stat finds it (ELOOP), in time
        # linear in the depth: asking each parent is_symlink() was quadratic
        # (0.15 s on the event loop for a path 2,000 folders deep).
        try:
            os.stat(resolved)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Refused(f"{given!r} goes through a symlink loop; denied.") from None
        except ValueError:
            pass
        if self.fold_case:
            resolved = canonical_case(resolved)
        for folder in self.folders:
            if resolved == folder or resolved.is_relative_to(folder):
                rel = resolved.relative_to(folder).as_posix()
                return Target(argument, given, resolved, folder, rel or ".")
        raise Refused(
            f"{given!r} resolves to {resolved}, which is outside the workspace folders "
            f"({self._shown_folders()}). Tools may only touch files inside them; use a path "
            "relative to the workspace root."
        )

    def _shown_folders(self) -> str:
        return ", ".join(str(f) for f in self.folders) or "none open"
