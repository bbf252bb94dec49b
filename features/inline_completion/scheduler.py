"""One inline completion at a time per document.

A newer request for a document supersedes the older one: the older
request's task is cancelled (so its provider call, which that task awaits,
closes its HTTP stream) and the older request answers "no items" at once.
Automatic triggers wait a short debounce first, so a burst of keystrokes
costs one model call; an explicitly invoked request does not wait.

Cancellation from the outside (the client's `$/cancelRequest`, which pygls
turns into cancelling the same task) must still propagate, so the request
can answer RequestCancelled. asyncio counts cancel requests per task, which
tells the two apart: `absorb` undoes only the cancel this module made.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

__all__ = ["LatestPerDocument", "Ticket"]


@dataclass(eq=False, slots=True)
class Ticket:
    key: str
    task: asyncio.Task[object] | None
    superseded: bool = False
    cancelled: bool = False  # this module cancelled the task
    absorbed: bool = field(default=False)


class LatestPerDocument:
    def __init__(self) -> None:
        self._current: dict[str, Ticket] = {}
        self.superseded = 0  # how many requests a newer one replaced

    def begin(self, key: str) -> Ticket:
        """Register the running task as the newest request for `key`,
        superseding (cancelling) the one before it."""
        ticket = Ticket(key, asyncio.current_task())
        older = self._current.get(key)
        self._current[key] = ticket
        if older is not None and not older.superseded:
            older.superseded = True
            if older.task is not None and not older.task.done():
                self.superseded += 1
                # A task the client's $/cancelRequest already cancels is not
                # cancelled twice: a second cancellation interrupts httpcore's
                # close of the stream, the connection stays open, and a local
                # engine goes on generating for nobody.
                if not older.task.cancelling():
                    older.task.cancel()
                    older.cancelled = True
        return ticket

    def is_current(self, ticket: Ticket) -> bool:
        return self._current.get(ticket.key) is ticket

    def finish(self, ticket: Ticket) -> None:
        if self._current.get(ticket.key) is ticket:
            del self._current[ticket.key]

    def absorb(self, ticket: Ticket) -> bool:
        """Called while handling CancelledError in the ticket's task: True
        when that cancellation came only from a newer request (it is undone,
        and the caller answers "no items"); False when something else also
        cancelled the task (the caller must re-raise)."""
        if not ticket.cancelled or ticket.absorbed or ticket.task is None:
            return False
        ticket.absorbed = True
        return ticket.task.uncancel() == 0

    async def debounce(self, seconds: float) -> None:
        """Wait out a burst of automatic triggers (a newer request cancels
        this wait through `begin`)."""
        if seconds > 0:
            await asyncio.sleep(seconds)
