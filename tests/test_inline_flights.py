"""Which request may wait for the document's model call in flight
(features/inline_completion/flights.py): pure logic; the real server over
LSP is tests/e2e/test_inline_flights.py."""

from __future__ import annotations

import asyncio

from agentls.features.inline_completion.flights import ORPHAN_SECONDS, Flights, Streamed

DOC = "def area(r):\n    return \n"
AT = DOC.index("return ") + len("return ")


def typed(text: str) -> tuple[str, int]:
    return DOC[:AT] + text + DOC[AT:], AT + len(text)


async def streaming(flights: Flights, pieces: list[str]) -> asyncio.Event:
    """A flight that streams `pieces` and then waits until told to end."""
    release = asyncio.Event()

    async def ask(streamed: Streamed) -> str:
        for piece in pieces:
            streamed.append(piece)
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


def shown_as_is(text: str) -> str:
    return text.strip() and text


async def flight_of(flights: Flights, pieces: list[str], more: asyncio.Event | None = None,
                    later: list[str] | None = None) -> tuple[asyncio.Event, object]:
    """A flight that streams `pieces`, then `later` once `more` is set, then
    waits to be released; its answer is everything it streamed."""
    release = asyncio.Event()

    async def ask(streamed: Streamed) -> str:
        for piece in pieces:
            streamed.append(piece)
        if more is not None:
            await more.wait()
            for piece in later or ():
                streamed.append(piece)
        await release.wait()
        return streamed.text()

    flight = flights.start("file:///a.py", DOC, AT, ask, shown=shown_as_is)
    await asyncio.sleep(0)
    return release, flight


async def test_a_flight_that_ends_before_the_deadline_is_answered_whole() -> None:
    flights = Flights()
    release, flight = await flight_of(flights, ["3", ".14"])
    loop = asyncio.get_running_loop()
    waiter = asyncio.create_task(flights.wait_or_part(flight, loop.time() + 60, adopted=False))
    release.set()
    assert await asyncio.wait_for(waiter, 5) == ("3.14", False)


async def test_past_the_deadline_the_part_streamed_is_the_answer_and_the_flight_runs_on() -> None:
    flights = Flights()
    release, flight = await flight_of(flights, ["3", ".1"])
    loop = asyncio.get_running_loop()
    part = await asyncio.wait_for(flights.wait_or_part(flight, loop.time() + 0.05,
                                                       adopted=False), 5)
    assert part == ("3.1", True)
    assert flight.kept and flight.orphaned is None  # nobody waits, and it is not cancelled
    assert flights.matching("file:///a.py", *typed("3.")) is flight  # the next keys adopt it
    release.set()
    assert await asyncio.wait_for(flight.task, 5) == "3.1"


async def test_past_the_deadline_with_nothing_shown_yet_the_first_piece_answers() -> None:
    flights = Flights()
    more = asyncio.Event()
    release, flight = await flight_of(flights, [" "], more, ["3.14"])
    loop = asyncio.get_running_loop()
    waiter = asyncio.create_task(flights.wait_or_part(flight, loop.time(), adopted=False))
    for _ in range(5):  # the waiter sees the blank part ...
        await asyncio.sleep(0)
    more.set()
    # ... and answers with the first part that shows something, not the blank
    assert await asyncio.wait_for(waiter, 5) == (" 3.14", True)
    release.set()


async def test_a_request_that_typed_into_the_flight_is_shown_the_rest_of_its_part() -> None:
    flights = Flights()
    release, flight = await flight_of(flights, ["3", ".14", " *"])
    loop = asyncio.get_running_loop()
    answer = await asyncio.wait_for(flights.wait_or_part(flight, loop.time(), typed="3."), 5)
    assert answer == ("14 *", True)
    release.set()


async def test_a_part_no_longer_than_what_was_typed_waits_for_the_answer() -> None:
    flights = Flights()
    release, flight = await flight_of(flights, ["3."])
    loop = asyncio.get_running_loop()
    waiter = asyncio.create_task(flights.wait_or_part(flight, loop.time(), typed="3."))
    for _ in range(5):  # the waiter sees "3." streamed, all of it typed already
        await asyncio.sleep(0)
    release.set()
    assert await asyncio.wait_for(waiter, 5) == ("3.", False)  # the whole answer, not a part
