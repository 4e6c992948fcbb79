"""The backend suite against the embedded qdrant-edge store, plus what only it does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import qdrant_edge as qe

from adapters.engine import record_store
from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.engine.upkeep import DEADLINE_S
from adapters.engine.upkeep import QUIET_S
from adapters.errors import BackendMisconfigured
from adapters.errors import NamespaceGone
from adapters.qdrant.layout import new_epoch
from adapters.store_files import SHARD_COUNT
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from harness.clocks import ManualClock
from tests.backends.suite import BackendSuite
from tests.backends.suite.hybrid import HybridSuite
from tests.backends.suite.hybrid import KeywordFillSuite
from tests.backends.suite.rerank import RerankSuite
from tests.support.backends import copy_of
from tests.support.backends import point_count
from tests.support.backends import started
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import dense
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit


class TestQdrantEdge(BackendSuite, HybridSuite, KeywordFillSuite, RerankSuite):
    @pytest.fixture
    async def backend(
        self, tmp_path: Path, empty_test_store: Path
    ) -> AsyncIterator[QdrantEdgeBackend]:
        data_dir = copy_of(empty_test_store, tmp_path / "data")
        async with started(QdrantEdgeBackend(DIM, data_dir)) as store:
            yield store


async def test_records_and_memories_survive_reopen(tmp_path: Path) -> None:
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    record = NamespaceRecord(name="org:acme", kind="org", created_at=T0, metadata={"a": 1})
    await store.save_namespace(record)
    written = memory("org:acme")
    await store.upsert_memory(written, MemoryVectors(unit(1)))
    await store.close()

    reopened = QdrantEdgeBackend(DIM, tmp_path)
    await reopened.start()
    assert await reopened.get_namespace("org:acme") == record
    assert await reopened.list_memories(["org:acme"], everything(), 10) == [written]
    await reopened.close()


async def test_thousands_of_namespaces_share_a_few_shards(tmp_path: Path) -> None:
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    names = [f"workspace:w{i}" for i in range(3000)]
    for name in names:
        await store.save_namespace(NamespaceRecord(name=name, kind="workspace", created_at=T0))
        await store.upsert_memory(memory(name, content=name), MemoryVectors(unit(1)))
    asked = [names[7], names[1500], names[2999]]
    listed = await store.list_memories(asked, everything(), 10)
    assert sorted(m.content for m in listed) == sorted(asked)
    hits = await store.query_memories(asked, dense(1), everything(), 10)
    assert sorted(h.memory.namespace for h in hits) == sorted(asked)
    assert point_count(store) == 3000
    assert sorted(p.name for p in (tmp_path / "store").iterdir() if p.is_dir()) == ["shards"]
    shards = sorted(p.name for p in (tmp_path / "store" / "shards").iterdir())
    assert shards == [f"{i:02d}" for i in range(SHARD_COUNT)]
    held = [int(s.count(qe.CountRequest(exact=True))) for s in store.store.shards.open_shards()]
    assert min(held) > 3000 / SHARD_COUNT / 2, held  # the hash spreads them
    await store.close()


async def test_delete_removes_the_points_and_the_purge(tmp_path: Path) -> None:
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    await store.save_namespace(NamespaceRecord(name="org:gone", kind="org", created_at=T0))
    await store.save_namespace(NamespaceRecord(name="org:kept", kind="org", created_at=T0))
    for index in range(50):
        await store.upsert_memory(memory("org:gone"), MemoryVectors(unit(1, index)))
    await store.upsert_memory(memory("org:kept"), MemoryVectors(unit(1)))
    assert await store.delete_namespace("org:gone") is True
    await store.maintain()  # waits for nothing new; the background purge may have run already
    assert store.store.records.purges == {}
    assert point_count(store) == 1
    await store.close()


async def test_a_write_racing_a_delete_leaves_no_orphan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    name = "org:race"
    await store.save_namespace(NamespaceRecord(name=name, kind="org", created_at=T0))
    parts = store.store
    writer_view = parts.records.live[name]
    # The delete runs to completion, purge included, before the write lands ...
    assert await store.delete_namespace(name) is True
    await store.maintain()
    # ... but the writer looked the namespace up before the delete.
    parts.records.live[name] = writer_view
    write = parts.update

    def write_then_see_the_delete(shard: object, operation: object) -> None:
        write(shard, operation)
        parts.records.live.pop(name, None)

    monkeypatch.setattr(parts, "update", write_then_see_the_delete)
    with pytest.raises(NamespaceGone):
        await store.upsert_memory(memory(name), MemoryVectors(unit(1)))
    assert point_count(store) == 0
    await store.close()


class CountingShard:
    """A shard that counts the janitor's calls and passes everything on."""

    def __init__(self, shard: object) -> None:
        self.shard = shard
        self.flushes = 0
        self.vacuums = 0

    def flush(self) -> None:
        self.flushes += 1
        self.shard.flush()  # type: ignore[attr-defined]

    def optimize(self) -> None:
        self.vacuums += 1
        self.shard.optimize()  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.shard, name)


async def counted_store(
    tmp_path: Path, names: list[str], clock: ManualClock
) -> tuple[QdrantEdgeBackend, list[CountingShard | None]]:
    """`QdrantEdgeBackend` with `names` saved, each in a shard of its own, every shard counted."""
    store = QdrantEdgeBackend(DIM, tmp_path)
    store.store.calls.clock = clock
    await store.start()
    for name in names:
        await store.save_namespace(NamespaceRecord(name=name, kind="org", created_at=T0))
    shards = store.store.shards
    assert len({shards.index_of(name) for name in names}) == len(names)
    counted = [None if shard is None else CountingShard(shard) for shard in shards.shards]
    shards.shards[:] = counted
    return store, counted


