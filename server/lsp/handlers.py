"""The language server with every area's handlers registered: each area's
module registers its own (`register(server)`), and pygls computes the
capabilities from what is registered, so only what is implemented is
advertised. Kept apart from server.py because the handler modules import
that one for the server's type."""

from __future__ import annotations

from agentls.lsp import lifecycle, progress, status
from agentls.lsp.agent import chat, checkpoints, code_actions, compact
from agentls.lsp.copilot import completions, conversation, dialect
from agentls.lsp.server import AgentlsLanguageServer
from agentls.lsp.state import ServerState
from agentls.lsp.suggestions import completion, inline, next_edit

__all__ = ["create_server"]

# conversation after chat: it wraps the approval channel chat connected.
AREAS = (lifecycle, progress, status, completion, code_actions, chat, conversation, compact,
         inline, next_edit, checkpoints, dialect, completions)


def create_server(state: ServerState | None = None) -> AgentlsLanguageServer:
    server = AgentlsLanguageServer(state)
    for area in AREAS:
        area.register(server)
    return server
