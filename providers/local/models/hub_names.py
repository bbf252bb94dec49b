"""What a Hugging Face hub may name, checked before it becomes a path.

A hub is not trusted with paths (HF_ENDPOINT may name any mirror). Each
answer the hub gives about a file (it carries X-Repo-Commit) must name a
commit of 40 hex digits and an ETag that is a plain file name:
huggingface_hub makes both into folders and files of its cache, so an ETag
`/usr/lib/python3/site-packages/x.pth` or `../../x` would otherwise be
written outside it. Redirects must stay http(s); the file names a
repository lists must be plain relative paths. The check runs inside
huggingface_hub's own HTTP client (its public `set_client_factory`), on
every response, before the library reads the headers; a refused answer
fails the download with a message naming the hub.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

from agentls.core.types.errors import ModelError

__all__ = [
    "COMMIT",
    "HubAnswerRefused",
    "check_hub_answer",
    "hub_endpoint",
    "inside",
    "refused",
    "safe_repo_path",
    "use_checked_client",
]

COMMIT = re.compile(r"[0-9a-f]{40}")
_ETAG = re.compile(r"[A-Za-z0-9_+=-][A-Za-z0-9._+=-]{0,199}")
_FILE_PART = re.compile(r"[A-Za-z0-9_+=@,-][A-Za-z0-9._+=@,() -]{0,254}")


def hub_endpoint() -> str | None:
    """HF_ENDPOINT read now (huggingface_hub reads it once, at import)."""
    value = os.environ.get("HF_ENDPOINT")
    return value.rstrip("/") if value else None


class HubAnswerRefused(ModelError):
    """The hub named something that cannot safely become a path in the cache."""


def safe_repo_path(name: str) -> bool:
    """Whether a file name a repository lists is a plain relative path (no
    `..`, no absolute path, no backslash, no control characters)."""
    parts = name.split("/")
    return bool(name) and len(name) <= 1000 and all(
        _FILE_PART.fullmatch(part) and part not in (".", "..") for part in parts)


def refused(what: str, value: str) -> HubAnswerRefused:
    endpoint = hub_endpoint() or "https://huggingface.co"
    return HubAnswerRefused(
        f"local: the model hub ({endpoint}) answered with {what} {value[:200]!r}, which is "
        "not a plain name inside the Hugging Face cache; nothing was written. Check "
        "HF_ENDPOINT: it may point at a hub you do not trust.",
        code="invalid_response",
    )


def check_hub_answer(response: Any) -> None:
    """An httpx response hook: refuse a hub answer whose commit, ETag or
    redirect could not safely become a path (raised before
    huggingface_hub reads the headers)."""
    headers = response.headers
    commit = headers.get("X-Repo-Commit")
    if commit is not None:  # an answer about a file of a repository
        if not COMMIT.fullmatch(commit):
            raise refused("the commit", commit)
        etag = headers.get("X-Linked-Etag") or headers.get("ETag")
        # Normalised as huggingface_hub does before using it as a file name.
        if etag is not None and not _ETAG.fullmatch(etag.lstrip("W/").strip('"')):
            raise refused("the ETag", etag)
    location = headers.get("Location")
    if location is not None and getattr(response, "is_redirect", False):
        target = response.request.url.join(location)
        if target.scheme not in ("http", "https"):
            raise refused("a redirect to", location)


_CHECKED_LOCK = threading.Lock()
_checked_client_set = False


def use_checked_client(hub: Any) -> None:
    """Make huggingface_hub's shared HTTP client run check_hub_answer on
    every response (once per process)."""
    global _checked_client_set
    with _CHECKED_LOCK:
        if _checked_client_set:
            return
        from huggingface_hub.utils._http import default_client_factory

        def factory() -> Any:
            client = default_client_factory()
            hooks = dict(client.event_hooks)
            hooks["response"] = [*hooks.get("response", []), check_hub_answer]
            client.event_hooks = hooks
            return client

        hub.set_client_factory(factory)
        _checked_client_set = True


def inside(path: Path, folder: Path) -> bool:
    """Whether path (links resolved) lies inside folder (links resolved)."""
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):
        return False
