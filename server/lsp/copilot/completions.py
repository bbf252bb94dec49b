"""The Copilot dialect's completion methods (docs/copilot-plugins.md):
getCompletions and getCompletionsCycling (`{completions: [{uuid, text,
displayText, range, position, docVersion}]}`), getPanelCompletions
(`{solutionCountTarget}`, then one PanelSolution notification per solution
and PanelSolutionsDone), and notifyShown / notifyAccepted / notifyRejected.

Every one of them asks the same inline-completion path as
textDocument/inlineCompletion (`inline.suggest`: one cache, supersede per
document, post-processing), and the uuids are that path's served ids, so a
notifyAccepted counts in agentls/status like the accept command does.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from pygls.exceptions import JsonRpcInvalidParams

from agentls.core.editor.positions import code_units
from agentls.lsp.copilot.dialect import require
from agentls.lsp.suggestions import inline
from agentls.lsp.wire.convert import position_encoding, to_plain

if TYPE_CHECKING:
    from agentls.lsp.server import AgentlsLanguageServer

log = logging.getLogger("agentls.lsp.copilot.completions")


def _params(params: Any, method: str) -> dict[str, Any]:
    plain = to_plain(params)
    if not isinstance(plain, dict):
        raise JsonRpcInvalidParams(f"{method}: params must be an object.")
    return plain


def _object(params: dict[str, Any], key: str, method: str) -> dict[str, Any]:
    value = params.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise JsonRpcInvalidParams(f"{method}: `{key}` must be an object.")
    return value


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _place(params: dict[str, Any], method: str) -> tuple[str, int, int]:
    """The document and cursor of a completion request: `textDocument` and
    `position`, or the older plugins' `doc` holding both."""
    doc = _object(params, "doc", method)
    document = _object(params, "textDocument", method)
    uri = document.get("uri", doc.get("uri"))
    if not isinstance(uri, str) or not uri:
        raise JsonRpcInvalidParams(f"{method} needs `textDocument.uri` (or `doc.uri`), the "
                                   "document's URI as a string.")
    position = params.get("position", doc.get("position"))
    if (not isinstance(position, dict) or not _count(position.get("line"))
            or not _count(position.get("character"))):
        raise JsonRpcInvalidParams(f"{method} needs `position` (or `doc.position`): "
                                   "{line, character}, integers >= 0.")
    return uri, position["line"], position["character"]


def _uuid(params: dict[str, Any], method: str) -> str:
    uuid = params.get("uuid")
    if not isinstance(uuid, str) or not uuid:
        raise JsonRpcInvalidParams(f"{method} needs `uuid`, the completion's uuid (a string).")
    return uuid


def _at(line: int, character: int) -> dict[str, int]:
    return {"line": line, "character": character}


async def _completions(ls: AgentlsLanguageServer, params: Any, method: str, *,
                       invoked: bool) -> dict[str, Any]:
    require(ls, method)
    uri, line, character = _place(_params(params, method), method)
    found = await inline.suggest(ls, uri, line, character, invoked=invoked, method=method)
    # As GitHub's server answers: `text` is the cursor's whole line with the
    # completion in it, `range` that line (copilot.vim shows nothing for a
    # range not starting at column 0), `displayText` what follows the cursor.
    whole_line = {"start": _at(line, 0),
                  "end": _at(line, character + code_units(found.after, position_encoding(ls)))}
    return {"completions": [
        {"uuid": served_id, "text": found.before + text + found.after,
         "displayText": text + found.after, "range": whole_line,
         "position": _at(line, character), "docVersion": found.version}
        for served_id, text in found.items
    ]}


def register(server: AgentlsLanguageServer) -> None:
    @server.feature("getCompletions")
    async def get_completions(ls: AgentlsLanguageServer, params: Any = None) -> dict[str, Any]:
        return await _completions(ls, params, "getCompletions", invoked=False)

    @server.feature("getCompletionsCycling")
    async def get_completions_cycling(ls: AgentlsLanguageServer,
                                      params: Any = None) -> dict[str, Any]:
        # Asked for when the user cycles: an explicit request.
        return await _completions(ls, params, "getCompletionsCycling", invoked=True)

    @server.feature("getPanelCompletions")
    async def get_panel_completions(ls: AgentlsLanguageServer,
                                    params: Any = None) -> dict[str, Any]:
        method = "getPanelCompletions"
        require(ls, method)
        plain = _params(params, method)
        uri, line, character = _place(plain, method)
        panel_id = plain.get("panelId")
        if not isinstance(panel_id, str) or not panel_id:
            raise JsonRpcInvalidParams(f"{method} needs `panelId`, a string the PanelSolution "
                                       "notifications will carry.")
        found = await inline.suggest(ls, uri, line, character, invoked=True, method=method)
        at = _at(line, character)
        solutions = [
            {"panelId": panel_id, "solutionId": served_id, "completionText": text,
             "displayText": text, "range": {"start": at, "end": at},
             "score": 1.0 / (rank + 1)}
            for rank, (served_id, text) in enumerate(found.items)
        ]

        def send(_: Any = None) -> None:
            for solution in solutions:
                ls.protocol.notify("PanelSolution", solution)
            ls.protocol.notify("PanelSolutionsDone", {"panelId": panel_id, "status": "OK"})

        # After the answer, as GitHub's server does: the answer is written by
        # the task's first done callback, this one runs after it.
        task = asyncio.current_task()
        if task is None:
            send()
        else:
            task.add_done_callback(send)
        return {"solutionCountTarget": len(solutions)}

    @server.feature("notifyShown")
    def notify_shown(ls: AgentlsLanguageServer, params: Any = None) -> None:
        require(ls, "notifyShown")
        uuid = _uuid(_params(params, "notifyShown"), "notifyShown")
        if ls.state.inline_served.mark(uuid, "shown"):
            ls.state.counters.shown += 1

    @server.feature("notifyAccepted")
    def notify_accepted(ls: AgentlsLanguageServer, params: Any = None) -> None:
        require(ls, "notifyAccepted")
        plain = _params(params, "notifyAccepted")
        uuid = _uuid(plain, "notifyAccepted")
        length = plain.get("acceptedLength")
        if length is not None and not _count(length):
            raise JsonRpcInvalidParams("notifyAccepted: `acceptedLength` must be an integer "
                                       ">= 0 (UTF-16 code units accepted).")
        inline.accepted(ls, uuid)

    @server.feature("notifyRejected")
    def notify_rejected(ls: AgentlsLanguageServer, params: Any = None) -> None:
        require(ls, "notifyRejected")
        uuids = _params(params, "notifyRejected").get("uuids")
        if not isinstance(uuids, list) or not all(isinstance(u, str) for u in uuids):
            raise JsonRpcInvalidParams("notifyRejected needs `uuids`, a list of the shown "
                                       "completions' uuids (strings).")
        log.debug("Rejected: %s", uuids)
