"""The approval gate: the one place that decides whether a tool call runs,
needs the user, or is refused, and that asks the user.

The turn asks once per tool call, before the tool runs
(`ApprovalGate.clearance`), from the tool's declared need (`ToolNeed`,
core/tools/contract.py); a checkpoint restore asks the same way. Inputs to a
decision, all made here and nowhere else:

- the policy's verdict for the call (`ApprovalPolicy.decide`, a plugin in
  features/ answering a typed `ApprovalQuestion` with `allow`, `ask`,
  `deny` or `protected`; `protected` means "always ask": the call touches
  a file that configures agentls, the editor, git, CI or a package
  manager, or reads a secret);
- the session's memory ("Allow for session" answers, per agent session and
  tool; never consulted for protected calls, never stored from one);
- the user's answer, as the id of one of the typed options offered. An
  answer that is not one of them, a dismissed question and a broken
  channel are denials. No answer within the timeout takes
  `approval.default`, except for protected calls, which need a yes.

Every question asked here obeys one rule (docs/security.md): it never hides a byte
that changes the answer. Its text is escaped (characters that would not
show as themselves become `<U+202E>`) and, when it is longer than a
message can carry, written whole to a file only the user can read in the
state directory (`documents`, core/approval/documents.py), opened in the
editor (`opener`) when it can, and the message is the question's short
form (`ApprovalRequest.summary`) naming that file, never a cut text.

The LSP layer only renders a question (window/showMessageRequest) and
returns the chosen option's id (it implements `ApprovalChannel` and
`DisplayChannel`), and opens documents (`DocumentOpener`). When the
editor confirms edits itself (annotation mode: question and application
are one round trip) the gate's `Clearance` says
`confirm_in_editor` and the edit applier sends the change as one that needs
confirmation; the gate still decided that it must be asked.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from agentls.core.approval.documents import (
    MESSAGE_MAX_CHARS,
    MESSAGE_MAX_LINES,
    DocumentOpener,
    QuestionDocuments,
    fits_message,
    shown_question,
    where_text,
)
from agentls.core.tools.contract import ToolNeed

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
    "ApprovalPolicy",
    "ApprovalQuestion",
    "ApprovalRequest",
    "Clearance",
    "DisplayChannel",
    "MessageLevel",
    "PolicyAnswer",
    "Verdict",
    "decide",
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

# Labels of hook-supplied options (Amplifier's Hooks API: `approval_options` are strings)
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
    # The short form, when `prompt` is too long for a message: what the
    # question is about and asks, in a few lines (the gate adds where the
    # whole text is). Empty: the tool's name and the prompt's first line.
    summary: str = ""
    # The file name (no folder, no suffix) for the whole text; empty: from
    # the tool's name and the text's hash.
    document_name: str = ""

    def option(self, option_id: str | None) -> ApprovalOption | None:
        return next((o for o in self.options if o.id == option_id), None)


@dataclass(frozen=True)
class ApprovalDecision:
    allowed: bool
    choice: str | None  # the chosen option's label; None on timeout / no answer
    reason: str  # what the agent is told when denied
    code: str = ""  # "" (allowed), "declined", "dismissed", "timeout", "no_channel", "failed"


@dataclass(frozen=True)
class ApprovalQuestion:
    """What the policy is asked about one tool call (or a restore)."""

    tool_name: str
    tool_input: Mapping[str, Any]
    need: ToolNeed
    session_id: str = ""


@dataclass(frozen=True)
class PolicyAnswer:
    """The policy's verdict on one ApprovalQuestion."""

    verdict: Verdict
    reason: str = ""  # told to the model when denied; shown when protected
    prompt: str = ""  # the question's text, when the policy words it
    summary: str = ""  # the question's short form (ApprovalRequest.summary)
    notice: str | None = None  # shown to the user (a blocked call, once per session)
    timeout: float = 300.0  # approval.timeoutSeconds
    default: Literal["allow", "deny"] = "deny"  # approval.default


class ApprovalPolicy(Protocol):
    """A plugin's rules: a pure function of settings, folders and the question."""

    def decide(self, question: ApprovalQuestion) -> PolicyAnswer: ...


_SEVERITY = {"allow": 0, "ask": 1, "protected": 2, "deny": 3}


def decide(policies: Sequence[ApprovalPolicy], question: ApprovalQuestion) -> PolicyAnswer:
    """The strictest answer of every policy (deny > protected > ask >
    allow). Without a policy: reads and calls that need nothing run, the
    rest asks. A policy that raises denies (fail closed)."""
    if not policies:
        kind = question.need.kind
        if kind in ("none", "read") or question.need.by_user:
            return PolicyAnswer("allow", "no approval policy is enabled")
        return PolicyAnswer("ask", f"no approval policy is enabled; {question.tool_name} asks")
    answers: list[PolicyAnswer] = []
    for policy in policies:
        try:
            answers.append(policy.decide(question))
        except Exception as exc:
            log.exception("Approval policy failed on %s", question.tool_name)
            return PolicyAnswer("deny", f"The approval policy could not check this "
                                f"{question.tool_name} call ({type(exc).__name__}); denied to "
                                "be safe.")
    return max(answers, key=lambda a: _SEVERITY.get(a.verdict, 2))


