"""`CallBatcher`: concurrent calls share one, a lone call waits for nothing, errors reach all."""

from __future__ import annotations

import asyncio

import pytest

from adapters.engine.call_batcher import CallBatcher


class Doubler:
    """Doubles numbers, one engine call per batch; remembers the batches it saw."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.batches: list[list[int]] = []
        self.fail_on = fail_on

    async def __call__(self, items: list[int]) -> list[int]:
        self.batches.append(list(items))
        await asyncio.sleep(0.01)  # an engine call takes a while; others arrive meanwhile
        if self.fail_on in items:
            raise OSError("disk trouble")
        return [item * 2 for item in items]


async def test_concurrent_calls_share_engine_calls_and_get_their_own_results() -> None:
    doubler = Doubler()
    batcher = CallBatcher(doubler)
    results = await asyncio.gather(*(batcher.submit(i) for i in range(50)))
    assert results == [i * 2 for i in range(50)]
    # All 50 were queued before the flush task first ran: one engine call for all.
    assert doubler.batches == [list(range(50))]


async def test_calls_arriving_during_an_engine_call_join_the_next() -> None:
    doubler = Doubler()
    batcher = CallBatcher(doubler)
    first = asyncio.create_task(batcher.submit(0))
    await asyncio.sleep(0.005)  # the first engine call is under way
    rest = await asyncio.gather(*(batcher.submit(i) for i in range(1, 6)))
    assert (await first, rest) == (0, [2, 4, 6, 8, 10])
    assert doubler.batches == [[0], [1, 2, 3, 4, 5]]


async def test_a_lone_call_is_sent_at_once() -> None:
    doubler = Doubler()
    batcher = CallBatcher(doubler)
    assert await batcher.submit(7) == 14
    assert await batcher.submit(8) == 16
    assert doubler.batches == [[7], [8]]


async def test_a_failed_batch_fails_its_callers_only() -> None:
    doubler = Doubler(fail_on=3)
    batcher = CallBatcher(doubler, max_batch=4)
    outcomes = await asyncio.gather(*(batcher.submit(i) for i in range(9)), return_exceptions=True)
    failed = [i for i, outcome in enumerate(outcomes) if isinstance(outcome, OSError)]
    assert doubler.batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8]]
    assert failed == [0, 1, 2, 3]
    assert outcomes[4:] == [8, 10, 12, 14, 16]


async def test_drain_waits_for_every_submitted_call() -> None:
    doubler = Doubler()
    batcher = CallBatcher(doubler)
    tasks = [asyncio.create_task(batcher.submit(i)) for i in range(5)]
    await asyncio.sleep(0)
    await batcher.drain()
    assert all(task.done() for task in tasks)
    assert sum(len(batch) for batch in doubler.batches) == 5


@pytest.mark.parametrize("size", [1, 3])
async def test_batches_never_exceed_the_maximum(size: int) -> None:
    doubler = Doubler()
    batcher = CallBatcher(doubler, max_batch=size)
    await asyncio.gather(*(batcher.submit(i) for i in range(10)))
    assert max(len(batch) for batch in doubler.batches) <= size
