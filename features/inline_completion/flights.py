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

A request the editor sent on its own (the user typing) need not wait for
the whole answer: once `inlineCompletion.showPartialAfterMs` has passed it
is answered with what the flight has streamed so far (Continue's "show
whatever we have"), and the flight runs on without a waiter, to its end,
so the rest lands in the cache for the keystrokes that follow.

A flight can also be started by no request: the completion after an
answered suggestion, asked ahead (llama.vim's speculative FIM;
`inlineCompletion.speculative`), which the request after an accept, or one
typing into the suggestion, adopts the same way.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

__all__ = ["ORPHAN_SECONDS", "Flight", "Flights", "Streamed", "accepted"]

log = logging.getLogger("agentls.features.inline_completion")

# Editors cancel the old request just before they send the new one (VS Code
# sends $/cancelRequest, then the next keystroke's request): the flight
# waits this long for it.
ORPHAN_SECONDS = 0.25


def accepted(text: str, offset: int, completion: str) -> tuple[str, int]:
    """The document and cursor once `completion` is accepted at `offset`."""
    return text[:offset] + completion + text[offset:], offset + len(completion)


class Streamed:
    """The model's text so far, in pieces, and a signal for each new piece."""

    __slots__ = ("_grew", "pieces")

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self._grew = asyncio.Event()

    def append(self, piece: str) -> None:
        self.pieces.append(piece)
        self._grew.set()

    def text(self) -> str:
        return "".join(self.pieces)

    def seen(self) -> str:
        """The text so far; `grown` then waits for the next piece."""
        self._grew.clear()
        return self.text()

    async def grown(self) -> None:
        await self._grew.wait()


@dataclass(eq=False, slots=True)
class Flight:
    text: str
    offset: int
    task: asyncio.Task[str]
    streamed: Streamed = field(default_factory=Streamed)
    # What the editor can show of a text streamed so far ("" for nothing yet);
    # None: the flight's answer is only ever shown whole.
    shown: Callable[[str], str] | None = None
    waiting: int = 0  # requests awaiting it now
    orphaned: asyncio.TimerHandle | None = None
    kept: bool = False  # shown in part: it runs to its end with nobody waiting

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
              ask: Callable[[Streamed], Awaitable[str]], *, ahead: bool = False,
              shown: Callable[[str], str] | None = None) -> Flight:
        """Run `ask(streamed)` (it stores its answer in the cache, and appends
        the model's text to `streamed` as it comes) as the document's flight,
        replacing an earlier one."""
        self.cancel(uri)
        streamed = Streamed()

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
        flight = Flight(text, offset, task, streamed, shown)
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
            streamed = flight.streamed.text()
            if not streamed or not (streamed.startswith(typed) or typed.startswith(streamed)):
                return None
        return flight

    async def wait(self, flight: Flight, adopted: bool = True) -> str:
        """The flight's answer. A cancel of the waiter (a newer request, or
        the client's) leaves the flight to the next request that matches it,
        for `ORPHAN_SECONDS`."""
        self._joined(flight, adopted)
        try:
            return await asyncio.shield(flight.task)
        finally:
            self._left(flight)

    async def wait_or_part(self, flight: Flight, deadline: float, typed: str = "",
                           adopted: bool = True) -> tuple[str, bool]:
        """The flight's answer, or, once the loop's clock passes `deadline`,
        the part of it streamed so far (less `typed`, what the user typed at
        the flight's cursor since) as soon as that part shows something:
        (text, True), and the flight then runs to its end with nobody
        waiting. A flight without `shown` is waited for whole."""
        if flight.shown is None or deadline == math.inf:
            return await self.wait(flight, adopted), False
        self._joined(flight, adopted)
        loop = asyncio.get_running_loop()
        grown: asyncio.Task[None] | None = None
        try:
            while not flight.task.done():
                timeout = deadline - loop.time()
                if timeout <= 0:
                    part = flight.shown(flight.streamed.seen())
                    if len(part) > len(typed) and part.startswith(typed):
                        flight.kept = True
                        return part[len(typed):], True
                    if grown is not None:
                        grown.cancel()
                    grown = loop.create_task(flight.streamed.grown())
                    await asyncio.wait((flight.task, grown), return_when=asyncio.FIRST_COMPLETED)
                else:
                    await asyncio.wait((flight.task,), timeout=timeout)
            return await flight.task, False
        finally:
            if grown is not None:
                grown.cancel()
            self._left(flight)

    def _joined(self, flight: Flight, adopted: bool) -> None:
        self.adopted += adopted
        flight.waiting += 1
        if flight.orphaned is not None:
            flight.orphaned.cancel()
            flight.orphaned = None

    def _left(self, flight: Flight) -> None:
        """A waiter left: a flight nobody waits for and nobody was shown is
        cancelled unless a newer request adopts it soon."""
        flight.waiting -= 1
        if not flight.waiting and not flight.task.done() and not flight.kept:
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
