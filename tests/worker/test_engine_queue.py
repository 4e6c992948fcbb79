"""The engine reads' queue: a little engine time in flight, callers served round robin."""

from __future__ import annotations

import asyncio

import pytest

from adapters.callers import Caller
from adapters.callers import Waiting
from adapters.errors import BackendUnavailable
from adapters.pool.engine_process import EngineQueue


async def read(
    queue: EngineQueue, caller: str, took_s: float, log: list[str], gate: asyncio.Event
) -> None:
    expected = await queue.turn(Caller(caller))
    log.append(caller)
    await gate.wait()
    queue.done(caller, expected, took_s)


async def most_in_flight(queue: EngineQueue, caller: str, took_s: float, reads: int) -> int:
    """Send `reads` reads of `caller` (1 ms each, reported as `took_s`) at once: the most
    that were in flight together."""
    most = 0

    async def one() -> None:
        nonlocal most
        expected = await queue.turn(Caller(caller))
        most = max(most, queue.in_flight)
        await asyncio.sleep(0.001)
        queue.done(caller, expected, took_s)

    await asyncio.gather(*(one() for _ in range(reads)))
    return most


async def test_a_caller_with_one_read_goes_before_a_flood() -> None:
    queue = EngineQueue(budget_s=0.004, most=8)
    order: list[str] = []
    gate = asyncio.Event()  # reads in flight answer once it is set
    first = await queue.turn(Caller("noisy"))  # the read in flight
    flood = [asyncio.create_task(read(queue, "noisy", 0.001, order, gate)) for _ in range(6)]
    await asyncio.sleep(0)
    quiet = asyncio.create_task(read(queue, "quiet", 0.001, order, gate))
    await asyncio.sleep(0)
    assert queue.waiting() == 4  # three of the flood fit beside the first read, not more
    queue.done("noisy", first, 0.001)
    await asyncio.sleep(0)
    assert order == ["noisy"] * 3 + ["quiet"]  # next, ahead of the flood's waiting reads
    gate.set()
    await asyncio.gather(*flood, quiet)
    assert order == ["noisy"] * 3 + ["quiet"] + ["noisy"] * 3
    assert queue.in_flight == 0


async def test_a_costly_caller_has_one_read_in_flight() -> None:
    queue = EngineQueue(budget_s=0.004, most=8)
    for _ in range(20):  # it learns what the caller's reads cost
        queue.done("big", await queue.turn(Caller("big")), 0.015)
    assert await most_in_flight(queue, "big", 0.015, reads=6) == 1
    small_first = await queue.turn(Caller("small"))  # a small read goes beside nothing costly
    small_second = await queue.turn(Caller("small"))  # and beside another small one
    assert queue.in_flight == 2
    queue.done("small", small_first, 0.001)
    queue.done("small", small_second, 0.001)


async def test_cheap_reads_go_several_at_a_time_up_to_most() -> None:
    queue = EngineQueue(budget_s=1.0, most=3)
    assert await most_in_flight(queue, "a", 0.0001, reads=10) == 3
    assert queue.in_flight == 0


async def test_a_read_given_up_while_waiting_takes_no_turn() -> None:
    queue = EngineQueue(budget_s=0.0, most=1)
    held = await queue.turn(Caller("a"))
    gave_up = asyncio.create_task(queue.turn(Caller("b")))
    waits = asyncio.create_task(queue.turn(Caller("c")))
    await asyncio.sleep(0)
    gave_up.cancel()
    queue.done("a", held, 0.001)
    await waits
    assert queue.in_flight == 1
    assert gave_up.cancelled()


async def test_a_lost_worker_fails_every_waiting_read() -> None:
    queue = EngineQueue(budget_s=0.0, most=1)
    held = await queue.turn(Caller("a"))
    waiting = asyncio.create_task(queue.turn(Caller("b")))
    await asyncio.sleep(0)
    queue.fail(BackendUnavailable("gone"))
    with pytest.raises(BackendUnavailable):
        await waiting
    queue.done("a", held, None)  # the read in flight answers (it failed too)
    assert queue.in_flight == 0
    assert queue.load_s == 0.0
    await queue.turn(Caller("c"))  # and the next goes at once


async def waited(queue: EngineQueue, caller: str) -> tuple[asyncio.Task[float], Waiting]:
    """A read of `caller` waiting for its turn, with its request's `Waiting`."""
    waiting = Waiting()
    task = asyncio.create_task(queue.turn(Caller(caller, waiting)))
    await asyncio.sleep(0)
    assert waiting.queue is queue
    return task, waiting


async def test_a_read_whose_turn_came_is_no_longer_waiting() -> None:
    queue = EngineQueue(budget_s=0.0, most=1)
    held = await queue.turn(Caller("a"))
    task, waiting = await waited(queue, "b")
    queue.done("a", held, 0.001)  # answered: the queue moves
    other = asyncio.create_task(queue.turn(Caller("c")))  # the turn went to b; c waits behind it
    await asyncio.sleep(0)
    assert waiting.queue is None  # b's turn came: it no longer waits
    queue.done("b", await task, 0.001)
    await other


async def test_a_read_cancelled_behind_an_answered_one_is_left_waiting() -> None:
    queue = EngineQueue(budget_s=1.0, most=2)
    first, second = await queue.turn(Caller("a")), await queue.turn(Caller("a"))
    queue.most = 1  # nothing more goes until both are answered
    task, waiting = await waited(queue, "b")
    queue.done("a", first, 0.001)
    task.cancel()  # its request ran out of time
    await asyncio.gather(task, return_exceptions=True)
    assert waiting.behind_others()
    queue.done("a", second, 0.001)


async def test_a_read_cancelled_while_the_engine_stands_still_was_not_behind_others() -> None:
    queue = EngineQueue(budget_s=0.0, most=1)
    held = await queue.turn(Caller("a"))  # never answered
    task, waiting = await waited(queue, "b")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert waiting.queue is queue
    assert not waiting.behind_others()
    queue.done("a", held, None)


async def test_a_read_failed_by_a_lost_worker_is_no_longer_waiting() -> None:
    queue = EngineQueue(budget_s=0.0, most=1)
    held = await queue.turn(Caller("a"))
    queue.done("a", held, 0.001)
    held = await queue.turn(Caller("a"))
    task, waiting = await waited(queue, "b")
    queue.fail(BackendUnavailable("gone"))
    with pytest.raises(BackendUnavailable):
        await task
    assert waiting.queue is None
    queue.done("a", held, None)
