"""Engine calls on the event loop take turns (adapters/qdrant/edge/turns.py, dispatch.py).

Deterministic: engine time comes from a clock each call advances, and the order of
events shows what ran in between; nothing sleeps to synchronise.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

import pytest

from adapters.callers import current_caller
from adapters.qdrant.edge.dispatch import LOOP_SLICE_S, EngineCalls
from adapters.qdrant.edge.turns import LoopTurns
from tests.support.clocks import ManualClock

CALL_S = LOOP_SLICE_S * 1.5  # one call spends the iteration's slice


@pytest.fixture
async def calls() -> AsyncIterator[tuple[EngineCalls, ManualClock]]:
    engine = EngineCalls(workers=1)
    clock = ManualClock(start=0.0)
    engine.timer = clock
    engine.start()
    yield engine, clock
    engine.stop()


async def test_a_caller_alone_runs_at_once_before_anything_else_scheduled(
    calls: tuple[EngineCalls, ManualClock],
) -> None:
    engine, clock = calls
    events: list[str] = []
    asyncio.get_running_loop().call_soon(events.append, "loop")

    def call() -> None:
        clock.now += CALL_S
        events.append("call")

    await engine.here(call)
    assert events == ["call"]


async def test_the_loop_runs_between_calls_once_the_slice_is_spent(
    calls: tuple[EngineCalls, ManualClock],
) -> None:
    engine, clock = calls
    engine.turns.typical_s = CALL_S  # calls known to take longer than a slice
    events: list[object] = []
    loop = asyncio.get_running_loop()

    def call(n: int) -> int:
        clock.now += CALL_S
        events.append(n)
        return n

    def tick() -> None:  # once an iteration, while the calls last
        events.append("tick")
        if len([e for e in events if e != "tick"]) < 4:
            loop.call_soon(tick)

    tasks = [asyncio.create_task(engine.here(call, n)) for n in range(4)]
    loop.call_soon(tick)
    assert await asyncio.wait_for(asyncio.gather(*tasks), 5) == [0, 1, 2, 3]
    calls_in_order = [e for e in events if e != "tick"]
    assert calls_in_order == [0, 1, 2, 3]  # in arrival order
    # one call an iteration: the loop's own work between any two of them
    positions = [i for i, e in enumerate(events) if e != "tick"]
    assert all(b - a > 1 for a, b in itertools.pairwise(positions))


async def test_a_turn_lets_as_many_go_as_the_slice_holds_at_their_typical_duration() -> None:
    turns = LoopTurns(slice_s=LOOP_SLICE_S)
    turns.typical_s = LOOP_SLICE_S / 2.5

    async def engine_call() -> None:  # spends the slice of the iteration the takers start in
        turns.spent(LOOP_SLICE_S)
        turns.typical_s = LOOP_SLICE_S / 2.5

    spending = asyncio.create_task(engine_call())
    takers = [asyncio.create_task(turns.take()) for _ in range(5)]
    await asyncio.sleep(0)
    assert turns.waiting == 5
    await asyncio.sleep(0)  # the next iteration's turn
    assert turns.waiting == 2  # three went in one turn
    await asyncio.wait_for(asyncio.gather(spending, *takers), 5)


async def test_short_calls_share_one_iteration_until_the_slice_is_spent(
    calls: tuple[EngineCalls, ManualClock],
) -> None:
    engine, clock = calls
    events: list[object] = []

    def call(n: int) -> None:
        clock.now += LOOP_SLICE_S / 4
        events.append(n)

    tasks = [asyncio.create_task(engine.here(call, n)) for n in range(6)]
    await asyncio.sleep(0)
    asyncio.get_running_loop().call_soon(events.append, "loop")
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert events == [0, 1, 2, 3, "loop", 4, 5]


async def test_a_cancelled_waiter_passes_its_turn_on() -> None:
    turns = LoopTurns(slice_s=LOOP_SLICE_S)

    async def engine_call() -> None:  # spends the slice of the iteration the takers start in
        turns.spent(LOOP_SLICE_S)
        turns.typical_s = LOOP_SLICE_S  # one waiter a turn

    spending = asyncio.create_task(engine_call())
    first = asyncio.create_task(turns.take())
    second = asyncio.create_task(turns.take())
    third = asyncio.create_task(turns.take())
    await asyncio.sleep(0)
    assert turns.waiting == 3
    first.cancel()  # before its turn came
    await asyncio.sleep(0)  # the next iteration's turn wakes `second` alone
    assert turns.waiting == 1
    second.cancel()  # woken, but cancelled before it ran: `third` gets the turn
    await asyncio.wait_for(third, 5)
    await spending
    assert first.cancelled()
    assert second.cancelled()
    assert turns.waiting == 0


async def test_a_store_closed_while_a_caller_waited_answers_unavailable(
    calls: tuple[EngineCalls, ManualClock],
) -> None:
    from adapters.errors import BackendUnavailable

    engine, clock = calls

    def call() -> str:
        clock.now += CALL_S
        return "ran"

    first = asyncio.create_task(engine.here(call))
    waiting = asyncio.create_task(engine.here(call))
    await asyncio.sleep(0)
    assert await first == "ran"
    engine.stop()
    with pytest.raises(BackendUnavailable):
        await asyncio.wait_for(waiting, 5)


async def test_callers_take_turns_each_in_arrival_order(
    calls: tuple[EngineCalls, ManualClock],
) -> None:
    """A tenant with one call waiting goes in the next turn, not after another tenant's
    queued flood; each tenant's own calls keep their order (adapters/callers.py)."""
    engine, clock = calls
    engine.turns.typical_s = CALL_S  # one call a turn
    events: list[tuple[str, int]] = []

    def call(caller: str, n: int) -> None:
        clock.now += CALL_S
        events.append((caller, n))

    async def as_caller(caller: str, n: int) -> None:
        current_caller.set(caller)  # what admission sets for a request's task
        await engine.here(call, caller, n)

    flood = [asyncio.create_task(as_caller("workspace:noisy", n)) for n in range(5)]
    quiet = [asyncio.create_task(as_caller("workspace:quiet", n)) for n in range(2)]
    await asyncio.wait_for(asyncio.gather(*flood, *quiet), 5)
    assert events == [
        ("workspace:noisy", 0),  # alone: at once
        ("workspace:noisy", 1),  # waiting first
        ("workspace:quiet", 0),
        ("workspace:noisy", 2),
        ("workspace:quiet", 1),
        ("workspace:noisy", 3),
        ("workspace:noisy", 4),
    ]


