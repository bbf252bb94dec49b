"""Model calls for a document that outlive the request that started them,
while what the user types is what they are producing.

Every model call for inline completion runs as a flight: a task of its own
that the request awaits (shielded). A newer request for the document whose
text is the flight's with the typed characters inserted at its cursor, and
whose typed characters agree with what the flight has streamed so far, waits
for the flight instead of cancelling it and asking again (as Continue's
generator reuse does); the flight's answer lands in the type-ahead cache,
which then answers the newer request. Any other request for the document
cancels the flight: the engine then works on what the user typed (the local
child stops a cancelled request within a prompt batch,
providers/local/engine_work.py). A flight whose request went away and that
nobody adopts within `ORPHAN_SECONDS` is cancelled too.

A flight can also be started by no request: the completion after an
answered suggestion, asked ahead (llama.vim's speculative FIM;
`inlineCompletion.speculative`), which the request after an accept, or one
typing into the suggestion, adopts the same way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

__all__ = ["ORPHAN_SECONDS", "Flight", "Flights", "accepted"]

log = logging.getLogger("agentls.features.inline_completion")

# Editors cancel the old request just before they send the new one (VS Code
# sends $/cancelRequest, then the next keystroke's request): the flight
# waits this long for it.
ORPHAN_SECONDS = 0.25


def accepted(text: str, offset: int, completion: str) -> tuple[str, int]:
    """The document and cursor once `completion` is accepted at `offset`."""
    return text[:offset] + completion + text[offset:], offset + len(completion)


@dataclass(eq=False, slots=True)
class Flight:
    text: str
    offset: int
    task: asyncio.Task[str]
    streamed: list[str] = field(default_factory=list)  # the model's text so far, in pieces
    waiting: int = 0  # requests awaiting it now
    orphaned: asyncio.TimerHandle | None = None

    def typed_since(self, text: str, offset: int) -> str | None:
        """What was typed at the flight's cursor to make `text` (cursor at
        `offset`), if that is all that changed."""
        typed = len(text) - len(self.text)
        if typed < 0 or offset != self.offset + typed:
            return None
        if not (text.startswith(self.text[:self.offset])
                and text.endswith(self.text[self.offset:])):
            return None
        return text[self.offset:offset]


class Flights:
    def __init__(self) -> None:
        self._running: dict[str, Flight] = {}
        self.adopted = 0  # requests answered by waiting for a flight

    def start(self, uri: str, text: str, offset: int,
              ask: Callable[[list[str]], Awaitable[str]], *, ahead: bool = False) -> Flight:
        """Run `ask(streamed)` (it stores its answer in the cache, and appends
        the model's text to `streamed` as it comes) as the document's flight,
        replacing an earlier one."""
        self.cancel(uri)
        streamed: list[str] = []

        async def run() -> str:
            try:
                return await ask(streamed)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not ahead:
                    raise  # the request that waits reports it
                log.debug("Inline completion ahead failed: %s", exc)  # nobody asked
                return ""

        task = asyncio.get_running_loop().create_task(run())
        flight = Flight(text, offset, task, streamed)
        self._running[uri] = flight
        task.add_done_callback(lambda _: self._ended(uri, flight))
        return flight

    def flying(self, uri: str) -> bool:
        """A model call for `uri` runs (the user is typing there)."""
        return uri in self._running

    def matching(self, uri: str, text: str, offset: int) -> Flight | None:
        """The running flight this request can wait for: the document is the
        flight's with only the typed characters added at its cursor, and they
        agree with what it has streamed so far."""
        flight = self._running.get(uri)
        if flight is None or flight.task.done():
            return None
        typed = flight.typed_since(text, offset)
        if typed is None:
            return None
        if typed:
            streamed = "".join(flight.streamed)
            if not streamed or not (streamed.startswith(typed) or typed.startswith(streamed)):
                return None
        return flight

    async def wait(self, flight: Flight, adopted: bool = True) -> str:
        """The flight's answer. A cancel of the waiter (a newer request, or
        the client's) leaves the flight to the next request that matches it,
        for `ORPHAN_SECONDS`."""
        self.adopted += adopted
        flight.waiting += 1
        if flight.orphaned is not None:
            flight.orphaned.cancel()
            flight.orphaned = None
        try:
            return await asyncio.shield(flight.task)
        finally:
            flight.waiting -= 1
            if not flight.waiting and not flight.task.done():
                flight.orphaned = asyncio.get_running_loop().call_later(
                    ORPHAN_SECONDS, self._cancel_flight, flight)

    def cancel(self, uri: str) -> None:
        flight = self._running.get(uri)
        if flight is not None:
            self._cancel_flight(flight)

    def _cancel_flight(self, flight: Flight) -> None:
        if not flight.task.done():
            flight.task.cancel()

    def _ended(self, uri: str, flight: Flight) -> None:
        if not flight.task.cancelled():
            flight.task.exception()  # retrieved: a waiter, if any, reports it
        if flight.orphaned is not None:
            flight.orphaned.cancel()
        if self._running.get(uri) is flight:
            del self._running[uri]
