"""GGUF models from a Hugging Face hub: `hf:<owner>/<repo>[:<quant or file>]`.

The same short form llama.cpp's `-hf` and Ollama's `hf.co/` take. Every
download goes through `huggingface_hub` (imported only here, on first use),
so HF_ENDPOINT, HF_TOKEN, HF_HOME / HF_HUB_CACHE and its shared cache work
as users of other tools expect: a model pulled by llama.cpp or LM Studio's
hub client is found again, and one pulled here is theirs too.

What this module adds on top: choosing the file (a quant tag such as
`Q4_K_M` or a file name), a memory check before a byte is fetched, progress
and cancellation through a callback, a SHA-256 check against the hub's LFS
metadata, a GGUF magic check, and errors that name the model and say what
to do. A file that failed a check is removed from the cache (only inside
it), so it is never taken for a complete one later. A hub is not trusted
with paths: every name it returns is checked before it becomes one, and the
file returned must lie inside the cache (hub_names.py).

Synchronous on purpose: it runs in a worker thread (downloads.py), never on
the event loop.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentls.core.types.errors import ModelError
from agentls.providers.local.models.hub_names import (
    COMMIT,
    hub_endpoint,
    inside,
    refused,
    safe_repo_path,
    use_checked_client,
)

logger = logging.getLogger("agentls.providers.local")

HF_PREFIXES = ("hf:", "hf.co/", "huggingface.co/")
# Tried in order when the reference names no quant: the common "good enough
# on a laptop" choices first (what llama.cpp's -hf picks too).
PREFERRED_QUANTS = ("Q4_K_M", "Q4_K_S", "Q4_0", "Q5_K_M", "Q6_K", "Q8_0", "F16")
GGUF_MAGIC = b"GGUF"
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_SPLIT_PART = re.compile(r"-\d{5}-of-\d{5}\.gguf$")
INSTALL_HUB = "pip install 'huggingface_hub>=1,<3'"

# done bytes, total bytes (None while unknown)
ProgressCallback = Callable[[int, int | None], None]


class DownloadCancelled(ModelError):
    """The user cancelled the download (window/workDoneProgress/cancel, Ctrl-C)."""


@dataclass(frozen=True)
class HfReference:
    repo_id: str
    selector: str | None  # a quant tag ("Q4_K_M") or a file name ("x.Q8_0.gguf")
    text: str  # as the user wrote it, for messages

    @property
    def display(self) -> str:
        return f"hf:{self.repo_id}" + (f":{self.selector}" if self.selector else "")


@dataclass(frozen=True)
class RemoteFile:
    filename: str
    size: int | None
    sha256: str | None  # from the hub's LFS metadata; None for non-LFS files


def is_hf_reference(text: str) -> bool:
    return text.startswith(HF_PREFIXES)


def parse_hf_reference(text: str) -> HfReference:
    """`hf:owner/repo`, `hf:owner/repo:Q4_K_M`, `hf:owner/repo:file.gguf`
    (also with `hf.co/` instead of `hf:`), or ModelError saying the form."""
    rest = text
    for prefix in HF_PREFIXES:
        if text.startswith(prefix):
            rest = text[len(prefix) :]
            break
    repo_id, _, selector = rest.partition(":")
    if not _REPO_ID.match(repo_id) or ":" in selector:
        raise ModelError(
            f"local: {text!r} is not a Hugging Face model reference: write "
            "hf:<owner>/<repo>, optionally followed by :<quant> (hf:owner/repo:Q4_K_M) "
            "or :<file>.gguf",
            model=text,
            code="bad_request",
        )
    return HfReference(repo_id=repo_id, selector=selector or None, text=text)


# --------------------------------------------------------------------------- memory


def available_memory() -> int | None:
    """Bytes of memory available to a new process (MemAvailable), or None."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    with contextlib.suppress(AttributeError, ValueError, OSError):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return None


def total_memory() -> int | None:
    with contextlib.suppress(AttributeError, ValueError, OSError):
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return None


def memory_needed(file_size: int) -> int:
    """What loading a GGUF of this size takes: the weights (mmapped, but
    resident once used) plus room for a KV cache and the runtime."""
    return int(file_size * 1.2) + 512 * 1024 * 1024


