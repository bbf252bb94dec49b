"""textDocument/inlineCompletion, the Copilot-style didShowCompletion /
didPartiallyAcceptCompletion notifications, and the
agentls.inlineCompletionAccepted command (docs/protocol.md).

Thin: positions become offsets here, the `inline-completion` feature plugin
does the work through the InlineCompleter contract
(core/editor/inline_completion.py), and its answer becomes LSP items. Errors the user can act on
are shown once with window/showMessage; the request still answers (no items).
`suggest` is the one path every request for inline suggestions takes (the
Copilot dialect's getCompletions and panel too: lsp/copilot/completions.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from agentls.core.editor.inline_completion import InlineCompleter, InlineRequest, OpenDocument
from agentls.core.editor.positions import PositionOutOfRange, offset_at
from agentls.lsp.copilot import dialect
from agentls.lsp.wire.convert import position_encoding, to_plain

if TYPE_CHECKING:
    from agentls.core.editor.inline_completion import UserNotice
    from agentls.lsp.server import AgentlsLanguageServer

log = logging.getLogger("agentls.lsp.suggestions.inline")

FEATURE_NAME = "inline-completion"
ACCEPT_COMMAND = "agentls.inlineCompletionAccepted"
DID_SHOW = "textDocument/didShowCompletion"
DID_PARTIALLY_ACCEPT = "textDocument/didPartiallyAcceptCompletion"
DID_MOVE_CURSOR = "agentls/didMoveCursor"
_EMPTY: dict[str, Any] = {"items": []}


@dataclass(frozen=True)
class Suggestions:
    """What one request for suggestions at a position got: the texts with
    the ids of their accept commands (empty: nothing to suggest), the
    version of the document they were made for, and the cursor's line
    before and after the cursor (the Copilot dialect's items hold the line)."""

    items: tuple[tuple[str, str], ...]  # (served id, text)
    version: int | None
    before: str = ""
    after: str = ""


_NOTHING = Suggestions((), None)


def _warm(state: Any) -> None:
    """The first answer is on its way: background start-up work may begin
    (state.warm_up) once it has been written, a moment later."""
    if state.inline_warm is None:
        state.inline_warm = asyncio.Event()
    if not state.inline_warm.is_set():
        asyncio.get_running_loop().call_later(0.1, state.inline_warm.set)


def prepare_soon(ls: AgentlsLanguageServer) -> None:
    """A document opened: ready the completion model in the background (the
    provider built, its GGUF read, its child loaded or leased from the model
    host) so the first keystroke waits for the model's answer alone. Once per
    provider: a settings change that builds a new one prepares again."""
    state = ls.state
    prepared = state.inline_prepared
    if prepared is _PREPARING or (prepared is not None
                                  and prepared is state.host.current_provider):
        return
    state.inline_prepared = _PREPARING
    ls.in_background(_prepare(ls))


_PREPARING = object()  # a preparation is under way


async def _prepare(ls: AgentlsLanguageServer) -> None:
    state = ls.state
    try:
        await ls.wait_settings()
        feature = state.host.feature(FEATURE_NAME, InlineCompleter)
        if feature is not None:
            await feature.prepare(state.host.provider, state.host.settings.inline_completion)
    except Exception as exc:  # the first request says what is wrong, once
        log.info("Inline completion: the model was not prepared ahead: %s", exc)
    finally:
        state.inline_prepared = state.host.current_provider


def _request_at(ls: AgentlsLanguageServer, uri: str, line: int, character: int, *,
                invoked: bool, method: str) -> InlineRequest | None:
    """The feature's request for a position of an open document (None: not
    open); -32602 naming `method` for a position outside it."""
    document = ls.workspace.text_documents.get(unquote(uri))
    if document is None:
        return None
    text = document.source
    try:
        offset = offset_at(text, line, character, position_encoding(ls))
    except PositionOutOfRange as exc:
        raise JsonRpcInvalidParams(f"{method}: {exc}") from None
    return InlineRequest(
        uri=uri,
        language_id=document.language_id or "",
        text=text,
        offset=offset,
        invoked=invoked,
        neighbours=lambda: _open_documents(ls),
    )


async def warm_at(ls: AgentlsLanguageServer, params: Any) -> None:
    """agentls/didMoveCursor: the editor's cursor came to rest; the feature
    readies the prompt there (InlineCompleter.warm_at). A notification gets
    no error back: bad params are logged and dropped."""
    plain = to_plain(params)
    try:
        uri = plain["textDocument"]["uri"]
        line, character = plain["position"]["line"], plain["position"]["character"]
        if not (isinstance(uri, str) and isinstance(line, int) and isinstance(character, int)):
            raise TypeError
    except (KeyError, TypeError):
        log.info("%s: params need textDocument.uri and position {line, character}; got %.200r",
                 DID_MOVE_CURSOR, plain)
        return
    if not ls.settings_ready.is_set():
        await ls.wait_settings()
    state = ls.state
    feature = state.host.feature(FEATURE_NAME, InlineCompleter)
    try:
        request = _request_at(ls, uri, line, character, invoked=False, method=DID_MOVE_CURSOR)
    except JsonRpcInvalidParams as exc:
        log.info("%s", exc)
        return
    if feature is None or request is None:
        return
    try:
        if await feature.warm_at(request, state.host.provider,
                                 state.host.settings.inline_completion):
            state.counters.warmed += 1
            log.debug("Inline completion: the prompt at line %d evaluated ahead", line + 1)
    except Exception:  # a cursor move must never cost more than its warm-up
        log.exception("Inline completion: the warm-up at the cursor failed unexpectedly")


async def suggest(ls: AgentlsLanguageServer, uri: str, line: int, character: int, *,
                  invoked: bool, method: str) -> Suggestions:
    """Inline completions at a position through the `inline-completion`
    feature (its cache, supersede, prompt plans and post-processing), for
    every method that asks for them (this module's and the Copilot
    dialect's, lsp/copilot/completions.py). -32602 naming `method` for a
    position outside the document."""
    state = ls.state
    if not ls.settings_ready.is_set():  # only the first requests after start-up wait
        await ls.wait_settings()
    feature = state.host.feature(FEATURE_NAME, InlineCompleter)
    if feature is None:
        return _NOTHING
    request = _request_at(ls, uri, line, character, invoked=invoked, method=method)
    if request is None:
        return _NOTHING  # not open: nothing to complete against
    document = ls.workspace.text_documents[unquote(uri)]
    text, offset = request.text, request.offset
    started = time.perf_counter()
    try:
        answer = await feature.complete(request, state.host.provider,
                                        state.host.settings.inline_completion)
    except Exception:  # a bug must cost one suggestion, not the editor's patience
        log.exception("Inline completion failed unexpectedly")
        return _NOTHING
    finally:
        _warm(state)
    if answer.prompt_chars:
        sent = state.prompt_counters
        sent.requests += 1
        sent.chars += answer.prompt_chars
        sent.input_tokens += answer.input_tokens
    if answer.notice is not None:
        _tell_once(ls, answer.notice)
    elif answer.model_answered and state.inline_told:
        for key in state.inline_told:  # working again: a later failure is news
            state.forget_notice(key)
        state.inline_told.clear()
        dialect.tell_status(ls, "Normal")
    if not answer.superseded:
        state.counters.answered((time.perf_counter() - started) * 1000,
                                suggested=bool(answer.items), cached=answer.from_cache,
                                partial=answer.partial)
    if not answer.items:
        return Suggestions((), document.version)
    state.counters.served += 1
    end = text.find("\n", offset)
    return Suggestions(tuple((state.inline_served.new(), item) for item in answer.items),
                       document.version, before=text[text.rfind("\n", 0, offset) + 1:offset],
                       after=text[offset:len(text) if end < 0 else end].removesuffix("\r"))


def accepted(ls: AgentlsLanguageServer, served_id: str) -> None:
    """An item was accepted: counted once per served item."""
    if ls.state.inline_served.accept(served_id):
        ls.state.counters.accepted += 1


def register(server: AgentlsLanguageServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(
        ls: AgentlsLanguageServer, params: types.InlineCompletionParams
    ) -> dict[str, Any]:
        position = params.position
        found = await suggest(
            ls, params.text_document.uri, position.line, position.character,
            invoked=params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked,
            method=types.TEXT_DOCUMENT_INLINE_COMPLETION)
        if not found.items:
            return _EMPTY
        at = {"line": position.line, "character": position.character}
        return {
            "items": [
                {
                    "insertText": item,
                    "range": {"start": at, "end": at},
                    "command": {
                        "title": "Accept completion",
                        "command": ACCEPT_COMMAND,
                        "arguments": [served_id],
                    },
                }
                for served_id, item in found.items
            ]
        }

    @server.feature(DID_MOVE_CURSOR)
    def did_move_cursor(ls: AgentlsLanguageServer, params: Any) -> None:
        ls.in_background(warm_at(ls, params))

    @server.feature(DID_SHOW)
    def did_show_completion(ls: AgentlsLanguageServer, params: Any) -> None:
        ls.state.counters.shown += 1

    @server.feature(DID_PARTIALLY_ACCEPT)
    def did_partially_accept_completion(ls: AgentlsLanguageServer, params: Any) -> None:
        # Counted apart from accepts (docs/protocol.md counts accept commands):
        # the rest of the item is answered from the cache as the user types on.
        served_id = _command_item_id(to_plain(params))
        if served_id is not None and ls.state.inline_served.mark(served_id, "partial"):
            ls.state.counters.partially_accepted += 1

    @server.command(ACCEPT_COMMAND)
    def inline_completion_accepted(ls: Any, *arguments: Any) -> None:
        if not arguments or not isinstance(arguments[0], str | int):
            raise JsonRpcInvalidParams(
                f"{ACCEPT_COMMAND} takes one argument, the item id from the completion's command"
            )
        accepted(ls, str(arguments[0]))


def _command_item_id(params: Any) -> str | None:
    """The served id in a notification's `item.command.arguments[0]` (how
    Copilot's clients name the item they showed or accepted), if any."""
    item = params.get("item") if isinstance(params, dict) else None
    command = item.get("command") if isinstance(item, dict) else None
    arguments = command.get("arguments") if isinstance(command, dict) else None
    if (isinstance(command, dict) and command.get("command") == ACCEPT_COMMAND
            and isinstance(arguments, list) and arguments
            and isinstance(arguments[0], str | int) and not isinstance(arguments[0], bool)):
        return str(arguments[0])
    return None


def _open_documents(ls: AgentlsLanguageServer) -> Iterator[OpenDocument]:
    """Open documents, most recently opened first."""
    for document in reversed(list(ls.workspace.text_documents.values())):
        yield OpenDocument(
            uri=document.uri,
            language_id=document.language_id or "",
            version=document.version,
            text=document.source,
        )


def _tell_once(ls: AgentlsLanguageServer, notice: UserNotice) -> None:
    if ls.state.first_time(notice.key):
        ls.state.inline_told.add(notice.key)
        kind = types.MessageType.Error
        if notice.severity == "warning":
            kind = types.MessageType.Warning
        ls.window_show_message(types.ShowMessageParams(type=kind, message=notice.message))
        dialect.tell_status(ls, "Warning" if notice.severity == "warning" else "Error",
                            notice.message)
