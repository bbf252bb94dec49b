"""Approval and display channels: interfaces the kernel calls and the LSP
layer implements (window/showMessageRequest, window/showMessage).

The kernel decides *when* to ask (hooks return ask_user); the channel only
asks. With no channel attached, every ask_user is denied.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = [
    "ApprovalChannel",
    "ApprovalDecision",
    "ApprovalRequest",
    "DisplayChannel",
    "MessageLevel",
    "ask_for_approval",
]

log = logging.getLogger("agentls.approval")

MessageLevel = Literal["info", "warning", "error"]
DEFAULT_OPTIONS = ("Allow", "Deny")


@dataclass(frozen=True)
class ApprovalRequest:
    prompt: str
    options: tuple[str, ...] = DEFAULT_OPTIONS
    timeout: float = 300.0
    default: Literal["allow", "deny"] = "deny"
    session_id: str = ""
    tool_name: str | None = None
    tool_input: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None


@dataclass(frozen=True)
class ApprovalDecision:
    allowed: bool
    choice: str | None  # the option the user picked; None on timeout / no channel
    reason: str  # what the agent is told when denied


class ApprovalChannel(Protocol):
    async def request_approval(self, request: ApprovalRequest) -> str | None:
        """Ask the user; return the chosen option, or None if dismissed."""
        ...


class DisplayChannel(Protocol):
    async def show_message(self, message: str, level: MessageLevel = "info") -> None: ...


def _is_deny(choice: str) -> bool:
    return choice.strip().lower().startswith(("deny", "reject", "no", "cancel"))


async def ask_for_approval(
    channel: ApprovalChannel | None, request: ApprovalRequest
) -> ApprovalDecision:
    """Ask through `channel`, applying timeout and default; never raises."""
    subject = f" for {request.tool_name}" if request.tool_name else ""
    if channel is None:
        return ApprovalDecision(
            False,
            None,
            f"Approval{subject} was required but no approval channel is attached; denied.",
        )
    try:
        choice = await asyncio.wait_for(channel.request_approval(request), request.timeout)
    except TimeoutError:
        allowed = request.default == "allow"
        return ApprovalDecision(
            allowed,
            None,
            f"The user did not answer the approval request{subject} within "
            f"{request.timeout:g}s; default is {request.default}.",
        )
    except Exception as exc:  # a broken channel must not crash the turn
        log.exception("Approval channel failed")
        allowed = request.default == "allow"
        return ApprovalDecision(
            allowed, None, f"Approval{subject} failed ({exc}); default is {request.default}."
        )
    if choice is None:
        return ApprovalDecision(
            False, None, f"The user dismissed the approval request{subject}; treated as denied."
        )
    if _is_deny(choice):
        return ApprovalDecision(False, choice, f"The user declined{subject} ({choice!r}).")
    return ApprovalDecision(True, choice, "")