def check_fits_memory(model: str, file_size: int | None, available: int | None = None) -> None:
    available = available_memory() if available is None else available
    if file_size is None or available is None:
        return
    needed = memory_needed(file_size)
    if needed > available:
        raise ModelError(
            f"local: {model} is {_gib(file_size)} and needs about {_gib(needed)} of memory to "
            f"run, but this machine has {_gib(available)} available: pick a smaller quant "
            "(for example :Q4_K_M or :Q4_0) or a smaller model (`agentls pull --recommended` "
            "picks one for this machine's memory).",
            model=model,
            code="bad_request",
        )


def _gib(size: int) -> str:
    if size < 1 << 30:
        return f"{size / (1 << 20):.0f} MiB"
    return f"{size / (1 << 30):.1f} GiB"


# --------------------------------------------------------------------------- choosing a file


def choose_file(ref: HfReference, siblings: list[RemoteFile]) -> RemoteFile:
    """The .gguf the reference means among a repo's files."""
    ggufs = [f for f in siblings if f.filename.lower().endswith(".gguf")]
    # Vision projectors and split parts beyond the first are never "the model".
    models = [f for f in ggufs if "mmproj" not in f.filename.lower()]
    names = ", ".join(sorted(f.filename for f in models)[:12]) or "(none)"
    selector = ref.selector
    if selector and selector.lower().endswith(".gguf"):
        for f in ggufs:
            if f.filename == selector or f.filename.rsplit("/", 1)[-1] == selector:
                return _single(ref, f)
        raise ModelError(
            f"local: {ref.display}: the repository has no file {selector!r}; its GGUF files: "
            f"{names}",
            model=ref.text,
            code="not_found",
        )
    if not models:
        raise ModelError(
            f"local: {ref.display}: the repository {ref.repo_id} has no .gguf file; "
            "pick a repository that publishes GGUF quantizations (their names usually end "
            "in -GGUF).",
            model=ref.text,
            code="not_found",
        )
    wanted = [selector] if selector else list(PREFERRED_QUANTS)
    for quant in wanted:
        pattern = re.compile(rf"(^|[^A-Za-z0-9]){re.escape(quant)}([^A-Za-z0-9]|$)", re.I)
        matches = [f for f in models if pattern.search(f.filename.rsplit("/", 1)[-1])]
        if matches:
            return _single(ref, sorted(matches, key=lambda f: f.filename)[0])
    if selector:
        raise ModelError(
            f"local: {ref.display}: no GGUF file with quant {selector!r} in {ref.repo_id}; "
            f"its GGUF files: {names}",
            model=ref.text,
            code="not_found",
        )
    return _single(ref, sorted(models, key=lambda f: (f.size or 0, f.filename))[0])


def _single(ref: HfReference, chosen: RemoteFile) -> RemoteFile:
    if _SPLIT_PART.search(chosen.filename):
        raise ModelError(
            f"local: {ref.display} resolves to {chosen.filename}, one part of a split GGUF; "
            "split models are not supported yet: pick a quant that is one file.",
            model=ref.text,
            code="bad_request",
        )
    return chosen


# --------------------------------------------------------------------------- the hub


def _hub() -> Any:
    try:
        import huggingface_hub
    except ImportError:
        raise ModelError(
            f"local: downloading models needs huggingface_hub, which is not installed: "
            f"{INSTALL_HUB} (it comes with agentls[local])",
            code="not_found",
        ) from None
    # Files in Xet storage would otherwise go through hf_xet, which reports
    # on two progress bars at once and cannot be stopped from a progress
    # callback; the Hub serves them over plain HTTP too, the path whose
    # progress, resume and cancel are tested (HF_HUB_DISABLE_XET, set here
    # because huggingface_hub reads the variable once, at import).
    from huggingface_hub import constants

    constants.HF_HUB_DISABLE_XET = True
    use_checked_client(huggingface_hub)
    return huggingface_hub


def _token() -> str | None:
    # huggingface_hub falls back to the token saved by `hf auth login`; None lets it.
    return os.environ.get("HF_TOKEN") or None


