"""The engine reads' queue: at most `window` in flight, callers served round robin."""

from __future__ import annotations

import asyncio

import pytest

from adapters.errors import BackendUnavailable
from adapters.qdrant.edge.engine_queue import EngineQueue


async def test_a_caller_with_one_read_goes_before_a_flood() -> None:
    queue = EngineQueue(window=1)
    order: list[str] = []

    async def read(caller: str, n: int) -> None:
        await queue.turn(caller)
        order.append(f"{caller}{n}")
        await asyncio.sleep(0)
        queue.done()

    await queue.turn("noisy")  # the read in flight
    flood = [asyncio.create_task(read("noisy", n)) for n in range(5)]
    await asyncio.sleep(0)
    quiet = asyncio.create_task(read("quiet", 0))
    await asyncio.sleep(0)
    assert queue.waiting() == 6
    queue.done()
    await asyncio.gather(*flood, quiet)
    assert order == ["noisy0", "quiet0", "noisy1", "noisy2", "noisy3", "noisy4"]
    assert queue.in_flight == 0


async def test_the_window_bounds_reads_in_flight() -> None:
    queue = EngineQueue(window=2)
    most = 0

    async def read() -> None:
        nonlocal most
        await queue.turn("a")
        most = max(most, queue.in_flight)
        await asyncio.sleep(0.001)
        queue.done()

    await asyncio.gather(*(read() for _ in range(10)))
    assert most == 2
    assert queue.in_flight == 0


async def test_a_read_given_up_while_waiting_takes_no_turn() -> None:
    queue = EngineQueue(window=1)
    await queue.turn("a")
    gave_up = asyncio.create_task(queue.turn("b"))
    waits = asyncio.create_task(queue.turn("c"))
    await asyncio.sleep(0)
    gave_up.cancel()
    queue.done()
    await waits
    assert queue.in_flight == 1
    assert gave_up.cancelled()


async def test_a_lost_worker_fails_every_waiting_read() -> None:
    queue = EngineQueue(window=1)
    await queue.turn("a")
    waiting = asyncio.create_task(queue.turn("b"))
    await asyncio.sleep(0)
    queue.fail(BackendUnavailable("gone"))
    with pytest.raises(BackendUnavailable):
        await waiting
    queue.done()  # the read in flight answers (it failed too)
    assert queue.in_flight == 0
    await queue.turn("c")  # and the next goes at once
