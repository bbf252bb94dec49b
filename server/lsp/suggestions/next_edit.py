"""Next edit suggestions over LSP (docs/protocol.md): the user's edits from
didChange into the edit history, `textDocument/copilotInlineEdit` (named
and shaped as GitHub's Copilot language server does, so sidekick.nvim and
copilot-lsp work unchanged), Copilot's `textDocument/didFocus`
notification, and the `agentls.nextEditAccepted` command.

Thin: positions become offsets here, the `next-edit` feature plugin does the
work (imported only when a suggestion is asked for, so inline completion's
path does not load it), and its edits become ranges.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from agentls.core.editor.history import EditHistory, TextChange
from agentls.core.editor.positions import PositionOutOfRange, offset_at, position_at
from agentls.lsp.suggestions import inline
from agentls.lsp.suggestions.served import ServedIds
from agentls.lsp.wire.convert import position_encoding, to_plain

if TYPE_CHECKING:

    from agentls.lsp.server import AgentlsLanguageServer
    from agentls.lsp.state import ServerState

log = logging.getLogger("agentls.lsp.suggestions.next_edit")

METHOD = "textDocument/copilotInlineEdit"
DID_FOCUS = "textDocument/didFocus"
ACCEPT_COMMAND = "agentls.nextEditAccepted"
FEATURE_NAME = "next-edit"


def document_key(uri: str) -> str:
    """One spelling per document (clients and the server quote URIs differently)."""
    return unquote(uri)


class _NextEditEndpoint:
    def __init__(self) -> None:
        self.texts: dict[str, str] = {}  # the text each open document had last
        self.served = ServedIds(prefix="ne-")


def register(server: AgentlsLanguageServer) -> None:
    endpoint = _NextEditEndpoint()

    # pygls applies the change to its document first, then calls these.
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: AgentlsLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
        key = document_key(params.text_document.uri)
        document = ls.workspace.text_documents.get(key)
        if document is not None:
            endpoint.texts[key] = document.source
        inline.prepare_soon(ls)  # the first keystroke here should find the model ready

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: AgentlsLanguageServer,
                   params: types.DidChangeTextDocumentParams) -> None:
        key = document_key(params.text_document.uri)
        document = ls.workspace.text_documents.get(key)
        if document is None:
            return
        after = document.source
        before = endpoint.texts.get(key)
        endpoint.texts[key] = after
        if before is None:
            return
        try:
            changes = list(_changes(before, params.content_changes, position_encoding(ls)))
        except ValueError as exc:  # a change out of step with the text: skip it
            log.debug("Edit not recorded: %s", exc)
            return
        history(ls.state).record(key, before, changes)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: AgentlsLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
        key = document_key(params.text_document.uri)
        endpoint.texts.pop(key, None)
        history(ls.state).forget(key)

    @server.feature(DID_FOCUS)
    def did_focus(ls: AgentlsLanguageServer, params: Any) -> None:
        # Copilot's clients (sidekick.nvim) send it on BufEnter; nothing to do.
        log.debug("didFocus %s", to_plain(params))

    @server.feature(METHOD)
    async def copilot_inline_edit(ls: AgentlsLanguageServer, params: Any) -> dict[str, Any]:
        from agentls.core.editor.next_edit import NextEditRequest, NextEditSuggester

        uri, version, line, character = _parse_params(to_plain(params))
        if not ls.settings_ready.is_set():
            await ls.wait_settings()
        state = ls.state
        feature = state.host.feature(FEATURE_NAME, NextEditSuggester)
        if feature is None:
            return {"edits": []}
        key = document_key(uri)
        document = ls.workspace.text_documents.get(key)
        if document is None or (version is not None and version != document.version):
            return {"edits": []}  # unknown document, or the client is ahead/behind
        text = document.source
        encoding = position_encoding(ls)

        try:
            offset = offset_at(text, line, character, encoding)
        except PositionOutOfRange as exc:
            raise JsonRpcInvalidParams(f"{METHOD}: {exc}") from None
        settings = state.host.settings
        request = NextEditRequest(
            uri=key, language_id=document.language_id or "", text=text, offset=offset,
            version=document.version, history=history(state).recent(),
            document_text=lambda other: _text_of(ls, other))
        model = settings.next_edit.model or settings.inline_completion.model
        try:
            answer = await feature.suggest(request, state.host.provider, settings.next_edit, model)
        except Exception:  # a bug must cost one suggestion, not the editor's patience
            log.exception("Next edit suggestion failed unexpectedly")
            return {"edits": []}
        if answer.notice is not None and state.first_time(answer.notice.key):
            ls.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Warning, message=answer.notice.message))
        current = ls.workspace.text_documents.get(key)
        if not answer.edits or current is None or current.version != document.version:
            if answer.why_none:
                log.debug("No next edit: %s", answer.why_none)
            return {"edits": []}
        state.next_edit_counters.served += 1

        def at(offset: int) -> dict[str, int]:
            line_no, char = position_at(text, offset, encoding)
            return {"line": line_no, "character": char}

        edits = []
        for edit in answer.edits:
            edit_id = endpoint.served.new()
            edits.append({
                "range": {"start": at(edit.start), "end": at(edit.end)},
                "text": edit.text,
                "textDocument": {"uri": uri, "version": document.version},
                "command": {"title": "Accept next edit", "command": ACCEPT_COMMAND,
                            "arguments": [edit_id]},
            })
        return {"edits": edits}

    @server.command(ACCEPT_COMMAND)
    def next_edit_accepted(ls: Any, *arguments: Any) -> None:
        if not arguments or not isinstance(arguments[0], str | int):
            raise JsonRpcInvalidParams(
                f"{ACCEPT_COMMAND} takes one argument, the edit id from the edit's command")
        if endpoint.served.accept(str(arguments[0])):  # counted once per served edit
            ls.state.next_edit_counters.accepted += 1


def history(state: ServerState) -> EditHistory:
    return state.edit_history


def _parse_params(params: Any) -> tuple[str, int | None, int, int]:
    """(uri, version or None, line, character), or -32602 saying what is wrong."""
    if not isinstance(params, dict):
        raise JsonRpcInvalidParams(f"{METHOD} takes {{textDocument: {{uri, version}}, "
                                   "position: {line, character}}")
    document = params.get("textDocument")
    position = params.get("position")
    if not isinstance(document, dict) or not isinstance(document.get("uri"), str):
        raise JsonRpcInvalidParams(f"{METHOD}: textDocument.uri (a string) is required")
    if not isinstance(position, dict):
        raise JsonRpcInvalidParams(f"{METHOD}: position {{line, character}} is required")
    line, character = position.get("line"), position.get("character")
    if not (_natural(line) and _natural(character)):
        raise JsonRpcInvalidParams(
            f"{METHOD}: position.line and position.character must be integers >= 0")
    version = document.get("version")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise JsonRpcInvalidParams(f"{METHOD}: textDocument.version must be an integer")
    return document["uri"], version, int(line), int(character)  # type: ignore[arg-type]


def _natural(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _text_of(ls: AgentlsLanguageServer, uri: str) -> str | None:
    document = ls.workspace.text_documents.get(uri)
    return document.source if document is not None else None


def _changes(before: str, content_changes: Any, encoding: str) -> Iterator[TextChange]:
    """The didChange content changes as code-point TextChanges, each in the
    text the previous ones produced."""

    text = before
    count = len(content_changes)
    for index, change in enumerate(content_changes):
        new = change.text
        change_range = getattr(change, "range", None)
        if change_range is None:  # the whole document: keep only what differs
            item = TextChange.between(text, new)
        else:
            start_at, end_at = change_range.start, change_range.end
            start = offset_at(text, start_at.line, start_at.character, encoding)
            if end_at.line == start_at.line and end_at.character == start_at.character:
                end = start  # typing: one lookup, not two
            else:
                end = offset_at(text, end_at.line, end_at.character, encoding)
            item = TextChange(start, end, new)
            if item.end < item.start:
                raise ValueError("a change range ends before it starts")
        yield item
        if index < count - 1:
            text = text[: item.start] + item.text + text[item.end :]
