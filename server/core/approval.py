"""The approval gate: the one place that decides whether a tool call runs,
needs the user, or is refused, and that asks the user.

Inputs to a decision, all made here and nowhere else:

- the policy's verdict for the call (a `tool:pre` hook module says
  `allow`, `ask`, `deny` or `protected`; `protected` means "always ask":
  the call touches a file that configures agentls, the editor, git, CI or
  a package manager, or reads a secret);
- the session's memory ("Allow for session" answers, per agent session and
  tool; never consulted for protected calls, never stored from one);
- the user's answer, as the id of one of the typed options offered. An
  answer that is not one of them, a dismissed question and a broken
  channel are denials. No answer within the timeout takes
  `approval.default`, except for protected calls, which need a yes.

The LSP layer only renders a question (window/showMessageRequest, or an
annotated workspace edit the editor confirms) and returns the chosen
option's id. It implements `ApprovalChannel` and `DisplayChannel`.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = [
    "ALLOW_ONCE",
    "ALLOW_SESSION",
    "DENY",
    "EDIT_OPTIONS",
    "ONCE_OPTIONS",
    "ApprovalChannel",
    "ApprovalDecision",
    "ApprovalGate",
    "ApprovalOption",
    "ApprovalRequest",
    "DisplayChannel",
    "MessageLevel",
    "Verdict",
    "options_from_labels",
]

log = logging.getLogger("agentls.approval")

MessageLevel = Literal["info", "warning", "error"]
# What the policy says about a call. "protected": ask every time, whatever
# a rule or an earlier "Allow for session" says.
Verdict = Literal["allow", "ask", "deny", "protected"]


@dataclass(frozen=True)
class ApprovalOption:
    """One answer the user can give. `id` is what a channel returns."""

    id: str
    label: str
    allows: bool
    remember: bool = False  # allow the same tool for the rest of the session


ALLOW_ONCE = ApprovalOption("allow_once", "Allow once", allows=True)
ALLOW_SESSION = ApprovalOption("allow_session", "Allow for session", allows=True, remember=True)
DENY = ApprovalOption("deny", "Deny", allows=False)
EDIT_OPTIONS = (ALLOW_ONCE, ALLOW_SESSION, DENY)
ONCE_OPTIONS = (ALLOW_ONCE, DENY)

# Labels of hook-supplied options (seed: `approval_options` are strings)
# that mean yes. Everything else is a no.
_YES = re.compile(r"^\s*(allow|yes|approve|accept|ok|okay|continue|proceed|run)\b", re.I)


def options_from_labels(labels: Iterable[str]) -> tuple[ApprovalOption, ...]:
    """Typed options for a hook's plain-text labels: a label that starts
    with allow/yes/approve/accept/ok/continue/proceed/run allows; every
    other label denies. Ids are the labels' positions, so two labels that
    differ only in case stay apart."""
    options = tuple(
        ApprovalOption(f"option-{index}", str(label), allows=bool(_YES.match(str(label))))
        for index, label in enumerate(labels)
    )
    return options or ONCE_OPTIONS


@dataclass(frozen=True)
class ApprovalRequest:
    prompt: str
    options: tuple[ApprovalOption, ...] = ONCE_OPTIONS
    timeout: float = 300.0
    default: Literal["allow", "deny"] = "deny"
    session_id: str = ""
    tool_name: str | None = None
    tool_input: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    protected: bool = False  # no "for session" memory; a timeout denies

    def option(self, option_id: str | None) -> ApprovalOption | None:
        return next((o for o in self.options if o.id == option_id), None)


@dataclass(frozen=True)
class ApprovalDecision:
    allowed: bool
    choice: str | None  # the chosen option's label; None on timeout / no answer
    reason: str  # what the agent is told when denied
    code: str = ""  # "" (allowed), "declined", "dismissed", "timeout", "no_channel", "failed"


class ApprovalChannel(Protocol):
    async def request_approval(self, request: ApprovalRequest) -> str | None:
        """Ask the user; return the chosen option's id, or None if dismissed."""
        ...


class DisplayChannel(Protocol):
    async def show_message(self, message: str, level: MessageLevel = "info") -> None: ...


class ApprovalGate:
    """Decides and asks. One per server process; session memory lives here."""

    def __init__(self, channel: ApprovalChannel | None = None) -> None:
        self.channel = channel
        self._remembered: set[tuple[str, str]] = set()

    # -- decisions -------------------------------------------------------------
    def needs_user(self, verdict: Verdict | str, session_id: str, tool_name: str) -> bool:
        """Whether the user must be asked before a call the policy did not
        deny. Unknown verdicts ask."""
        if verdict == "allow":
            return False
        if verdict == "ask":
            return not self.remembered(session_id, tool_name)
        return True  # "protected" and anything unrecognised

    def remembered(self, session_id: str, tool_name: str) -> bool:
        return bool(session_id) and (session_id, tool_name) in self._remembered

    def remember(self, session_id: str, tool_name: str) -> None:
        if session_id:
            self._remembered.add((session_id, tool_name))

    def forget(self, session_id: str | None = None) -> None:
        """Drop "Allow for session" answers of one session (all when None)."""
        if session_id is None:
            self._remembered.clear()
        else:
            self._remembered = {k for k in self._remembered if k[0] != session_id}

    # -- asking ----------------------------------------------------------------
    async def ask(
        self, request: ApprovalRequest, channel: ApprovalChannel | None = None
    ) -> ApprovalDecision:
        """Ask through `channel` (default: the gate's), apply the timeout,
        default and memory rules; never raises except on cancellation."""
        channel = channel or self.channel
        subject = f" for {request.tool_name}" if request.tool_name else ""
        if channel is None:
            return ApprovalDecision(
                False, None,
                f"Approval{subject} was required but no approval channel is attached; denied.",
                "no_channel")
        try:
            chosen_id = await asyncio.wait_for(channel.request_approval(request),
                                               request.timeout)
        except TimeoutError:
            return self._unanswered(request, subject, "did not answer the approval request"
                                    f"{subject} within {request.timeout:g}s", "timeout")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a broken channel must not crash the turn
            log.warning("Approval channel failed: %s", exc)
            return self._unanswered(request, subject, f"could not be asked ({exc})", "failed")
        if chosen_id is None:
            return ApprovalDecision(False, None, f"The user dismissed the approval request"
                                    f"{subject}; treated as Deny.", "dismissed")
        option = request.option(chosen_id)
        if option is None:
            log.warning("Approval answer %r is not one of the options offered; denied",
                        chosen_id)
            return ApprovalDecision(False, None, f"The approval answer{subject} was not one "
                                    "of the options offered; treated as Deny.", "declined")
        if not option.allows:
            what = f"the {request.tool_name} call" if request.tool_name else "the request"
            return ApprovalDecision(False, option.label,
                                    f"The user declined {what} ({option.label!r}).",
                                    "declined")
        if option.remember and not request.protected and request.tool_name:
            self.remember(request.session_id, request.tool_name)
        return ApprovalDecision(True, option.label, "")

    @staticmethod
    def _unanswered(request: ApprovalRequest, subject: str, what: str,
                    code: str) -> ApprovalDecision:
        if request.default == "allow" and not request.protected:
            return ApprovalDecision(True, None, "", "")
        why = ("this call always needs an explicit yes" if request.protected
               else "approval.default is deny")
        return ApprovalDecision(False, None, f"The user {what}; {why}.", code)