def flushes(shards: list[CountingShard | None]) -> dict[int, int]:
    return {i: s.flushes for i, s in enumerate(shards) if s is not None and s.flushes}


def vacuums(shards: list[CountingShard | None]) -> dict[int, int]:
    return {i: s.vacuums for i, s in enumerate(shards) if s is not None and s.vacuums}


async def test_a_sweep_flushes_only_the_shards_written_since_the_last(tmp_path: Path) -> None:
    """The engine holds the GIL through a flush: a shard nobody wrote is not flushed."""
    clock = ManualClock()
    store, shards = await counted_store(tmp_path, ["org:busy", "org:idle"], clock)
    busy = store.store.shards.index_of("org:busy")
    await store.upsert_memory(memory("org:busy"), MemoryVectors(unit(1)))
    clock.now += QUIET_S
    await store.maintain()
    assert flushes(shards) == {busy: 1}
    await store.maintain()  # nothing written since
    assert flushes(shards) == {busy: 1}
    await store.upsert_memory(memory("org:busy"), MemoryVectors(unit(2)))
    clock.now += QUIET_S
    await store.maintain()
    assert flushes(shards) == {busy: 2}
    await store.close()


async def test_a_flush_waits_for_a_quiet_moment_or_its_deadline(tmp_path: Path) -> None:
    """The engine holds the GIL through a flush: while requests reach the engine it waits,
    at most DEADLINE_S after the shard's first write since its last flush."""
    clock = ManualClock()
    store, shards = await counted_store(tmp_path, ["org:busy"], clock)
    busy = store.store.shards.index_of("org:busy")
    await store.upsert_memory(memory("org:busy"), MemoryVectors(unit(1)))
    written = clock.now
    clock.now += QUIET_S / 2
    await store.maintain()
    assert flushes(shards) == {}  # a request's call ended QUIET_S / 2 ago
    while clock.now < written + DEADLINE_S - 20:
        clock.now += 10
        await store.get_memory("org:busy", "someone-reading")  # a request's engine call
        clock.now += QUIET_S / 2
        await store.maintain()
    assert flushes(shards) == {}
    clock.now = written + DEADLINE_S
    await store.get_memory("org:busy", "someone-reading")
    await store.maintain()
    assert flushes(shards) == {busy: 1}
    await store.close()


async def test_maintain_vacuums_the_written_shards_after_many_changes(tmp_path: Path) -> None:
    """One shard rewritten a sweep (the GIL is held through it), only shards written since
    their last vacuum, and the round ends when none is left."""
    names = ["org:busy", "org:calm", "org:idle"]
    clock = ManualClock()
    store, shards = await counted_store(tmp_path, names, clock)
    written = memory("org:busy")
    store.store.writes.changes = 19_990
    for index in range(20):
        await store.upsert_memory(
            memory("org:busy", id=written.id, content=f"v{index}"), MemoryVectors(unit(1, index))
        )
    await store.upsert_memory(memory("org:calm"), MemoryVectors(unit(2)))
    index_of = store.store.shards.index_of
    await store.maintain()
    assert vacuums(shards) == {}  # the engine was busy a moment ago
    clock.now += QUIET_S
    await store.maintain()
    await store.maintain()
    assert vacuums(shards) == {index_of("org:busy"): 1, index_of("org:calm"): 1}
    assert store.store.writes.changes >= 20_000  # the round ends at the sweep that finds none left
    await store.maintain()
    assert store.store.writes.changes == 0
    assert vacuums(shards) == {index_of("org:busy"): 1, index_of("org:calm"): 1}
    assert [m.content for m in await store.list_memories(["org:busy"], everything(), 5)] == ["v19"]
    await store.close()


async def test_concurrent_first_saves_agree_on_one_incarnation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twenty first PUTs of a new name racing each other mint one epoch, not twenty.

    Otherwise a memory written under an early one would vanish behind a later one.
    """
    minted: list[str] = []

    def counting_epoch() -> str:
        minted.append(new_epoch())
        return minted[-1]

    monkeypatch.setattr(record_store, "new_epoch", counting_epoch)
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    name = "workspace:new"
    record = NamespaceRecord(name=name, kind="workspace", created_at=T0)
    await asyncio.gather(*(store.save_namespace(record) for _ in range(20)))
    assert len(minted) == 1
    assert store.store.records.live[name].epoch == minted[0]
    await store.close()


@pytest.mark.parametrize("layout", ["namespaces/memory-workspace~a", "store/memories"])
async def test_a_development_builds_layout_stops_start_up(tmp_path: Path, layout: str) -> None:
    """Not served empty, not rewritten: one line saying what was found and what to do."""
    (tmp_path / layout).mkdir(parents=True)
    store = QdrantEdgeBackend(DIM, tmp_path)
    with pytest.raises(BackendMisconfigured) as refused:
        await store.start()
    await store.close()
    top = "store/memories" if layout.startswith("store") else "namespaces"
    assert str(refused.value) == (
        f"{tmp_path} holds a store of a development build ({top}/), which this version does"
        " not read: export it with that build and import it here, or move it away to start"
        " empty"
    )
    assert not (tmp_path / "store" / "shards").exists()
