"""The statuses of the sessions this process ran (agentls/status): owned by
the orchestrator, updated by each turn. A session seen for the first time
starts from its stored status (the sink's `get_status`), else a new one."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from agentls.core.types.messages import SessionStatus

__all__ = ["SessionStatuses"]

StatusLoader = Callable[[str], SessionStatus | None]


class SessionStatuses:
    """session id -> SessionStatus, replaced (never mutated) on each update."""

    def __init__(self, loader: StatusLoader | None = None) -> None:
        self.loader = loader
        self._statuses: dict[str, SessionStatus] = {}

    async def load(self, session_id: str) -> SessionStatus:
        """The session's status, read from the store the first time."""
        status = self._statuses.get(session_id)
        if status is None:
            if self.loader is not None:
                try:
                    status = await asyncio.to_thread(self.loader, session_id)
                except Exception:
                    status = None
            if status is None:
                status = SessionStatus(session_id=session_id, started_at=datetime.now(UTC))
            self._statuses[session_id] = status
        return status

    def get(self, session_id: str) -> SessionStatus | None:
        return self._statuses.get(session_id)

    def __getitem__(self, session_id: str) -> SessionStatus:
        return self._statuses[session_id]

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._statuses

    def values(self) -> list[SessionStatus]:
        return list(self._statuses.values())

    def update(self, session_id: str, **changes: Any) -> SessionStatus:
        # A turn cancelled before it loaded its status still ends with one
        # (a KeyError here turned a cancel into `internal`).
        current = self._statuses.get(session_id) or SessionStatus(
            session_id=session_id, started_at=datetime.now(UTC))
        status = current.model_copy(update=changes)
        self._statuses[session_id] = status
        return status

    def add(self, session_id: str, **increments: int) -> SessionStatus:
        """Add to counters (total_messages=1, tool_invocations=1, ...)."""
        current = self._statuses.get(session_id) or self.update(session_id)
        return self.update(session_id, **{
            name: getattr(current, name) + amount for name, amount in increments.items()})
