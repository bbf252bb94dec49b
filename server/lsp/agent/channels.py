"""The core's approval, display and turn-observer interfaces over LSP.

- LspApprovalChannel: renders the core ApprovalGate's question as
  `window/showMessageRequest` (the options' labels as actions) and returns
  the chosen option's id; None when dismissed. A title that is not one of
  the labels offered comes back as an id no option has (the gate denies).
- send_request: a server -> client request that tells the client
  ($/cancelRequest) when the server stops waiting (timeout, cancelled turn),
  so a late answer is ignored rather than acted on.
- LspDisplayChannel: `window/showMessage`, type by level.
- LspDocumentOpener: `window/showDocument` (when the client supports it)
  for a question too long for a message, written whole by the host's gate
  (agentls.host; core/approval/documents.py).
- LspTurnObserver: one per `agentls/chat` request; streams
  `agentls/messageDelta` and `agentls/message` notifications and, when the
  request carried a workDoneToken, `$/progress` begin/report/end.
- open_document_lookup: the open buffer's text by path, for tools.

lsp/agent/chat.py lends these (with lsp/agent/edits.py's edit applier and document
lookup) to the host (AgentHost.connect), which makes them the core's EditorChannels
(core/agent/bundle.py), the editor's side of every agent bundle.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from agentls.core.agent.observer import TurnObserver
from agentls.core.approval.gate import ApprovalRequest, MessageLevel

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

    from agentls.core.types.conversation import Message

__all__ = [
    "MESSAGE",
    "MESSAGE_DELTA",
    "LspApprovalChannel",
    "LspDisplayChannel",
    "LspDocumentOpener",
    "LspTurnObserver",
    "open_document_lookup",
    "send_request",
]

log = logging.getLogger("agentls.lsp.agent.channels")

MESSAGE_DELTA = "agentls/messageDelta"
MESSAGE = "agentls/message"

_LEVELS = {
    "info": types.MessageType.Info,
    "warning": types.MessageType.Warning,
    "error": types.MessageType.Error,
}


class LspApprovalChannel:
    def __init__(self, ls: LanguageServer) -> None:
        self.ls = ls

    async def request_approval(self, request: ApprovalRequest) -> str | None:
        params = types.ShowMessageRequestParams(
            type=types.MessageType.Warning,
            message=request.prompt,
            actions=[types.MessageActionItem(title=option.label) for option in request.options],
        )
        chosen = await send_request(self.ls, types.WINDOW_SHOW_MESSAGE_REQUEST, params)
        title = getattr(chosen, "title", None)
        if title is None:
            return None
        option = next((o for o in request.options if o.label == str(title)), None)
        return option.id if option is not None else _UNOFFERED


# An answer that names no offered action: the gate treats it as Deny.
_UNOFFERED = "\0unoffered"


async def send_request(ls: Any, method: str, params: Any, seconds: float | None = None) -> Any:
    """A server -> client request, bounded by `seconds` when given. On
    timeout or cancellation the client is told ($/cancelRequest) and a late
    answer is dropped."""
    protocol = ls.protocol
    msg_id = f"agentls-{uuid.uuid4().hex}"
    future = protocol.send_request_async(method, params, msg_id=msg_id)
    try:
        return await asyncio.wait_for(future, seconds)
    except (TimeoutError, asyncio.CancelledError):
        pending = getattr(protocol, "_request_futures", None)
        if isinstance(pending, dict):
            pending.pop(msg_id, None)
        try:
            protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
        except Exception:
            log.debug("Could not send $/cancelRequest for %s", msg_id)
        raise


class LspDisplayChannel:
    def __init__(self, ls: LanguageServer) -> None:
        self.ls = ls

    async def show_message(self, message: str, level: MessageLevel = "info") -> None:
        self.ls.window_show_message(
            types.ShowMessageParams(type=_LEVELS.get(level, types.MessageType.Info),
                                    message=message)
        )


SHOW_DOCUMENT_SECONDS = 10.0


class LspDocumentOpener:
    """window/showDocument, when the client said it supports it (a
    question's whole text, core/approval/documents.py)."""

    def __init__(self, ls: Any) -> None:
        self.ls = ls

    async def show_document(self, path: Path) -> bool:
        window = getattr(self.ls.client_capabilities, "window", None)
        support = getattr(getattr(window, "show_document", None), "support", False)
        if not support:
            return False
        params = types.ShowDocumentParams(uri=path.as_uri(), external=False, take_focus=True)
        result = await send_request(self.ls, types.WINDOW_SHOW_DOCUMENT, params,
                                    SHOW_DOCUMENT_SECONDS)
        return bool(getattr(result, "success", False))


class LspTurnObserver(TurnObserver):
    """Notifications for one turn. Progress needs `begin()` before and
    `end()` after the turn; both are no-ops without a workDoneToken."""

    def __init__(self, ls: LanguageServer, work_done_token: str | int | None = None) -> None:
        self.ls = ls
        self.token = work_done_token
        self._begun = False

    async def on_delta(self, session_id: str, index: int, delta: str, kind: str) -> None:
        self.ls.protocol.notify(
            MESSAGE_DELTA, {"sessionId": session_id, "index": index, "delta": delta, "kind": kind}
        )

    async def on_message(self, session_id: str, index: int, message: Message) -> None:
        if (message.metadata or {}).get("suppress_output"):
            return  # a hook asked to keep its output out of the user's transcript
        self.ls.protocol.notify(
            MESSAGE, {"sessionId": session_id, "index": index, "message": message.to_dict()}
        )

    async def on_progress(self, session_id: str, text: str) -> None:
        if self.token is None or not self._begun:
            return
        self.ls.work_done_progress.report(
            self.token, types.WorkDoneProgressReport(message=text)
        )

    def begin(self, title: str = "agentls") -> None:
        if self.token is None or self._begun:
            return
        self._begun = True
        self.ls.work_done_progress.begin(
            self.token, types.WorkDoneProgressBegin(title=title, cancellable=False)
        )

    def end(self, message: str) -> None:
        if self.token is None or not self._begun:
            return
        self._begun = False
        self.ls.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=message))
        # pygls keeps a future per client token it has seen; drop ours.
        self.ls.work_done_progress.tokens.pop(self.token, None)


def open_document_lookup(ls: LanguageServer) -> Callable[[Path], str | None]:
    """path -> the text of the open document with that path, or None.

    Compares resolved paths, so a buffer opened through a symlink or with a
    differently spelled path is still found (resolved paths are cached per
    URI: search_text asks once per file). Safe enough for the tools' worker
    thread: it only reads a snapshot of pygls' document table."""
    resolved_by_uri: dict[str, Path | None] = {}

    def lookup(path: Path) -> str | None:
        from pygls.uris import to_fs_path

        target = _resolved(path)
        if target is None:
            return None
        documents: list[Any] = list(ls.workspace.text_documents.values())
        if len(resolved_by_uri) > 2 * len(documents) + 64:  # forget closed documents
            resolved_by_uri.clear()
        for document in documents:
            uri = document.uri
            if uri not in resolved_by_uri:
                fs_path = to_fs_path(uri)
                resolved_by_uri[uri] = _resolved(Path(fs_path)) if fs_path else None
            if resolved_by_uri[uri] == target:
                return str(document.source)
        return None

    return lookup


def _resolved(path: Path) -> Path | None:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return None
