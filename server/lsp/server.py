"""The pygls language server object. Handlers stay thin: each translates one
LSP method into calls on the core (ARCHITECTURE.md, "Style to follow")."""

from __future__ import annotations

import logging

from pygls.lsp.server import LanguageServer

from agentls import __version__

log = logging.getLogger("agentls.lsp")


class AgentlsLanguageServer(LanguageServer):
    """agentls over LSP. Capabilities are advertised only for what is
    implemented; features register their handlers in `create_server`."""


def create_server() -> AgentlsLanguageServer:
    return AgentlsLanguageServer("agentls", __version__)
