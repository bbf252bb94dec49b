"""The completion after the shown one, computed before the user asks.

Once a suggestion is answered, the completion at the position after it (the
document as it will be once the user accepts it, or types it through) is
asked at once, in the background, as llama.vim's speculative FIM does; its
answer lands in the type-ahead cache. A request for exactly that document
and position while the work still runs waits for it instead of asking
again. Any other request for the document cancels it: the engine then works
on what the user typed (the local child stops a cancelled request within a
prompt batch, providers/local/engine_work.py).

At most one per document; `inlineCompletion.speculative`, off by default:
on the embedded engine (one llama.cpp context) the work ahead replaces the
prompt the next keystroke would have reused (bench/README.md, "Typing
replay", has both rows); a server with several slots (llama-server) keeps
both.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

__all__ = ["Ahead", "accepted"]

log = logging.getLogger("agentls.features.inline_completion")


def accepted(text: str, offset: int, completion: str) -> tuple[str, int]:
    """The document and cursor once `completion` is accepted at `offset`."""
    return text[:offset] + completion + text[offset:], offset + len(completion)


@dataclass(eq=False, slots=True)
class _Work:
    text: str
    offset: int
    task: asyncio.Task[str]


class Ahead:
    def __init__(self) -> None:
        self._running: dict[str, _Work] = {}
        self.started = 0
        self.used = 0  # requests answered by waiting for the work ahead
        self.cancelled = 0

    def start(self, uri: str, text: str, offset: int,
              ask: Callable[[], Awaitable[str]]) -> None:
        """Ask for the completion at `offset` of `text` in the background
        (`ask` stores its answer in the cache), replacing earlier work."""
        self.cancel(uri)

        async def run() -> str:
            try:
                return await ask()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the user asked nothing: nobody to tell
                log.debug("Inline completion ahead failed: %s", exc)
                return ""

        task = asyncio.get_running_loop().create_task(run())
        work = _Work(text, offset, task)
        self._running[uri] = work
        self.started += 1
        task.add_done_callback(lambda _: self._running.pop(uri, None)
                               if self._running.get(uri) is work else None)

    def matching(self, uri: str, text: str, offset: int) -> asyncio.Task[str] | None:
        """The running work for exactly this document and cursor, if any."""
        work = self._running.get(uri)
        if work is None or work.task.done() or work.offset != offset or work.text != text:
            return None
        return work.task

    async def wait(self, task: asyncio.Task[str]) -> str:
        """The answer of the work ahead; a cancel of the waiter (a newer
        request) leaves the work to the next one that matches or cancels it."""
        self.used += 1
        return await asyncio.shield(task)

    def cancel(self, uri: str) -> None:
        work = self._running.pop(uri, None)
        if work is not None and not work.task.done():
            work.task.cancel()
            self.cancelled += 1
