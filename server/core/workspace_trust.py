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
  policy off) apply only after the user trusted *this content* of the file.

Decisions are remembered per file path and SHA-256 of its bytes, in
`trust.json` in the user state directory (never in the workspace): a
changed file asks again. "Don't trust" is remembered too, so the user is
not asked at every start; the keys stay ignored and reported.

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
]

log = logging.getLogger("agentls.trust")

TRUST_FILE = "trust.json"
MIN_WORKSPACE_TIMEOUT_SECONDS = 10.0

# Wire keys (camelCase, dotted) that can send data or run code; a key is
# dangerous when it equals one of these or lies under one.
_DANGEROUS = ("provider", "baseUrl", "apiKeyEnv", "providerOptions", "linters", "approval",
              "mcpServers", "runCommand", "features.disabled")

TrustDecision = Literal["trusted", "refused"]
# none: no workspace file, or it sets no dangerous key; pending: the user
# has not answered for this content; trusted / refused: the user's answer.
TrustState = Literal["none", "pending", "trusted", "refused"]


def is_dangerous_key(wire_key: str) -> bool:
    return any(wire_key == d or wire_key.startswith(d + ".") for d in _DANGEROUS)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class WorkspaceTrust:
    """What a settings load found in the workspace file."""

    file: str  # absolute path
    digest: str
    state: TrustState
    # The dangerous keys the file sets, as shown to the user (key, value);
    # ignored unless state is "trusted".
    keys: list[tuple[str, str]] = field(default_factory=list)

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
        from .state_dir import default_store_path  # not the store: no sqlite3 here

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
        entry = self._read().get(_key(file, kind))
        if not isinstance(entry, dict) or entry.get("sha256") != content_digest:
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
        data[_key(file, kind)] = {"sha256": content_digest, "decision": decision,
                                  "at": datetime.now(UTC).isoformat()}
        from .state_dir import ensure_private_dir

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


def _key(file: Path | str, kind: str) -> str:
    return f"{kind}:{os.path.realpath(file)}"
