"""The one workspace-trust question: built from what a workspace file asks
for, asked through the approval gate, remembered in the user's TrustStore.

Both workspace files that can send data or run programs ask through here:
`.agentls.toml` (lsp/trust.py) and `.mcp.json` (features/mcp/feature.py),
with the same shape (what the file is and where it really lives, every
entry whole, why it matters, two answers) and the same memory.

A question never hides a byte that changes the answer (trust_display.py
shows the entries). When the whole text is longer than a message can
carry, it is written to a file only the user can read in the state
directory (`trust-questions/`, 0600), the editor is asked to open it
(window/showDocument, through a DocumentOpener), and the question names
the file and what it holds; a short question (one `npx` server) stays one
readable message with no document.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .approval import ApprovalGate, ApprovalOption, ApprovalRequest, DisplayChannel
from .trust_display import visible
from .workspace_trust import TrustDecision, TrustStore

__all__ = [
    "MESSAGE_MAX_CHARS",
    "MESSAGE_MAX_LINES",
    "QUESTIONS_FOLDER",
    "DocumentOpener",
    "TrustAsker",
    "TrustQuestion",
]

log = logging.getLogger("agentls.trust")

# Longer questions go to a document the editor opens: a message this long is
# still shown whole by VS Code's notification and Neovim's prompt.
MESSAGE_MAX_CHARS = 1500
MESSAGE_MAX_LINES = 24
QUESTION_TIMEOUT_SECONDS = 3600.0
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

    def pointer_text(self, document: Path | None, opened: bool) -> str:
        if document is None:
            where = ("It is too long for this message and could not be written to a file: "
                     "run `agentls check` in the workspace to read it before you answer.")
        else:
            shown = "is open in your editor: " if opened else "is in the file "
            where = (f"It is too long for this message: the whole text {shown}"
                     f"{visible(str(document))}. Read it before you answer.")
        return "\n".join([*self.location_lines(), self.heading, "", f"    {self.summary}", "",
                          where, "", self.footer])


class DocumentOpener(Protocol):
    async def show_document(self, path: Path) -> bool:
        """Ask the editor to show this file; False when it could not."""
        ...


class TrustAsker:
    """Asks a TrustQuestion through the approval gate and records the answer
    in the TrustStore. One per server; every workspace file asks through it."""

    def __init__(self, gate: ApprovalGate, store: TrustStore | None,
                 opener: DocumentOpener | None = None, display: DisplayChannel | None = None,
                 *, max_message_chars: int = MESSAGE_MAX_CHARS) -> None:
        self.gate = gate
        self.store = store
        self.opener = opener
        self.display = display
        self.max_message_chars = max_message_chars

    def request(self, question: TrustQuestion, prompt: str) -> ApprovalRequest:
        options = (ApprovalOption("trust", question.allow_label, allows=True),
                   ApprovalOption("refuse", question.refuse_label, allows=False))
        # protected: an unanswered question never trusts, and no "for session".
        return ApprovalRequest(prompt=prompt, options=options,
                               timeout=QUESTION_TIMEOUT_SECONDS, protected=True,
                               reason=f"workspace trust for {question.file}")

    async def prompt(self, question: TrustQuestion) -> str:
        """The message to ask with: the whole text, or a pointer to the
        document holding it (opened in the editor) when it is too long."""
        text = question.full_text()
        if len(text) <= self.max_message_chars and text.count("\n") < MESSAGE_MAX_LINES:
            return text
        document = self.write_document(question, text)
        opened = False
        if document is not None and self.opener is not None:
            try:
                opened = await self.opener.show_document(document)
            except Exception as exc:  # the question is asked all the same
                log.info("Could not open %s in the editor: %s", document, exc)
        return question.pointer_text(document, opened)

    async def ask(self, question: TrustQuestion) -> TrustDecision | None:
        """The user's answer, recorded; None when dismissed or unanswered
        (the file stays untrusted and is asked about at the next start)."""
        decision = await self.gate.ask(self.request(question, await self.prompt(question)))
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

    def write_document(self, question: TrustQuestion, text: str) -> Path | None:
        """The whole question in `<state>/trust-questions/`, readable by the
        user only; None when there is no state directory or it failed."""
        if self.store is None or self.store.path is None:
            return None
        folder = self.store.path.parent / QUESTIONS_FOLDER
        target = folder / f"{question.kind}-{question.digest[:16]}.txt"
        header = ("agentls: the whole trust question (a copy to read; editing it changes "
                  "nothing). Answer in the editor's question.\n\n")
        from .state_dir import ensure_private_dir

        try:
            ensure_private_dir(folder)  # 0700, and the state dir above it
            fd, tmp = tempfile.mkstemp(prefix=".question-", suffix=".txt", dir=folder)
            try:  # mkstemp creates it 0600
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(header + text + "\n")
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            log.warning("Cannot write the trust question to %s: %s", folder, exc)
            return None
        return target
