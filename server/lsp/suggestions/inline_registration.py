"""inlineCompletionProvider follows `inlineCompletion.enabled`: a client
that supports dynamic registration for textDocument/inlineCompletion is not
told statically; the server registers the capability
(client/registerCapability) while inline completion is enabled and
unregisters it when the settings switch it off, so the editor stops asking.
A client without dynamic registration gets the static capability, and while
disabled every request is answered with no items and no backend call
(features/inline_completion/feature.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

if TYPE_CHECKING:
    from agentls.lsp.server import AgentlsLanguageServer

log = logging.getLogger("agentls.lsp.suggestions.inline_registration")

REGISTRATION_ID = "agentls-inline-completion"
METHOD = types.TEXT_DOCUMENT_INLINE_COMPLETION


def client_registers_dynamically(params: types.InitializeParams) -> bool:
    document = params.capabilities.text_document if params.capabilities else None
    inline = document.inline_completion if document else None
    return bool(inline and inline.dynamic_registration)


def prepare(ls: AgentlsLanguageServer, params: types.InitializeParams) -> None:
    """At initialize (before pygls computes the capabilities): leave the
    static capability out for clients that register dynamically."""
    ls.inline_dynamic = client_registers_dynamically(params)
    ls.inline_registered = False
    if ls.inline_dynamic:
        ls.protocol.fm.feature_options.pop(METHOD, None)


async def sync(ls: AgentlsLanguageServer) -> None:
    """Register or unregister to match the current settings (no-op for
    clients with the static capability)."""
    if not getattr(ls, "inline_dynamic", False):
        return
    enabled = ls.state.host.settings.inline_completion.enabled
    if enabled == ls.inline_registered:
        return
    ls.inline_registered = enabled  # set first: a concurrent sync must not repeat it
    try:
        if enabled:
            await asyncio.wait_for(ls.client_register_capability_async(types.RegistrationParams(
                registrations=[types.Registration(
                    id=REGISTRATION_ID, method=METHOD,
                    register_options=_options())])), 10)
        else:
            await asyncio.wait_for(ls.client_unregister_capability_async(
                types.UnregistrationParams(unregisterations=[types.Unregistration(
                    id=REGISTRATION_ID, method=METHOD)])), 10)
    except Exception as exc:  # an odd client must not stop the server
        ls.inline_registered = not enabled  # try again at the next settings change
        log.warning("%s inline completion failed: %s",
                    "Registering" if enabled else "Unregistering", exc)


def _options() -> Any:
    # documentSelector null: the client's own document selector applies.
    return {"documentSelector": None}
