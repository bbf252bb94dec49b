"""Which request may wait for the document's model call in flight
(features/inline_completion/flights.py): pure logic; the real server over
LSP is tests/e2e/test_inline_flights.py."""

from __future__ import annotations

import asyncio

from agentls.features.inline_completion.flights import ORPHAN_SECONDS, Flights

DOC = "def area(r):\n    return \n"
AT = DOC.index("return ") + len("return ")


def typed(text: str) -> tuple[str, int]:
    return DOC[:AT] + text + DOC[AT:], AT + len(text)


async def streaming(flights: Flights, pieces: list[str]) -> asyncio.Event:
    """A flight that streams `pieces` and then waits until told to end."""
    release = asyncio.Event()

    async def ask(streamed: list[str]) -> str:
        streamed.extend(pieces)
        await release.wait()
        return "".join(pieces)

    flights.start("file:///a.py", DOC, AT, ask)
    await asyncio.sleep(0)
    return release


async def test_keys_that_agree_with_the_stream_may_wait_for_it() -> None:
    flights = Flights()
    release = await streaming(flights, ["3", ".14"])
    assert flights.matching("file:///a.py", *typed("")) is not None
    assert flights.matching("file:///a.py", *typed("3.")) is not None
    assert flights.matching("file:///a.py", *typed("3.14 * r")) is not None  # beyond it so far
    assert flights.matching("file:///a.py", *typed("r")) is None
    assert flights.matching("file:///b.py", *typed("3")) is None
    release.set()


async def test_a_key_elsewhere_or_a_backspace_does_not_match() -> None:
    flights = Flights()
    release = await streaming(flights, ["3"])
    elsewhere = "# 3\n" + DOC
    assert flights.matching("file:///a.py", elsewhere, AT + 4) is None
    assert flights.matching("file:///a.py", DOC[:AT - 1] + DOC[AT:], AT - 1) is None
    release.set()


async def test_nothing_streamed_yet_means_a_typed_key_asks_again() -> None:
    flights = Flights()
    release = await streaming(flights, [])
    assert flights.matching("file:///a.py", *typed("3")) is None
    assert flights.matching("file:///a.py", *typed("")) is not None  # the same place: wait
    release.set()


async def test_a_flight_its_waiter_left_is_cancelled_after_a_grace() -> None:
    flights = Flights()
    await streaming(flights, ["3"])
    (flight,) = flights._running.values()
    waiter = asyncio.create_task(flights.wait(flight, adopted=False))
    await asyncio.sleep(0)
    left = asyncio.get_running_loop().time()
    waiter.cancel()
    await asyncio.wait_for(asyncio.gather(flight.task, return_exceptions=True), ORPHAN_SECONDS * 4)
    assert flight.task.cancelled()
    assert asyncio.get_running_loop().time() - left >= ORPHAN_SECONDS * 0.9


async def test_a_flight_adopted_within_the_grace_runs_to_its_answer() -> None:
    flights = Flights()
    release = await streaming(flights, ["3"])
    (flight,) = flights._running.values()
    waiter = asyncio.create_task(flights.wait(flight, adopted=False))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.sleep(ORPHAN_SECONDS / 2)
    adopter = asyncio.create_task(flights.wait(flight))
    await asyncio.sleep(ORPHAN_SECONDS * 2)  # past the grace the first waiter left
    release.set()
    assert await adopter == "3"
    assert flights.adopted == 1
