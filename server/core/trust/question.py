"""The one workspace-trust question: built from what a workspace file asks
for, asked through the approval gate, remembered in the user's TrustStore.

Both workspace files that can send data or run programs ask through here:
`.agentls.toml` (lsp/trust.py) and `.mcp.json` (features/mcp/feature.py),
with the same shape (what the file is and where it really lives, every
entry whole, why it matters, two answers) and the same memory.

A question never hides a byte that changes the answer (trust_display.py
shows the entries). When the whole text is longer than a message can
carry, the approval gate (the one mechanism for every question,
core/approval/documents.py) writes it to a file only the user can read in
the state directory (`trust-questions/`, 0600), the editor is asked to
open it (window/showDocument, through a DocumentOpener), and the question
names the file and what it holds; a short question (one `npx` server)
stays one readable message with no document.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from agentls.core.approval.documents import (
    DocumentOpener,
    QuestionDocuments,
)
from agentls.core.approval.gate import ApprovalGate, ApprovalOption, ApprovalRequest, DisplayChannel
from agentls.core.trust.display import visible
from agentls.core.trust.workspace import TrustDecision, TrustStore, WorkspaceTrust

__all__ = ["QUESTIONS_FOLDER", "TrustAsker", "TrustQuestion", "settings_question"]

log = logging.getLogger("agentls.trust")

QUESTION_TIMEOUT_SECONDS = 3600.0
TRUST = "Trust"
DONT_TRUST = "Don't trust"
QUESTIONS_FOLDER = "trust-questions"


@dataclass(frozen=True)
class TrustQuestion:
    """What one workspace file asks to be trusted for."""

    file: str  # the file's path as the workspace spells it
    digest: str  # SHA-256 of the content asked about
    kind: str  # TrustStore kind: "settings" (.agentls.toml), "mcp" (.mcp.json)
    heading: str  # "<file> wants to ...:"
    body: Sequence[str]  # every entry, whole (trust_display)
    footer: str  # why it matters, and the question itself
    summary: str  # one line naming what the body holds, for the pointer form
    allow_label: str = "Trust"
    refuse_label: str = "Don't trust"
    link_target: str | None = None  # the file is a symbolic link to this
    outside: bool = False  # it resolves outside its workspace folder
    notes: Sequence[str] = field(default_factory=tuple)  # said after the heading

    def location_lines(self) -> list[str]:
        lines = []
        if self.link_target is not None:
            lines.append(f"Note: {visible(self.file)} is a symbolic link to "
                         f"{visible(self.link_target)}.")
        if self.outside:
            lines.append("It resolves outside this workspace folder. Trust you gave that file "
                         "elsewhere does not apply here.")
        return [*lines, ""] if lines else []

    def full_text(self) -> str:
        return "\n".join([*self.location_lines(), self.heading, "", *self.body, *self.notes,
                          "", self.footer])

    def summary_text(self) -> str:
        """The short form, when the whole text is too long for a message
        (the gate adds where the whole text is)."""
        return "\n".join([*self.location_lines(), self.heading, "", f"    {self.summary}", "",
                          self.footer])


class TrustAsker:
    """Asks a TrustQuestion through the approval gate and records the answer
    in the TrustStore. One per server; every workspace file asks through it."""

    def __init__(self, gate: ApprovalGate, store: TrustStore | None,
                 opener: DocumentOpener | None = None,
                 display: DisplayChannel | None = None) -> None:
        self.gate = gate
        self.store = store
        self.opener = opener
        self.display = display
        # Long questions are written next to the trust store.
        folder = (store.path.parent / QUESTIONS_FOLDER
                  if store is not None and store.path is not None else None)
        self.documents = QuestionDocuments(folder) if folder is not None else None

    def request(self, question: TrustQuestion) -> ApprovalRequest:
        options = (ApprovalOption("trust", question.allow_label, allows=True),
                   ApprovalOption("refuse", question.refuse_label, allows=False))
        # protected: an unanswered question never trusts, and no "for session".
        return ApprovalRequest(prompt=question.full_text(), options=options,
                               timeout=QUESTION_TIMEOUT_SECONDS, protected=True,
                               reason=f"workspace trust for {question.file}",
                               summary=question.summary_text(),
                               document_name=f"{question.kind}-{question.digest[:16]}")

    async def ask(self, question: TrustQuestion) -> TrustDecision | None:
        """The user's answer, recorded; None when dismissed or unanswered
        (the file stays untrusted and is asked about at the next start)."""
        decision = await self.gate.ask(self.request(question), documents=self.documents,
                                       opener=self.opener)
        if decision.choice is None:
            log.info("Trust question for %s not answered (%s); it stays untrusted",
                     question.file, decision.code or "dismissed")
            return None
        answer: TrustDecision = "trusted" if decision.allowed else "refused"
        if self.store is not None:
            try:
                self.store.record(question.file, question.digest, answer, question.kind)
            except OSError as exc:
                log.warning("Cannot remember the answer for %s: %s", question.file, exc)
                if self.display is not None:
                    await self.display.show_message(
                        f"agentls could not remember your answer for {question.file}: {exc}",
                        "error")
        log.info("Workspace file %s %s (sha256 %s)", question.file, answer,
                 question.digest[:12])
        return answer


def settings_question(trust: WorkspaceTrust) -> TrustQuestion:
    """The `.agentls.toml` question: the keys that wait for trust, whole.
    Asked by every front (lsp/trust.py, acp/workspace.py) through its gate."""
    count = len(trust.keys)
    return TrustQuestion(
        file=trust.file, digest=trust.digest, kind="settings",
        heading=f"{visible(trust.file)} wants to set keys that can send your data or run commands:",
        body=[f"    {line}" for line in trust.lines],
        footer=("They are ignored until you trust this file. A file that came with a "
                "repository can point agentls at another server with your API key, run "
                "programs, or download and load a model. Trust this content of the file?"),
        summary=f"{count} key{'s' if count != 1 else ''}: "
                + ", ".join(key for key, _ in trust.keys),
        allow_label=TRUST, refuse_label=DONT_TRUST,
        link_target=trust.link_target, outside=trust.outside)
