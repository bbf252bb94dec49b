"""Asking the user to trust the workspace file (`.agentls.toml`), and the
LSP's way of asking it: through the host's TrustAsker (agentls.host), whose
one approval gate asks with window/showMessageRequest and opens a long
question's whole text with window/showDocument. The MCP feature's
`.mcp.json` question goes through the same asker (FeatureHost.trust); the
mechanism is agentls.core.trust.question.

Until the user answers, the file's keys that can send data or run code are
ignored (the settings loader already left them out). "Trust" records the
content hash and reloads the settings; "Don't trust" records the refusal so
the question is not repeated at every start (a changed file asks again).
Dismissing asks again at the next start. The question never blocks
initialize, inline completion or chat.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

if TYPE_CHECKING:
    from agentls.core.trust.question import TrustQuestion
    from agentls.core.trust.workspace import WorkspaceTrust
    from agentls.lsp.server import AgentlsLanguageServer


def trust_question(trust: WorkspaceTrust) -> TrustQuestion:
    from agentls.core.trust.question import settings_question

    return settings_question(trust)


def question(trust: WorkspaceTrust) -> str:
    """The whole text of the `.agentls.toml` question."""
    return trust_question(trust).full_text()


def schedule_trust_question(ls: AgentlsLanguageServer) -> None:
    """Ask in the background when the workspace file waits for trust (once
    per file content and process); tell once when the user refused it."""
    trust = ls.state.host.loaded.workspace_trust
    if trust is None or trust.state in ("none", "trusted"):
        return
    if trust.state == "refused":
        if ls.state.first_time(f"trust-refused:{trust.file}:{trust.digest}"):
            ls.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Warning,
                message=(f"agentls ignores {', '.join(trust.pending)} from {trust.file}: you "
                         "chose not to trust this file. Run `agentls trust` in the workspace "
                         "to change that.")))
        return
    if not ls.state.first_time(f"trust-asked:{trust.file}:{trust.digest}"):
        return
    ls.in_background(_ask(ls, trust))


async def _ask(ls: AgentlsLanguageServer, trust: WorkspaceTrust) -> None:
    decision = await ls.state.host.ask_settings_trust(trust)
    if decision is None:
        return
    from agentls.lsp.reload import close_retired_providers, prepare_models, report_problems

    # Re-read: a trusted file's keys apply now; a refused one is reported as such.
    report_problems(ls, ls.state.host.reload_settings())
    prepare_models(ls)
    await close_retired_providers(ls)
    from agentls.lsp.suggestions.inline_registration import sync

    await sync(ls)