@dataclass(frozen=True)
class Clearance:
    """The gate's decision on one call: run it or not, and why."""

    allowed: bool
    reason: str = ""  # what the agent is told when not allowed
    # "" (allowed), "denied" (the policy), "declined", "dismissed", "timeout",
    # "no_channel", "failed" (the user's answer, or none)
    code: str = ""
    choice: str | None = None  # the chosen option's label, when asked
    asked: bool = False  # a question was put to the user
    # The editor confirms the change itself (annotation mode): the edit is
    # sent as one that needs confirmation.
    confirm_in_editor: bool = False


class ApprovalChannel(Protocol):
    async def request_approval(self, request: ApprovalRequest) -> str | None:
        """Ask the user; return the chosen option's id, or None if dismissed."""
        ...


class DisplayChannel(Protocol):
    async def show_message(self, message: str, level: MessageLevel = "info") -> None: ...


class ApprovalGate:
    """Decides and asks. One per server process; session memory lives here."""

    def __init__(self, channel: ApprovalChannel | None = None, *,
                 documents: QuestionDocuments | None = None,
                 opener: DocumentOpener | None = None,
                 max_message_chars: int = MESSAGE_MAX_CHARS,
                 max_message_lines: int = MESSAGE_MAX_LINES) -> None:
        self.channel = channel
        # Where a question too long for a message is written, and how the
        # editor is asked to open it (attached by the LSP layer).
        self.documents = documents
        self.opener = opener
        self.max_message_chars = max_message_chars
        self.max_message_lines = max_message_lines
        self._remembered: set[tuple[str, str]] = set()

    # -- decisions -------------------------------------------------------------
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

    # -- one tool call -------------------------------------------------------------
    async def clearance(
        self,
        question: ApprovalQuestion,
        answer: PolicyAnswer,
        *,
        editor_confirms: bool = False,
        approved: bool = False,
        before_asking: Callable[[ApprovalRequest], Awaitable[None]] | None = None,
    ) -> Clearance:
        """Whether the call may run: the policy's `answer`, the session's
        memory, and the user when needed. `editor_confirms`: the editor asks
        before applying an edit (annotation mode), so an edit that must be
        asked is sent for confirmation instead of a message question.
        `approved`: the user already said yes to this call (a tool:pre
        hook's ask_user), which answers "ask" but not "protected".
        `before_asking` runs just before a question is put (approval events)."""
        need = question.need
        if answer.verdict == "deny":
            return Clearance(False, answer.reason or f"{question.tool_name} is denied.",
                             "denied")
        protected = answer.verdict != "allow" and answer.verdict != "ask"
        if answer.verdict == "allow" or (not protected and (
                approved or self.remembered(question.session_id, question.tool_name))):
            return Clearance(True)
        if need.kind == "edit" and editor_confirms:
            return Clearance(True, confirm_in_editor=True)
        request = self.request_for(question, answer, protected=protected)
        if before_asking is not None:
            await before_asking(request)
        decision = await self.ask(request)
        if decision.allowed:
            return Clearance(True, choice=decision.choice, asked=True)
        return Clearance(False, decision.reason, decision.code or "declined",
                         decision.choice, asked=True)

    def request_for(self, question: ApprovalQuestion, answer: PolicyAnswer, *,
                    protected: bool) -> ApprovalRequest:
        """The question put to the user for `question` (see question_text)."""
        need = question.need
        options = ONCE_OPTIONS if protected or not need.remember else EDIT_OPTIONS
        return ApprovalRequest(
            prompt=question_text(question, answer, protected=protected),
            summary=question_summary(question, answer, protected=protected),
            options=options,
            timeout=answer.timeout,
            default="deny" if protected else answer.default,
            session_id=question.session_id,
            tool_name=question.tool_name,
            tool_input=dict(question.tool_input),
            reason=answer.reason,
            protected=protected,
        )

    # -- asking ----------------------------------------------------------------
    async def ask(
        self, request: ApprovalRequest, channel: ApprovalChannel | None = None, *,
        documents: QuestionDocuments | None = None, opener: DocumentOpener | None = None,
    ) -> ApprovalDecision:
        """Ask through `channel` (default: the gate's), apply the timeout,
        default and memory rules; never raises except on cancellation.
        The question is put as `fitted` makes it (`documents` and `opener`
        default to the gate's)."""
        channel = channel or self.channel
        subject = f" for {request.tool_name}" if request.tool_name else ""
        if channel is None:
            return ApprovalDecision(
                False, None,
                f"Approval{subject} was required but no approval channel is attached; denied.",
                "no_channel")
        request = await self.fitted(request, documents or self.documents,
                                    opener or self.opener)
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

    async def fitted(self, request: ApprovalRequest, documents: QuestionDocuments | None,
                     opener: DocumentOpener | None) -> ApprovalRequest:
        """`request` as it is put to the user: its text escaped; when longer
        than a message can carry, its whole text in a document (opened in
        the editor when it can be) and the short form naming that file.
        Without a document, the whole text is the message: never a cut."""
        if fits_message(request.prompt, self.max_message_chars, self.max_message_lines):
            text = shown_question(request.prompt)
            if fits_message(text, self.max_message_chars, self.max_message_lines):
                return replace(request, prompt=text)
        if documents is None or documents.folder is None:
            log.info("A question too long for a message is sent whole (no folder to write "
                     "it to)")
            return replace(request, prompt=await asyncio.to_thread(shown_question,
                                                                   request.prompt))
        document = await asyncio.to_thread(self._write_document, request, documents)
        if document is None:
            return replace(request, prompt=await asyncio.to_thread(shown_question,
                                                                   request.prompt))
        opened = False
        if opener is not None:
            try:
                opened = await opener.show_document(document)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the question is asked all the same
                log.info("Could not open %s in the editor: %s", document, exc)
        return replace(request, prompt=self.short_form(request, document, opened))

    @staticmethod
    def _write_document(request: ApprovalRequest, documents: QuestionDocuments
                        ) -> Path | None:
        text = shown_question(request.prompt)
        about = (f" about {request.tool_name}" if request.tool_name
                 else f" ({request.reason})" if request.reason else "")
        header = (f"agentls: the whole question{shown_question(about)} (a copy to read; "
                  "editing it changes nothing). Answer in the editor's question.\n\n")
        name = request.document_name or documents.name_for(request.tool_name or "question",
                                                           text)
        return documents.write(name, header + text + "\n")

    def short_form(self, request: ApprovalRequest, document: Path, opened: bool) -> str:
        """The message of a question whose whole text is in `document`."""
        where = where_text(document, opened)
        summary = shown_question(request.summary.strip("\n"))
        room = self.max_message_chars - len(where) - 2
        if not summary or not fits_message(summary, room, self.max_message_lines - 6):
            first = shown_question(request.prompt.lstrip().split("\n", 1)[0])
            if len(first) > 200:
                first = first[:200] + " [the rest is in the file]"
            subject = (f"agentls asks about {shown_question(request.tool_name)}:"
                       if request.tool_name else "agentls asks:")
            summary = f"{subject}\n\n    {first}"
        return f"{summary}\n\n{where}"

    @staticmethod
    def _unanswered(request: ApprovalRequest, subject: str, what: str,
                    code: str) -> ApprovalDecision:
        if request.default == "allow" and not request.protected:
            return ApprovalDecision(True, None, "", "")
        why = ("this call always needs an explicit yes" if request.protected
               else "approval.default is deny")
        return ApprovalDecision(False, None, f"The user {what}; {why}.", code)


