"""Workspace trust: a file that came with a repository cannot send the
user's data elsewhere or run code until the user has approved its content.

A cloned repository's `.agentls.toml` is read like any settings source,
but its keys are split in two (the same idea as VS Code's workspace trust
and direnv's `allow`):

- **safe keys** (the model among the user's providers, inline completion
  tuning, instruction files, session limits, ...) apply at once;
- **keys that can send data or run code** (`provider`, `baseUrl`,
  `apiKeyEnv`, `providerOptions`, `linters`, `approval.*`, `mcpServers`,
  `runCommand.*`, `features.disabled`, which could switch the approval
  policy off, and the model keys `model`, `inlineCompletion.model`,
  `nextEdit.model`, whose `hf:` reference starts a download with your
  HF_TOKEN and whose path loads a file into this process) apply only after
  the user trusted *this content* of the file.

Decisions are remembered per workspace file (the folder and the file's
path inside it, as the workspace spells it, never the file a link points
to) and SHA-256 of its bytes, in `trust.json` in the user state directory
(never in the workspace): a changed file asks again, and a file that is a
link into another checkout never inherits the trust given there (the link's
target is part of the record: a retargeted link asks again). "Don't trust"
is remembered too, so the user is not asked at every start; the keys stay
ignored and reported.

Even from a trusted file, `approval.default = "allow"` is never taken (an
unanswered question must not approve), and `approval.timeoutSeconds` has
a floor, so a file cannot make questions vanish before the user sees them.
The store is generic (path + digest + kind) so other workspace files that
start processes (`.mcp.json`) use the same memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

__all__ = [
    "MIN_WORKSPACE_TIMEOUT_SECONDS",
    "TRUST_FILE",
    "TrustDecision",
    "TrustState",
    "TrustStore",
    "WorkspaceTrust",
    "digest",
    "is_dangerous_key",
    "locate",
]

log = logging.getLogger("agentls.trust")

TRUST_FILE = "trust.json"
MIN_WORKSPACE_TIMEOUT_SECONDS = 10.0

# Wire keys (camelCase, dotted) that can send data or run code; a key is
# dangerous when it equals one of these or lies under one.
_DANGEROUS = ("provider", "baseUrl", "apiKeyEnv", "providerOptions", "linters", "approval",
              "mcpServers", "runCommand", "features.disabled",
              # An hf: reference downloads (with HF_TOKEN), a path loads a file
              # into this process: a workspace file may name neither untrusted.
              "model", "inlineCompletion.model", "nextEdit.model")

TrustDecision = Literal["trusted", "refused"]
# none: no workspace file, or it sets no dangerous key; pending: the user
# has not answered for this content; trusted / refused: the user's answer.
TrustState = Literal["none", "pending", "trusted", "refused"]


def is_dangerous_key(wire_key: str) -> bool:
    return any(wire_key == d or wire_key.startswith(d + ".") for d in _DANGEROUS)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def locate(path: Path | str, folder: Path | str | None = None) -> tuple[str | None, bool]:
    """Where a workspace file really is: (the path it links to when it is a
    symbolic link, else None; whether it resolves outside `folder`, by
    default the folder that holds it)."""
    path = os.path.abspath(path)
    folder = os.path.abspath(folder) if folder is not None else os.path.dirname(path)
    real = os.path.realpath(path)
    target = real if os.path.islink(path) else None
    inside = os.path.commonpath([real, os.path.realpath(folder)]) == os.path.realpath(folder)
    return target, not inside


@dataclass(frozen=True)
class WorkspaceTrust:
    """What a settings load found in the workspace file."""

    file: str  # absolute path, as the workspace spells it (links not resolved)
    digest: str
    state: TrustState
    # The dangerous keys the file sets, as shown to the user (key, whole
    # value); ignored unless state is "trusted".
    keys: list[tuple[str, str]] = field(default_factory=list)
    # The question's listing of those keys (core/trust/display.py), whole.
    lines: list[str] = field(default_factory=list)
    link_target: str | None = None  # what the file links to, when it is a link
    outside: bool = False  # it resolves outside its workspace folder

    @property
    def pending(self) -> list[str]:
        return [key for key, _ in self.keys] if self.state in ("pending", "refused") else []

    def to_wire(self) -> dict[str, object]:
        return {"file": self.file, "state": self.state,
                "keys": [key for key, _ in self.keys], "pendingKeys": self.pending}


class TrustStore:
    """The user's trust decisions, as JSON in the user state directory."""

    def __init__(self, path: Path | None) -> None:
        self.path = path  # None: remembers nothing (everything stays pending)

    @classmethod
    def default(cls, environ: Mapping[str, str] | None = None) -> TrustStore:
        from agentls.core.support.state_dir import (
            default_store_path,  # not the store: no sqlite3 here
        )

        env = os.environ if environ is None else environ
        return cls(default_store_path(env).parent / TRUST_FILE)

    def _read(self) -> dict[str, dict[str, str]]:
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("Cannot read %s (%s); no workspace file is trusted", self.path, exc)
            return {}
        return data if isinstance(data, dict) else {}

    def decision(self, file: Path | str, content_digest: str, kind: str = "settings"
                 ) -> TrustDecision | None:
        """The answer recorded for this workspace file (its path as the
        workspace spells it) with this content and this link target."""
        key, target = _key(file, kind)
        entry = self._read().get(key)
        if not isinstance(entry, dict) or entry.get("sha256") != content_digest:
            return None
        # Records written before the target was kept were keyed by the real path.
        if entry.get("target", key.split(":", 1)[1]) != target:
            return None
        decision = entry.get("decision")
        return decision if decision in ("trusted", "refused") else None  # type: ignore[return-value]

    def record(self, file: Path | str, content_digest: str, decision: TrustDecision,
               kind: str = "settings") -> None:
        """Remember the answer for this content; raises OSError when the state
        directory is not writable (the caller tells the user)."""
        if self.path is None:
            return
        data = self._read()
        key, target = _key(file, kind)
        data[key] = {"sha256": content_digest, "decision": decision, "target": target,
                     "at": datetime.now(UTC).isoformat()}
        from agentls.core.support.state_dir import ensure_private_dir

        ensure_private_dir(self.path.parent)  # 0700: the decisions are the user's own
        fd, tmp = tempfile.mkstemp(prefix=".trust-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=1, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def _key(file: Path | str, kind: str) -> tuple[str, str]:
    """The record's key (kind and the path as the workspace spells it: the
    workspace folder and the file's place in it, links not followed) and
    the file it really is."""
    return f"{kind}:{os.path.abspath(file)}", os.path.realpath(file)
