"""The Copilot dialect's completion methods: getCompletions,
getCompletionsCycling, getPanelCompletions (answered through PanelSolution
/ PanelSolutionsDone notifications) and notifyShown / notifyAccepted /
notifyRejected, all on the same inline-completion path as
textDocument/inlineCompletion (lsp/suggestions/inline.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentls.lsp.server import AgentlsLanguageServer


def register(server: AgentlsLanguageServer) -> None:
    pass