def list_gguf_files(ref: HfReference) -> list[RemoteFile]:
    hub = _hub()
    api = hub.HfApi(endpoint=hub_endpoint(), token=_token())
    try:
        info = api.model_info(ref.repo_id, files_metadata=True)
    except Exception as exc:
        raise translate_error(ref, exc) from exc
    files = []
    for sibling in info.siblings or []:
        if not isinstance(sibling.rfilename, str) or not safe_repo_path(sibling.rfilename):
            # Never becomes a path: left out, as if the repository did not have it.
            logger.warning("local: %s lists a file name that is not a plain relative path "
                           "(%r); it is ignored", ref.display, sibling.rfilename)
            continue
        lfs = sibling.lfs
        files.append(
            RemoteFile(
                filename=sibling.rfilename,
                size=sibling.size if sibling.size is not None else (lfs.size if lfs else None),
                sha256=lfs.sha256 if lfs else None,
            )
        )
    return files


def resolve(ref: HfReference) -> RemoteFile:
    return choose_file(ref, list_gguf_files(ref))


def download(
    ref: HfReference,
    *,
    hf_cache: Path | None = None,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    remote: RemoteFile | None = None,
) -> Path:
    """Download (or find in the HF cache) the file `ref` means, check it,
    and return its path."""
    hub = _hub()
    remote = remote or resolve(ref)
    check_fits_memory(ref.display, remote.size)
    cancel = cancel or threading.Event()
    try:
        path = Path(
            hub.hf_hub_download(
                ref.repo_id,
                remote.filename,
                cache_dir=str(hf_cache) if hf_cache else None,
                endpoint=hub_endpoint(),
                token=_token(),
                tqdm_class=_progress_class(on_progress, cancel, ref),
            )
        )
    except DownloadCancelled:
        raise
    except Exception as exc:
        raise translate_error(ref, exc, remote) from exc
    cache = hf_cache or hf_cache_dir()
    if not inside(path, cache):
        raise refused("a file that lies outside the cache:", str(path))
    verify(ref, remote, path, cancel=cancel, cache=cache)
    return path


def verify(
    ref: HfReference, remote: RemoteFile, path: Path, *, cancel: threading.Event | None = None,
    cache: Path | None = None,
) -> None:
    """Size, SHA-256 (when the hub gave one) and the GGUF magic; a file that
    fails is removed from the cache (blob and snapshot link, only inside
    the cache)."""
    cache = cache or hf_cache_dir()
    problem = None
    size = path.stat().st_size
    if remote.size is not None and size != remote.size:
        problem = f"is {size} bytes, the hub announced {remote.size}"
    elif remote.sha256:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while block := handle.read(1 << 20):
                if cancel is not None and cancel.is_set():
                    handle.close()
                    _remove_cached(path, cache)  # never left looking verified
                    raise DownloadCancelled(
                        f"local: download of {ref.display} cancelled", model=ref.text,
                        code="cancelled",
                    )
                digest.update(block)
        if digest.hexdigest() != remote.sha256.lower():
            problem = f"has SHA-256 {digest.hexdigest()}, the hub announced {remote.sha256}"
    if problem is None:
        with path.open("rb") as handle:
            if handle.read(4) != GGUF_MAGIC:
                problem = "is not a GGUF file (no GGUF magic at its start)"
    if problem is None:
        return
    _remove_cached(path, cache)
    raise ModelError(
        f"local: the download of {ref.display} ({remote.filename}) {problem}; the file was "
        "removed from the cache. Try again (`agentls pull "
        f"{ref.display}`); if it happens again the repository's file may be broken: pick "
        "another quant or repository.",
        model=ref.text,
        code="invalid_response",
    )


def _remove_cached(path: Path, cache: Path) -> None:
    """Remove a snapshot link and the blob it points to, each only when it
    lies inside the cache."""
    with contextlib.suppress(OSError):
        target = path.resolve()
        if inside(path.parent, cache):
            path.unlink(missing_ok=True)
        if target != path and inside(target, cache):
            target.unlink(missing_ok=True)


