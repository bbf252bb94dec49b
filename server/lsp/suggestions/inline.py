"""textDocument/inlineCompletion, the Copilot-style didShowCompletion /
didPartiallyAcceptCompletion notifications, and the
agentls.inlineCompletionAccepted command (docs/protocol.md).

Thin: positions become offsets here, the `inline-completion` feature plugin
does the work through the InlineCompleter contract
(core/editor/inline_completion.py), and its answer becomes LSP items. Errors the user can act on
are shown once with window/showMessage; the request still answers (no items).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from agentls.core.editor.inline_completion import InlineCompleter, InlineRequest, OpenDocument
from agentls.core.editor.positions import PositionOutOfRange, offset_at
from agentls.lsp.suggestions.served import ServedIds
from agentls.lsp.wire.convert import position_encoding, to_plain

if TYPE_CHECKING:
    from agentls.core.editor.inline_completion import UserNotice
    from agentls.lsp.server import AgentlsLanguageServer

log = logging.getLogger("agentls.lsp.suggestions.inline")

FEATURE_NAME = "inline-completion"
ACCEPT_COMMAND = "agentls.inlineCompletionAccepted"
DID_SHOW = "textDocument/didShowCompletion"
DID_PARTIALLY_ACCEPT = "textDocument/didPartiallyAcceptCompletion"
_EMPTY: dict[str, Any] = {"items": []}


class _InlineEndpoint:
    """Per-server state of the handlers: the ids of items served, the
    notices shown."""

    def __init__(self) -> None:
        self.items = ServedIds()
        self.told: set[str] = set()


def _warm(state: Any) -> None:
    """The first answer is on its way: background start-up work may begin
    (state.warm_up) once it has been written, a moment later."""
    if state.inline_warm is None:
        state.inline_warm = asyncio.Event()
    if not state.inline_warm.is_set():
        asyncio.get_running_loop().call_later(0.1, state.inline_warm.set)


def register(server: AgentlsLanguageServer) -> None:
    endpoint = _InlineEndpoint()

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(
        ls: AgentlsLanguageServer, params: types.InlineCompletionParams
    ) -> dict[str, Any]:
        state = ls.state
        if not ls.settings_ready.is_set():  # only the first requests after start-up wait
            await ls.wait_settings()
        feature = state.host.feature(FEATURE_NAME, InlineCompleter)
        if feature is None:
            return _EMPTY
        uri = params.text_document.uri
        document = ls.workspace.text_documents.get(unquote(uri))
        if document is None:
            return _EMPTY  # not open: nothing to complete against
        position = params.position
        text = document.source
        try:
            offset = offset_at(text, position.line, position.character, position_encoding(ls))
        except PositionOutOfRange as exc:
            raise JsonRpcInvalidParams(f"textDocument/inlineCompletion: {exc}") from None
        request = InlineRequest(
            uri=uri,
            language_id=document.language_id or "",
            text=text,
            offset=offset,
            invoked=params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked,
            neighbours=lambda: _open_documents(ls),
        )
        try:
            answer = await feature.complete(request, state.host.provider,
                                            state.host.settings.inline_completion)
        except Exception:  # a bug must cost one suggestion, not the editor's patience
            log.exception("Inline completion failed unexpectedly")
            return _EMPTY
        finally:
            _warm(state)
        if answer.prompt_chars:
            sent = state.prompt_counters
            sent.requests += 1
            sent.chars += answer.prompt_chars
            sent.input_tokens += answer.input_tokens
        if answer.notice is not None:
            _tell_once(ls, endpoint, answer.notice)
        elif answer.model_answered and endpoint.told:
            for key in endpoint.told:  # working again: a later failure is news
                state.forget_notice(key)
            endpoint.told.clear()
        if not answer.items:
            return _EMPTY
        state.counters.served += 1
        at = {"line": position.line, "character": position.character}
        return {
            "items": [
                {
                    "insertText": item,
                    "range": {"start": at, "end": at},
                    "command": {
                        "title": "Accept completion",
                        "command": ACCEPT_COMMAND,
                        "arguments": [endpoint.items.new()],
                    },
                }
                for item in answer.items
            ]
        }

    @server.feature(DID_SHOW)
    def did_show_completion(ls: AgentlsLanguageServer, params: Any) -> None:
        ls.state.counters.shown += 1

    @server.feature(DID_PARTIALLY_ACCEPT)
    def did_partially_accept_completion(ls: AgentlsLanguageServer, params: Any) -> None:
        # Not counted as accepted (docs/protocol.md counts accept commands); the
        # rest of the item is answered from the cache as the user types on.
        log.debug("Partially accepted: %s", to_plain(params))

    @server.command(ACCEPT_COMMAND)
    def inline_completion_accepted(ls: Any, *arguments: Any) -> None:
        if not arguments or not isinstance(arguments[0], str | int):
            raise JsonRpcInvalidParams(
                f"{ACCEPT_COMMAND} takes one argument, the item id from the completion's command"
            )
        if endpoint.items.accept(str(arguments[0])):  # counted once per served item
            ls.state.counters.accepted += 1


def _open_documents(ls: AgentlsLanguageServer) -> Iterator[OpenDocument]:
    """Open documents, most recently opened first."""
    for document in reversed(list(ls.workspace.text_documents.values())):
        yield OpenDocument(
            uri=document.uri,
            language_id=document.language_id or "",
            version=document.version,
            text=document.source,
        )


def _tell_once(ls: AgentlsLanguageServer, endpoint: _InlineEndpoint, notice: UserNotice) -> None:
    if ls.state.first_time(notice.key):
        endpoint.told.add(notice.key)
        kind = types.MessageType.Error
        if notice.severity == "warning":
            kind = types.MessageType.Warning
        ls.window_show_message(types.ShowMessageParams(type=kind, message=notice.message))
