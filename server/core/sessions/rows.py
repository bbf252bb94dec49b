"""How a stored session looks as rows and list lines: the session list's
summary (SessionSummary), a session's title (from its first user message),
fixed-width UTC timestamps and the JSON encoding of message content.
session_store.py keeps the database; this is what it writes and returns."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic_core import to_jsonable_python

from agentls.core.types.conversation import Message
from agentls.core.types.messages import SessionStatus

TITLE_MAX_CHARS = 80


def iso_utc(value: datetime) -> str:
    """Fixed-width ISO 8601 UTC text, so text order is time order in SQL."""
    return value.astimezone(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class SessionSummary:
    """One line of the session list."""

    session_id: str
    title: str
    created_at: datetime
    updated_at: datetime
    status: SessionStatus
    message_count: int
    # The session's stored metadata (e.g. the ACP front's `cwd`).
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        """The `agentls/sessions` entry: sessionId, title, updatedAt, status."""
        updated = self.updated_at.astimezone(UTC).isoformat(timespec="milliseconds")
        return {
            "sessionId": self.session_id,
            "title": self.title,
            "updatedAt": updated.replace("+00:00", "Z"),
            "status": self.status.to_dict(),
        }


def message_text(message: Message) -> str:
    """The plain text of a message: its string content or its first text part."""
    if isinstance(message.content, str):
        return message.content
    parts = message.content if isinstance(message.content, list) else []
    for part in [*parts, *(message.multipart_content or [])]:
        if isinstance(part, str):
            return part
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            return str(part["text"])
    return ""


def title_from(message: Message) -> str:
    """Title for a session whose first user message is `message` ('' if none).

    Hook injections can carry role "user" but are not what the user typed.
    """
    if message.role != "user" or (message.metadata or {}).get("source") == "hook":
        return ""
    lines = (line.strip() for line in message_text(message).splitlines())
    first = next((line for line in lines if line), "")
    if len(first) > TITLE_MAX_CHARS:
        first = first[: TITLE_MAX_CHARS - 1].rstrip() + "…"
    return first


def dumps(value: Any) -> str:
    # Message content is `Any`: pydantic's encoder covers models, datetimes, etc.
    return json.dumps(value, ensure_ascii=False, default=to_jsonable_python)