def translate_error(
    ref: HfReference, exc: BaseException, remote: RemoteFile | None = None
) -> ModelError:
    """huggingface_hub's and the OS's errors as messages that name the model
    and say what to do. Never includes the token."""
    if isinstance(exc, ModelError):
        return exc
    name = type(exc).__name__
    status = getattr(getattr(exc, "response", None), "status_code", None)
    what = ref.display + (f" ({remote.filename})" if remote else "")
    if name == "GatedRepoError" or status == 401 or status == 403:
        gated = name == "GatedRepoError" or "gated" in str(exc).lower()
        reason = "is gated: accept its licence on the hub's model page, then" if gated else (
            "needs an account that may read it (private or gated repository, or a bad token):"
        )
        return ModelError(
            f"local: {what} {reason} set HF_TOKEN to a token with read access (or run "
            "`hf auth login`) and try again.",
            model=ref.text,
            code="auth",
        )
    if name in ("RepositoryNotFoundError", "RevisionNotFoundError") or (
        status == 404 and remote is None
    ):
        return ModelError(
            f"local: there is no repository {ref.repo_id!r} on the hub ({what}): check the "
            "spelling of hf:<owner>/<repo> (GGUF repositories usually end in -GGUF).",
            model=ref.text,
            code="not_found",
        )
    if name in ("EntryNotFoundError", "RemoteEntryNotFoundError") or status == 404:
        return ModelError(
            f"local: {what}: the file is not in the repository: pick another quant or file name.",
            model=ref.text,
            code="not_found",
        )
    disk_full = isinstance(exc, OSError) and getattr(exc, "errno", None) == errno.ENOSPC
    if disk_full or "not enough free disk" in str(exc).lower():
        return ModelError(
            f"local: no disk space left to download {what}: free some space in the Hugging "
            "Face cache's disk (HF_HOME / HF_HUB_CACHE move it) and try again; the partial "
            "file was removed.",
            model=ref.text,
            code="server_error",
        )
    if name in ("LocalEntryNotFoundError", "OfflineModeIsEnabled") or isinstance(
        exc, ConnectionError
    ) or "connect" in name.lower() or "timeout" in name.lower():
        endpoint = hub_endpoint() or "https://huggingface.co"
        return ModelError(
            f"local: cannot reach the model hub ({endpoint}) to download {what}: check the "
            "network (or HF_ENDPOINT / proxy settings) and try again; meanwhile the previous "
            "model keeps serving.",
            model=ref.text,
            code="connection",
        )
    if "Consistency check failed" in str(exc):
        return ModelError(
            f"local: the download of {what} ended early (the connection was cut); nothing "
            "was kept: try again.",
            model=ref.text,
            code="connection",
        )
    return ModelError(f"local: downloading {what} failed: {name}: {exc}", model=ref.text,
                      code="server_error")


def _progress_class(
    on_progress: ProgressCallback | None, cancel: threading.Event, ref: HfReference
) -> type:
    """A tqdm stand-in huggingface_hub drives: forwards the byte counts and
    stops the download (by raising inside its read loop) once cancelled."""
    from tqdm.auto import tqdm  # type: ignore[import-untyped]

    class _Progress(tqdm):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True  # no terminal output from the thread
            super().__init__(*args, **kwargs)
            self._done = int(kwargs.get("initial") or 0)
            self._total = kwargs.get("total")
            self._tell()

        def update(self, n: float | None = 1) -> bool | None:
            self._done += int(n or 0)
            self._tell()
            return None

        def _tell(self) -> None:
            if cancel.is_set():
                raise DownloadCancelled(
                    f"local: download of {ref.display} cancelled", model=ref.text,
                    code="cancelled",
                )
            if on_progress is not None:
                on_progress(self._done, int(self._total) if self._total else None)

    return _Progress


# --------------------------------------------------------------------------- offline


def hf_cache_dir() -> Path:
    """The HF hub cache as huggingface_hub computes it (HF_HUB_CACHE, else
    HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub), without importing it."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "huggingface",
    )
    return Path(home).expanduser() / "hub"


def cached_path(ref: HfReference, hf_cache: Path | None = None) -> Path | None:
    """The file `ref` means if the HF cache already has it (downloaded here,
    by `agentls pull`, or by another tool), found without network: the
    snapshot of the commit `refs/main` names. huggingface_hub only ever
    renames complete downloads into the cache, and ours were verified."""
    cache = hf_cache or hf_cache_dir()
    folder = cache / ("models--" + ref.repo_id.replace("/", "--"))
    try:
        commit = (folder / "refs" / "main").read_text(encoding="utf-8").strip()
        if not COMMIT.fullmatch(commit):
            return None  # not a commit a hub we checked wrote: never a path
        snapshot = folder / "snapshots" / commit
        local = [
            RemoteFile(str(path.relative_to(snapshot)), None, None)
            for path in snapshot.rglob("*.gguf")
            if path.is_file()
        ]
    except (OSError, ValueError):
        return None
    if not local:
        return None
    try:
        chosen = choose_file(ref, local)
    except ModelError:
        return None
    found = snapshot / chosen.filename
    return found if inside(found, cache) else None
