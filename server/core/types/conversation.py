"""Conversation types from agent_core's types: Message, PartialMessage,
Session, ToolDescriptor and ProviderRequestCancelled.

These are immutable (frozen pydantic dataclasses): a transformation returns a
new instance, so a Session handed to a plugin cannot be changed under the
orchestrator's feet.
"""

from __future__ import annotations

from copy import deepcopy
from dataclasses import field, replace
from typing import Any, Literal

from pydantic import ConfigDict
from pydantic.dataclasses import dataclass

__all__ = [
    "Message",
    "MessageRole",
    "PartialMessage",

    "Session",
    "ToolDescriptor",
]

MessageRole = Literal["system", "user", "assistant", "tool"]

# Validators are built on first use, not at import (start-up time).
_CONFIG = ConfigDict(arbitrary_types_allowed=True, defer_build=True)


@dataclass(frozen=True, config=_CONFIG)
class Message:
    """One conversation message.

    `metadata` carries tool_calls (assistant), tool_call_id (tool), the hook
    provenance of injected context ({source: "hook", hook_name, event}), etc.
    """

    role: MessageRole
    content: Any
    metadata: dict[str, Any] | None = None
    multipart_content: list[Any] | None = None
    tool_result: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        multipart_content = data.get("multipartContent")
        if multipart_content is not None and not isinstance(multipart_content, list):
            raise TypeError("multipartContent must be a list or null")
        tool_result = data.get("toolResult")
        if tool_result is not None and not isinstance(tool_result, dict):
            raise TypeError("toolResult must be an object or null")
        return cls(
            role=data["role"],
            content=data["content"],
            metadata=deepcopy(data.get("metadata")),
            multipart_content=deepcopy(multipart_content),
            tool_result=deepcopy(tool_result),
        )

    def to_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.metadata:
            result["metadata"] = deepcopy(self.metadata)
        if self.multipart_content:
            result["multipartContent"] = deepcopy(self.multipart_content)
        if self.tool_result:
            result["toolResult"] = deepcopy(self.tool_result)
        return result

    # Convenience readers used by providers and the orchestrator.
    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return list((self.metadata or {}).get("tool_calls") or [])

    @property
    def tool_call_id(self) -> str | None:
        value = (self.metadata or {}).get("tool_call_id")
        return str(value) if value is not None else None

    def with_metadata(self, **updates: Any) -> Message:
        return replace(self, metadata={**(self.metadata or {}), **updates})


@dataclass(frozen=True, config=_CONFIG)
class PartialMessage:
    """A message still being streamed (forwarded to the frontend as-is)."""

    role: MessageRole
    content: Any
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, config=_CONFIG)
class Session:
    """Immutable session: data only. Transformations return new sessions."""

    session_id: str
    messages: list[Message] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Session:
        messages = [Message.from_dict(msg) for msg in data.get("messages", [])]
        return cls(
            session_id=data["session_id"],
            messages=messages,
            metadata=deepcopy(data.get("metadata", {})),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "messages": [msg.to_dict() for msg in self.messages],
            "metadata": deepcopy(self.metadata),
        }

    def with_message(self, message: Message) -> Session:
        return replace(self, messages=[*self.messages, message])

    def with_metadata(self, **updates: Any) -> Session:
        return replace(self, metadata={**self.metadata, **updates})


@dataclass(frozen=True, config=_CONFIG)
class ToolDescriptor:
    """Normalised metadata for a tool schema exposed to UIs and requests.

    `schema` is the flat form {name, description, parameters (JSON schema)}
    that providers translate to their wire format.
    """

    plugin_name: str
    tool_name: str
    schema: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)


# ProviderRequestCancelled lives in core/types/errors.py (no pydantic) and is
# re-exported here, its home in agent_core's types.
