"""pygls' protocol with one fix: a request whose params do not parse gets an
answer.

pygls deserialises typed requests while parsing the JSON; when the params do
not fit the LSP type it logs the error and never answers, so the client
waits forever. Here such a request is answered with -32602 (InvalidParams)
naming the method and what was wrong, and the server carries on.
"""

from __future__ import annotations

import logging
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol

log = logging.getLogger("agentls.lsp.protocol")


class _Unparsable:
    """Stands in for a message that was already answered with an error."""

    jsonrpc = "unparsable"


class AgentlsProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except Exception as exc:
            method = data.get("method")
            if "id" in data and method is not None:
                cause = exc.__cause__ or exc
                detail = _describe(cause)
                error = JsonRpcInvalidParams(
                    f"Invalid params for {method}: {detail}. Check the request against the "
                    "LSP specification / docs/protocol.md."
                )
                self._send_response(data["id"], None, error.to_response_error())
                log.warning("Answered %s (id %s) with InvalidParams: %s", method, data["id"],
                            detail)
                return _Unparsable()
            log.warning("Dropped a notification %s whose params do not parse: %s", method,
                        _describe(exc.__cause__ or exc))
            return _Unparsable()

    def handle_message(self, message: Any) -> None:
        if isinstance(message, _Unparsable):
            return
        super().handle_message(message)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    nested = getattr(exc, "exceptions", None)
    if nested:
        inner = "; ".join(str(e).splitlines()[0] for e in nested[:3])
        return f"{first} ({inner})"[:500]
    return first[:500]
