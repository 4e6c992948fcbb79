"""`SameTurn`: the calls of one turn of the event loop go on as one call."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from adapters.worker.same_turn import SameTurn


class Doubler:
    def __init__(self) -> None:
        self.calls: list[list[int]] = []

    async def __call__(self, items: Sequence[int]) -> list[int]:
        self.calls.append(list(items))
        await asyncio.sleep(0.01)
        if 13 in items:
            raise ValueError("unlucky batch")
        return [2 * item for item in items]


async def test_the_calls_of_one_turn_are_one_call_answered_each_in_order() -> None:
    call = Doubler()
    same = SameTurn(call)
    assert await asyncio.gather(*(same.submit(n) for n in (1, 2, 3))) == [2, 4, 6]
    assert call.calls == [[1, 2, 3]]


async def test_a_lone_call_goes_alone_and_later_ones_go_apart() -> None:
    call = Doubler()
    same = SameTurn(call)
    assert await same.submit(5) == 10
    first = asyncio.ensure_future(same.submit(6))
    await asyncio.sleep(0.001)  # the first is on its way: the next goes on its own
    assert await asyncio.gather(first, same.submit(7)) == [12, 14]
    assert call.calls == [[5], [6], [7]]


async def test_a_failed_call_fails_every_caller_of_its_turn() -> None:
    same = SameTurn(Doubler())
    found = await asyncio.gather(same.submit(13), same.submit(1), return_exceptions=True)
    assert [str(error) for error in found] == ["unlucky batch", "unlucky batch"]
    assert await same.submit(1) == 2
    await same.drain()


async def test_a_caller_that_gives_up_leaves_the_others_answered() -> None:
    call = Doubler()
    same = SameTurn(call)
    leaving = asyncio.ensure_future(same.submit(1))
    staying = asyncio.ensure_future(same.submit(2))
    await asyncio.sleep(0)
    leaving.cancel()
    assert await staying == 4
    with pytest.raises(asyncio.CancelledError):
        await leaving
    assert call.calls == [[1, 2]]


async def test_a_call_whose_callers_all_give_up_is_cancelled() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def call(items: Sequence[int]) -> list[int]:
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return list(items)

    same = SameTurn(call)
    callers = [asyncio.ensure_future(same.submit(n)) for n in (1, 2)]
    await started.wait()
    for caller in callers:
        caller.cancel()
    await asyncio.wait_for(cancelled.wait(), 1)
    await same.drain()
