"""Server-initiated work-done progress for long work (model downloads and
loads): the core's ProgressSink as `window/workDoneProgress/create` and
`$/progress` begin/report/end, cancellable through
`window/workDoneProgress/cancel`.

The `$/progress` values are sent as plain dicts so a report can carry the
byte counts (`doneBytes`, `totalBytes`) next to the standard `percentage`
and `message`; editors ignore fields they do not know. A client without
window.workDoneProgress gets the end (and any error) as showMessage.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentls.lsp.copilot import dialect

if TYPE_CHECKING:
    from agentls.core.provider.progress import ProgressTask
    from agentls.lsp.server import AgentlsLanguageServer

log = logging.getLogger("agentls.lsp.progress")

_TOKENS = itertools.count(1)


class LspProgressTask:
    def __init__(
        self, ls: AgentlsLanguageServer, title: str, message: str,
        on_cancel: Callable[[], None] | None,
    ) -> None:
        self.ls = ls
        self.token = f"agentls-progress-{next(_TOKENS)}"
        self.title = title
        self._on_cancel = on_cancel
        self._pending: dict[str, Any] | None = None  # last report before create answered
        self._ended: tuple[str, str | None] | None = None
        self._begun = False
        self._supported = _client_supports_progress(ls)
        dialect.tell_status(ls, "InProgress", f"{title}: {message}" if message else title)
        if self._supported:
            ls.in_background(self._create(message))

    async def _create(self, message: str) -> None:
        try:
            await asyncio.wait_for(self.ls.work_done_progress.create_async(self.token), 10)
        except Exception as exc:  # a client that refuses: fall back to messages
            log.info("window/workDoneProgress/create refused (%s)", exc)
            self._supported = False
            if self._ended is not None:
                self._show_end(*self._ended)
            return
        future = self.ls.work_done_progress.tokens.get(self.token)
        if future is not None and self._on_cancel is not None:
            on_cancel = self._on_cancel
            future.add_done_callback(lambda f: on_cancel() if f.cancelled() else None)
        value: dict[str, Any] = {"kind": "begin", "title": self.title,
                                 "cancellable": self._on_cancel is not None}
        if message:
            value["message"] = message
        self._send(value)
        self._begun = True
        if self._pending is not None:
            self._send(self._pending)
            self._pending = None
        if self._ended is not None:
            self._send_end(*self._ended)

    def report(
        self,
        *,
        message: str | None = None,
        percentage: int | None = None,
        done_bytes: int | None = None,
        total_bytes: int | None = None,
    ) -> None:
        if not self._supported or self._ended is not None:
            return
        value: dict[str, Any] = {"kind": "report"}
        if message is not None:
            value["message"] = message
        if percentage is not None:
            value["percentage"] = max(0, min(100, int(percentage)))
        if done_bytes is not None:
            value["doneBytes"] = done_bytes
        if total_bytes is not None:
            value["totalBytes"] = total_bytes
        if self._begun:
            self._send(value)
        else:
            self._pending = value

    def end(self, message: str = "", *, error: str | None = None) -> None:
        if self._ended is not None:
            return
        self._ended = (message, error)
        dialect.tell_status(self.ls, "Error" if error else "Normal",
                            error or (f"{self.title}: {message}" if message else ""))
        if not self._supported:
            self._show_end(message, error)
        elif self._begun:
            self._send_end(message, error)

    def _send_end(self, message: str, error: str | None) -> None:
        self._send({"kind": "end", "message": error or message})
        self.ls.work_done_progress.tokens.pop(self.token, None)
        if error:
            self._show_end(message, error)

    def _show_end(self, message: str, error: str | None) -> None:
        from lsprotocol import types

        kind = types.MessageType.Error if error else types.MessageType.Info
        text = error or (f"{self.title}: {message}" if message else self.title)
        self.ls.window_show_message(types.ShowMessageParams(type=kind, message=text))

    def _send(self, value: dict[str, Any]) -> None:
        from lsprotocol import types

        # pygls types $/progress; a plain-dict value passes through as LSPAny.
        self.ls.protocol.notify(types.PROGRESS, types.ProgressParams(token=self.token, value=value))


class LspProgressSink:
    def __init__(self, ls: AgentlsLanguageServer) -> None:
        self.ls = ls

    def begin(
        self, title: str, *, message: str = "", on_cancel: Callable[[], None] | None = None
    ) -> ProgressTask:
        return LspProgressTask(self.ls, title, message, on_cancel)


def _client_supports_progress(ls: AgentlsLanguageServer) -> bool:
    try:
        window = ls.client_capabilities.window
    except Exception:  # before initialize
        return False
    return bool(window is not None and window.work_done_progress)


def register(server: AgentlsLanguageServer) -> None:
    server.state.host.progress = LspProgressSink(server)