async def test_a_call_arriving_while_a_turn_is_granted_waits_one_call_an_iteration(
    calls: tuple[EngineCalls, ManualClock],
) -> None:
    """Under a search flood a caller arrives in every iteration. A woken turn runs in
    the iteration after the one that woke it; a newcomer in that iteration used to see
    nothing spent and run at once, and the woken call then ran beside the next one:
    two long engine calls an iteration, and the refusals waiting behind them."""
    engine, clock = calls
    engine.turns.typical_s = CALL_S  # calls known to take longer than a slice
    events: list[object] = []
    loop = asyncio.get_running_loop()
    tasks: list[asyncio.Task[None]] = []
    all_arrived = asyncio.Event()

    def call(n: int) -> None:
        clock.now += CALL_S
        events.append(n)

    def tick() -> None:  # once an iteration: two new callers arrive, while callers remain
        events.append("tick")
        for _ in range(2):
            if len(tasks) < 8:
                tasks.append(asyncio.create_task(engine.here(call, len(tasks))))
        if len(tasks) == 8:
            all_arrived.set()
        if len([e for e in events if e != "tick"]) < 8:
            loop.call_soon(tick)

    loop.call_soon(tick)
    await asyncio.wait_for(all_arrived.wait(), 5)
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    ran = [e for e in events if e != "tick"]
    assert sorted(ran) == list(range(8))  # type: ignore[type-var]
    positions = [i for i, e in enumerate(events) if e != "tick"]
    assert all(b - a > 1 for a, b in itertools.pairwise(positions)), events
