"""The errors agentls raises on purpose, and the finish reasons, without pydantic.

They carry the public names of the APIs agentls implements (ModelError and
FinishReason: orbiter's models.types; ProviderRequestCancelled: agent_core's
types) and are re-exported from
`agentls.core.types.messages` and `agentls.core.types.conversation`. They live here
because the keystroke path (an inline completion through a FIM model) needs
them but none of the pydantic models beside them: importing pydantic costs
the first completion ~75 ms and ~6 MiB (bench/bench_startup.py).
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "AgentlsError",
    "FinishReason",
    "MalformedToolCall",
    "ModelError",
    "ModelErrorCode",
    "ProviderRequestCancelled",
]

FinishReason = Literal["stop", "tool_calls", "length", "content_filter"]

ModelErrorCode = Literal[
    "context_length",
    "rate_limit",
    "auth",
    "timeout",
    "server_error",
    "bad_request",
    "cancelled",
    "not_found",
    "connection",
    "invalid_response",
    "",
]


class AgentlsError(Exception):
    """Base class of the errors agentls raises on purpose."""


class ModelError(AgentlsError):
    """A provider call failed. `code` classifies it (see ModelErrorCode)."""

    def __init__(self, message: str, *, model: str = "", code: str = "") -> None:
        super().__init__(message)
        self.model = model
        self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    def __repr__(self) -> str:
        return f"ModelError({self.message!r}, model={self.model!r}, code={self.code!r})"

    def __reduce__(self) -> Any:  # keep model/code across pickling (worker processes)
        return (_rebuild_model_error, (self.message, self.model, self.code))


def _rebuild_model_error(message: str, model: str, code: str) -> ModelError:
    return ModelError(message, model=model, code=code)


class MalformedToolCall(ModelError):
    """The model tried to call a tool and wrote the call so that it cannot be
    read (not JSON, no name, arguments not an object). `text` is what it
    wrote. The turn answers it with a tool error and gives the model one
    retry (core/agent/turn.py) instead of failing at once."""

    def __init__(self, message: str, *, text: str, model: str = "",
                 reason: str = "") -> None:
        super().__init__(message, model=model, code="invalid_response")
        self.text = text
        self.reason = reason or message

    def __reduce__(self) -> Any:
        return (_rebuild_malformed, (self.message, self.text, self.model, self.reason))


def _rebuild_malformed(message: str, text: str, model: str, reason: str) -> MalformedToolCall:
    return MalformedToolCall(message, text=text, model=model, reason=reason)


class ProviderRequestCancelled(RuntimeError):
    """Raised when a provider request is cancelled by request id."""

    def __init__(self, request_id: str | None = None):
        super().__init__("Provider request cancelled")
        self.request_id = request_id