PROTECTED_NOTE = ("This file configures agentls, the editor, git, CI or a package manager: "
                  "it is asked every time.")


def question_text(question: ApprovalQuestion, answer: PolicyAnswer, *, protected: bool) -> str:
    """The words of a question, whole: an edit's title and whole diff, else
    the tool's own words (an MCP call), else the policy's (a command line),
    else a plain "Allow <tool>?". The gate sends a text too long for a
    message as a document (ApprovalGate.fitted)."""
    need = question.need
    if need.kind == "edit" and need.title:
        note = f"\n\n{answer.reason or PROTECTED_NOTE}" if protected else ""
        return f"{need.title}: allow this change?{note}\n\n{need.preview}"
    if need.question:
        return need.question
    if answer.prompt:
        return answer.prompt
    if need.kind == "run" and need.command:
        return ("The agent wants to run a command (no shell):\n\n"
                f"    {need.command}\n\nin: {need.cwd}\n\nAllow it to run once?")
    return f"Allow {question.tool_name}?"


def question_summary(question: ApprovalQuestion, answer: PolicyAnswer, *,
                     protected: bool) -> str:
    """The short form of question_text, for when it is too long for a
    message: an edit's title and the size of its diff, else the tool's or
    the policy's own short form, else a command's program and size."""
    need = question.need
    if need.kind == "edit" and need.title:
        note = f"\n\n{answer.reason or PROTECTED_NOTE}" if protected else ""
        lines = need.preview.split("\n")
        size = f"{len(lines):,} lines, {len(need.preview):,} characters"
        if not any(line.startswith("@@") for line in lines):  # not a diff (a restore)
            return f"{need.title}: allow this change?{note}\n\n    The change: {size}."
        added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
        removed = sum(1 for line in lines
                      if line.startswith("-") and not line.startswith("---"))
        return (f"{need.title}: allow this change?{note}\n\n    The diff: {size} "
                f"({added:,} added, {removed:,} removed).")
    if need.question:
        return need.summary
    if answer.prompt:
        return answer.summary
    if need.kind == "run" and need.command:
        program = need.command.split(" ", 1)[0][:200]
        return ("The agent wants to run a command (no shell) starting with\n\n"
                f"    {program}\n\n({len(need.command):,} characters) in: {need.cwd[:200]}"
                "\n\nAllow it to run once?")
    return ""
