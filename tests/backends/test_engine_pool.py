"""The embedded store over several engine workers: the backend suite, a worker's crash
taking only its namespaces away, the split read from the data directory, and the
workers' conditions as one."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.callers import NOBODY
from adapters.callers import Caller
from adapters.callers import acting_for
from adapters.errors import BackendMisconfigured
from adapters.errors import BackendUnavailable
from adapters.errors import NamespaceGone
from adapters.pool.embedded_store import default_workers
from adapters.pool.embedded_store import embedded_store
from adapters.pool.embedded_store import engine_workers
from adapters.pool.engine_pool import EnginePool
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import SearchQuery
from tests.backends.suite import BackendSuite
from tests.backends.suite.hybrid import HybridSuite
from tests.backends.suite.hybrid import KeywordFillSuite
from tests.backends.suite.rerank import RerankSuite
from tests.support.backends import TEST_POOL_WORKERS
from tests.support.backends import copy_of
from tests.support.backends import names_of_each_worker
from tests.support.backends import started
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit
from tests.worker.test_engine_process import until

WORKERS = TEST_POOL_WORKERS


class TestEnginePool(BackendSuite, HybridSuite, KeywordFillSuite, RerankSuite):
    @pytest.fixture
    async def backend(self, tmp_path: Path, empty_test_pool: Path) -> AsyncIterator[EnginePool]:
        data_dir = copy_of(empty_test_pool, tmp_path / "data")
        async with started(embedded_store(DIM, data_dir, WORKERS)) as store:
            yield store


async def test_a_search_over_both_workers_merges_as_one_store(tmp_path: Path) -> None:
    async with started(embedded_store(DIM, tmp_path, WORKERS)) as store:
        (first,), (second,) = names_of_each_worker(store, 1)
        for name in (first, second):
            await store.save_namespace(NamespaceRecord(name=name, kind="workspace", created_at=T0))
        near, far = memory(first, content="near"), memory(second, content="far", pin=True)
        await store.upsert_memory(near, MemoryVectors(unit(1, 0.1)))
        await store.upsert_memory(far, MemoryVectors(unit(0.1, 1)))
        found = await store.query_memories([first, second], SearchQuery(unit(1)), everything(), 5)
        assert [hit.memory.id for hit in found] == [far.id, near.id]  # pinned first
        listed = await store.list_memories([second, first], everything(), 5)
        assert [m.id for m in listed] == [far.id, near.id]
        assert {r.name for r in await store.list_namespaces()} == {first, second}
        size = await store.store_size.measure()
        assert (size.namespaces, size.memories) == (2, 2)
        await store.ping()  # each worker's condition, as health reads it: the disks as one
        disk = store.condition().disk
        assert disk is not None
        assert disk.sync_buckets[-1] >= WORKERS  # each worker synced its write
        assert (disk.sync_waiting_s, disk.refused) == (0, (0, 0, 0, 0))


Sent = list[tuple[int, list[str]]]


def record_upserts(store: EnginePool, monkeypatch: pytest.MonkeyPatch) -> Sent:
    """Each `upsert_batch` the pool sends: (its worker's index, the namespaces of its items)."""
    sent: Sent = []
    for index, worker in enumerate(store.workers):
        call = worker.call

        async def recorded(
            part: Any, method: str, args: Any = (), *rest: Any, _i: int = index, _call: Any = call
        ) -> Any:
            if method == "upsert_batch":
                sent.append((_i, [m.namespace for m, _ in args[0]]))
            return await _call(part, method, args, *rest)

        monkeypatch.setattr(worker, "call", recorded)
    return sent


async def test_a_batch_crosses_to_each_worker_as_one_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with started(embedded_store(DIM, tmp_path, WORKERS)) as store:
        (a, b), (c, _) = names_of_each_worker(store, 2)
        for name in (a, b, c):
            await store.save_namespace(NamespaceRecord(name=name, kind="workspace", created_at=T0))
        sent = record_upserts(store, monkeypatch)
        written = [memory(name, content=name) for name in (a, b, c)]
        batch = [(m, MemoryVectors(unit(1))) for m in written]
        assert await store.upsert_batch(batch) == [None] * 3
        assert sorted(sent) == [(0, [a, b]), (1, [c])]
        for m in written:
            assert await store.get_memory(m.namespace, m.id) == m


async def test_the_upserts_of_one_turn_cross_to_each_worker_as_one_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with started(embedded_store(DIM, tmp_path, WORKERS)) as store:
        (a, b), (c, gone) = names_of_each_worker(store, 2)
        for name in (a, b, c):
            await store.save_namespace(NamespaceRecord(name=name, kind="workspace", created_at=T0))
        sent = record_upserts(store, monkeypatch)
        written = [memory(name, content=name) for name in (a, b, c, gone)]
        outcomes = await asyncio.gather(
            *(store.upsert_memory(m, MemoryVectors(unit(1))) for m in written),
            return_exceptions=True,
        )
        assert outcomes[:3] == [None] * 3
        assert isinstance(outcomes[3], NamespaceGone)  # its own fails, not the others
        assert sorted(sent) == [(0, [a, b]), (1, [c, gone])]
        for m in written[:3]:
            assert await store.get_memory(m.namespace, m.id) == m
        lone = memory(a, content="alone")
        await store.upsert_memory(lone, MemoryVectors(unit(1)))
        assert sent[-1] == (0, [a])
        assert await store.get_memory(a, lone.id) == lone


async def test_a_turns_call_is_cancelled_once_every_caller_in_it_gave_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a lone upsert's call would be: the worker then stops waiting for its sync."""
    async with started(embedded_store(DIM, tmp_path, WORKERS)) as store:
        (a, b), *_ = names_of_each_worker(store, 2)
        for name in (a, b):
            await store.save_namespace(NamespaceRecord(name=name, kind="workspace", created_at=T0))
        calls: list[asyncio.Task[Any]] = []

        async def stalled(*_: Any) -> Any:  # a sync that does not end
            task = asyncio.current_task()
            assert task is not None
            calls.append(task)
            await asyncio.sleep(10)

        monkeypatch.setattr(store.workers[0], "call", stalled)
        first, second = (
            asyncio.create_task(store.upsert_memory(memory(n), MemoryVectors(unit(1))))
            for n in (a, b)
        )
        await until(lambda: len(calls) == 1, 5.0)
        first.cancel()
        await asyncio.sleep(0.05)
        assert not calls[0].done()  # the other caller still waits for it
        second.cancel()
        await until(lambda: calls[0].done(), 5.0)
        assert calls[0].cancelled()


async def test_a_queued_read_waits_as_the_caller_the_request_acts_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No backend call carries its caller: the pool reads it where the request set it
    (adapters/callers.py), for the reads that queue; a write does not queue."""
    async with started(embedded_store(DIM, tmp_path, 1)) as store:
        name = "workspace:queued"
        await store.save_namespace(NamespaceRecord(name=name, kind="workspace", created_at=T0))
        (worker,) = store.workers
        seen: list[tuple[str, Caller | None]] = []
        call = worker.call

        async def recorded(
            part: Any, method: str, args: Any, kwargs: Any, caller: Any, *rest: Any
        ) -> Any:
            seen.append((method, caller))
            return await call(part, method, args, kwargs, caller, *rest)

        monkeypatch.setattr(worker, "call", recorded)
        tenant = Caller("workspace:queued")
        with acting_for(tenant):
            await store.query_memories([name], SearchQuery(unit(1)), everything(), 5)
            await store.upsert_memory(memory(name), MemoryVectors(unit(1)))
        await store.list_memories([name], everything(), 5)
        assert seen == [
            ("query_memories", tenant),
            ("upsert_batch", None),
            ("list_memories", NOBODY),
        ]


async def test_a_killed_worker_takes_only_its_namespaces_away(tmp_path: Path) -> None:
    async with started(embedded_store(DIM, tmp_path, WORKERS)) as store:
        (lost,), (kept,) = names_of_each_worker(store, 1)
        for name in (lost, kept):
            await store.save_namespace(NamespaceRecord(name=name, kind="workspace", created_at=T0))
        before = memory(lost, content="before the crash")
        await store.upsert_memory(before, MemoryVectors(unit(1)))
        worker = store.workers[0]
        await until(lambda: worker.spare_pid is not None, 30)
        spare = worker.spare_pid
        assert worker.pid is not None
        assert spare is not None
        os.kill(spare, signal.SIGSTOP)  # no replacement ready: down past the wait for one
        os.kill(worker.pid, signal.SIGKILL)
        await until(lambda: not worker.up, 5)
        with pytest.raises(BackendUnavailable):
            await store.get_namespace(lost)
        await store.ping()  # the store answers: one worker restarting is a degradation
        assert store.condition().degraded
        assert "engine worker 0" in " ".join(store.condition().problems)
        during = memory(kept, content="while the other restarts")
        await store.upsert_memory(during, MemoryVectors(unit(1)))
        assert await store.list_memories([kept], everything(), 5) == [during]
        os.kill(spare, signal.SIGCONT)
        await until(lambda: worker.up, 30)
        assert await store.list_memories([lost], everything(), 5) == [before]
        assert not store.condition().degraded


def test_the_count_asked_for_else_the_stores_else_from_the_cores(tmp_path: Path) -> None:
    """A store of another count than the one asked for is moved
    (tests/qdrant/edge/test_placement.py)."""
    assert engine_workers(tmp_path, None, cores=2) == 1  # a new store: from the cores
    assert engine_workers(tmp_path, None, cores=8) == 4
    assert engine_workers(tmp_path, 2, cores=2) == 2
    (tmp_path / "workers" / "1-of-4").mkdir(parents=True)
    assert engine_workers(tmp_path, None, cores=2) == 4  # written by four: four
    with pytest.raises(BackendMisconfigured, match="must be one of"):
        engine_workers(tmp_path, 3, cores=2)
    (tmp_path / "store").mkdir()
    with pytest.raises(BackendMisconfigured, match=r"several engine worker counts \(\[1, 4\]\)"):
        engine_workers(tmp_path, None, cores=2)


def test_the_default_is_one_worker_per_two_cores_an_even_split_at_most_four() -> None:
    cores = (1, 2, 3, 4, 6, 8, 12, 16, 64)
    assert [default_workers(n) for n in cores] == [1, 1, 1, 2, 2, 4, 4, 4, 4]


async def test_one_worker_keeps_the_single_store_layout(tmp_path: Path) -> None:
    for workers in (1, 2):
        data_dir = tmp_path / str(workers)
        async with started(embedded_store(DIM, data_dir, workers)) as store:
            await store.save_namespace(NamespaceRecord(name="org:a", kind="org", created_at=T0))
        assert sorted(p.name for p in data_dir.iterdir() if p.is_dir()) == (
            ["store"] if workers == 1 else ["workers"]
        )
        assert engine_workers(data_dir, None, cores=64) == workers
