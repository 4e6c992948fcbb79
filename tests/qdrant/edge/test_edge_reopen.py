"""The upkeep's reopen of a much-written shard (adapters/engine/upkeep.py): when it
runs, what it keeps, and when it leaves the shard alone. Real embedded store, upkeep
through the janitor's `maintain()` and the watcher; the engine calls' clock is the test's."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.disk import free_bytes
from adapters.engine import upkeep
from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import SearchQuery
from harness.clocks import ManualClock
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit

NAME = "org:busy"
WRITES = 5  # REOPEN_AFTER_WRITES, for these tests


@pytest.fixture
async def store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[QdrantEdgeBackend, ManualClock]]:
    monkeypatch.setattr(upkeep, "REOPEN_AFTER_WRITES", WRITES)
    monkeypatch.setattr(upkeep, "WATCH_S", 3600.0)  # the tests call the upkeep themselves
    clock = ManualClock()
    backend = QdrantEdgeBackend(DIM, tmp_path)
    backend.store.calls.clock = clock
    await backend.start()
    await backend.save_namespace(NamespaceRecord(name=NAME, kind="org", created_at=T0))
    yield backend, clock
    await backend.close()


def shard_of(store: QdrantEdgeBackend) -> object:
    shards = store.store.shards
    return shards.shards[shards.index_of(NAME)]


async def write(store: QdrantEdgeBackend, count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        await store.upsert_memory(
            memory(NAME, id=f"m{n}", content=f"memory {n}"), MemoryVectors(unit(1, n))
        )


async def contents(store: QdrantEdgeBackend) -> list[str]:
    return sorted(m.content for m in await store.list_memories([NAME], everything(), 100))


async def test_a_much_written_shard_is_reopened_at_a_quiet_moment_and_serves_the_same(
    store: tuple[QdrantEdgeBackend, ManualClock],
) -> None:
    backend, clock = store
    await write(backend, WRITES)
    before = shard_of(backend)
    found = await backend.query_memories([NAME], SearchQuery(unit(1, 3)), everything(), 3)
    await backend.maintain()
    assert shard_of(backend) is before  # a request's engine call ended just now
    clock.now += upkeep.QUIET_S
    await backend.maintain()
    assert shard_of(backend) is not before
    assert await contents(backend) == [f"memory {n}" for n in range(WRITES)]
    again = await backend.query_memories([NAME], SearchQuery(unit(1, 3)), everything(), 3)
    assert [(m.memory.id, m.score) for m in again] == [(m.memory.id, m.score) for m in found]
    await write(backend, 1, start=WRITES)  # the reopened shard takes writes
    assert len(await contents(backend)) == WRITES + 1
    reopened = shard_of(backend)
    clock.now += upkeep.QUIET_S
    await backend.maintain()
    assert shard_of(backend) is reopened  # its writes count from the reopen


async def test_no_reopen_below_the_write_count_or_while_a_call_is_in_flight(
    store: tuple[QdrantEdgeBackend, ManualClock],
) -> None:
    backend, clock = store
    await write(backend, WRITES - 1)
    before = shard_of(backend)
    clock.now += upkeep.QUIET_S
    await backend.maintain()
    assert shard_of(backend) is before
    await write(backend, 1, start=WRITES - 1)
    clock.now += upkeep.QUIET_S
    gate = threading.Event()
    held = asyncio.create_task(  # a janitor's call on a worker thread, in flight
        backend.store.calls.worker(gate.wait, 10.0, background=True)
    )
    try:
        await asyncio.sleep(0)
        assert not backend.store.calls.alone()  # the call is submitted
        await backend.maintain()
        assert shard_of(backend) is before
    finally:
        gate.set()
        await held
    await backend.maintain()
    assert shard_of(backend) is not before


async def test_a_shard_over_the_point_bound_is_left_as_it_is(
    store: tuple[QdrantEdgeBackend, ManualClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, clock = store
    monkeypatch.setattr(upkeep, "REOPEN_MAX_POINTS", WRITES - 1)
    await write(backend, WRITES)
    before = shard_of(backend)
    clock.now += upkeep.QUIET_S
    await backend.maintain()
    assert shard_of(backend) is before


async def test_without_room_to_map_it_again_the_shard_stays_open_and_is_not_retried_at_once(
    store: tuple[QdrantEdgeBackend, ManualClock], tmp_path: Path
) -> None:
    backend, clock = store
    await write(backend, WRITES)
    before = shard_of(backend)
    disk = backend.store.disk
    room = disk.headroom_bytes
    disk.headroom_bytes = free_bytes(tmp_path) + 2**40  # the volume is full
    clock.now += upkeep.QUIET_S
    await backend.maintain()
    assert shard_of(backend) is before
    assert await contents(backend) == [f"memory {n}" for n in range(WRITES)]
    disk.headroom_bytes = room  # room again: still not before as many writes more
    clock.now += upkeep.QUIET_S
    await backend.maintain()
    assert shard_of(backend) is before
    await write(backend, WRITES, start=WRITES)
    clock.now += upkeep.QUIET_S
    await backend.maintain()
    assert shard_of(backend) is not before


async def test_the_watcher_reopens_between_sweeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(upkeep, "REOPEN_AFTER_WRITES", WRITES)
    monkeypatch.setattr(upkeep, "WATCH_S", 0.01)
    clock = ManualClock()
    backend = QdrantEdgeBackend(DIM, tmp_path)
    backend.store.calls.clock = clock
    running = asyncio.all_tasks()
    await backend.start()
    try:
        await backend.save_namespace(NamespaceRecord(name=NAME, kind="org", created_at=T0))
        await write(backend, WRITES)
        before = shard_of(backend)
        clock.now += upkeep.QUIET_S
        async with asyncio.timeout(10):  # no sweep called: the watcher does it
            while shard_of(backend) is before:  # noqa: ASYNC110 (the watcher replaces it)
                await asyncio.sleep(0.01)
        assert await contents(backend) == [f"memory {n}" for n in range(WRITES)]
    finally:
        await backend.close()
    assert asyncio.all_tasks() <= running  # the watcher stopped with the store


@pytest.mark.parametrize(("slow_s", "logged"), [(0.0, 1), (3600.0, 0)])
async def test_a_flush_that_held_the_engine_long_is_logged_with_its_shard_and_time(
    store: tuple[QdrantEdgeBackend, ManualClock],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    slow_s: float,
    logged: int,
) -> None:
    """Requests wait behind the janitor's engine calls: one that held the engine `SLOW_S`
    or more says so (0: every flush; an hour: none)."""
    backend, clock = store
    monkeypatch.setattr(upkeep, "SLOW_S", slow_s)
    await write(backend, 1)
    clock.now += upkeep.QUIET_S
    with caplog.at_level(logging.INFO, logger=upkeep.__name__):
        await backend.maintain()
    index = backend.store.shards.index_of(NAME)
    said = [r.getMessage() for r in caplog.records if r.name == upkeep.__name__]
    prefix = f"memory shard {index:02d}: the janitor's flush held the engine "
    assert [line for line in said if line.startswith(prefix)] == said
    assert len(said) == logged
    flushed = backend.store.writes.written_at(backend.store.shards.shards[index], "flush")
    assert flushed is None  # flushed either way
