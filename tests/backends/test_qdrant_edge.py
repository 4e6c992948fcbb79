"""The backend suite against the embedded qdrant-edge store, plus what only it does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import qdrant_edge as qe

from adapters.errors import NamespaceGone
from adapters.qdrant.edge import namespace_records as edge_records
from adapters.qdrant.edge.backend import QdrantEdgeBackend
from adapters.qdrant.edge.engine import open_shard, point_vectors
from adapters.qdrant.edge.namespace_records import RecordStore
from adapters.qdrant.edge.shards import SHARD_COUNT
from adapters.qdrant.layout import memory_to_payload, new_epoch, point_id
from adapters.values import NamespaceRecord, SearchQuery, StoreCondition
from plugin.embedding.keywords import KeywordEncoder
from tests.backends.suite import BackendSuite
from tests.backends.suite.hybrid import HybridSuite, KeywordIndexSuite
from tests.support.backends import started
from tests.support.records import DIM, T0, dense, everything, memory, unit


class TestQdrantEdge(BackendSuite, HybridSuite, KeywordIndexSuite):
    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[QdrantEdgeBackend]:
        async with started(QdrantEdgeBackend(DIM, tmp_path)) as store:
            yield store


def point_count(store: QdrantEdgeBackend) -> int:
    """Points physically in the shards, whatever reads may see."""
    request = qe.CountRequest(filter=None, exact=True)
    return sum(int(shard.count(request)) for shard in store._shards.open_shards())


async def test_records_and_memories_survive_reopen(tmp_path: Path) -> None:
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    record = NamespaceRecord(name="org:acme", kind="org", created_at=T0, metadata={"a": 1})
    await store.save_namespace(record)
    written = memory("org:acme")
    await store.upsert_memory(written, unit(1))
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
        await store.upsert_memory(memory(name, content=name), unit(1))
    asked = [names[7], names[1500], names[2999]]
    listed = await store.list_memories(asked, everything(), 10)
    assert sorted(m.content for m in listed) == sorted(asked)
    hits = await store.query_memories(asked, dense(1), everything(), 10)
    assert sorted(h.memory.namespace for h in hits) == sorted(asked)
    assert point_count(store) == 3000
    assert sorted(p.name for p in (tmp_path / "store").iterdir() if p.is_dir()) == ["shards"]
    shards = sorted(p.name for p in (tmp_path / "store" / "shards").iterdir())
    assert shards == [f"{i:02d}" for i in range(SHARD_COUNT)]
    held = [int(s.count(qe.CountRequest(exact=True))) for s in store._shards.open_shards()]
    assert min(held) > 3000 / SHARD_COUNT / 2, held  # the hash spreads them
    await store.close()


async def test_delete_removes_the_points_and_the_purge(tmp_path: Path) -> None:
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    await store.save_namespace(NamespaceRecord(name="org:gone", kind="org", created_at=T0))
    await store.save_namespace(NamespaceRecord(name="org:kept", kind="org", created_at=T0))
    for index in range(50):
        await store.upsert_memory(memory("org:gone"), unit(1, index))
    await store.upsert_memory(memory("org:kept"), unit(1))
    assert await store.delete_namespace("org:gone") is True
    await store.maintain()  # waits for nothing new; the background purge may have run already
    assert store._records.purges == {}
    assert point_count(store) == 1
    await store.close()


async def test_a_write_racing_a_delete_leaves_no_orphan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    name = "org:race"
    await store.save_namespace(NamespaceRecord(name=name, kind="org", created_at=T0))
    writer_view = store._records.live[name]
    # The delete runs to completion, purge included, before the write lands ...
    assert await store.delete_namespace(name) is True
    await store.maintain()
    # ... but the writer looked the namespace up before the delete.
    store._records.live[name] = writer_view
    write = store._update

    def write_then_see_the_delete(shard: object, operation: object) -> None:
        write(shard, operation)
        store._records.live.pop(name, None)

    monkeypatch.setattr(store, "_update", write_then_see_the_delete)
    with pytest.raises(NamespaceGone):
        await store.upsert_memory(memory(name), unit(1))
    assert point_count(store) == 0
    await store.close()


async def test_maintain_vacuums_after_many_changes(tmp_path: Path) -> None:
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    await store.save_namespace(NamespaceRecord(name="org:busy", kind="org", created_at=T0))
    written = memory("org:busy")
    store._changes = 19_990
    for index in range(20):
        await store.upsert_memory(
            memory("org:busy", id=written.id, content=f"v{index}"), unit(1, index)
        )
    shards = len(store._shards.shards)
    for sweep in range(shards):  # one shard rewritten a sweep: the GIL is held through it
        assert store._changes >= 20_000, sweep
        await store.maintain()
    assert store._changes == 0
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

    monkeypatch.setattr(edge_records, "new_epoch", counting_epoch)
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    name = "workspace:new"
    record = NamespaceRecord(name=name, kind="workspace", created_at=T0)
    await asyncio.gather(*(store.save_namespace(record) for _ in range(20)))
    assert len(minted) == 1
    assert store._records.live[name].epoch == minted[0]
    await store.close()


def _write_single_shard_store(data: Path, names: list[str]) -> dict[str, str]:
    """A data directory as the version before shards left it: every memory in one
    shard (`store/memories`), with keyword vectors; {memory id: namespace}."""
    root = data / "store"
    root.mkdir(parents=True)
    records = RecordStore(root / "namespaces.sqlite3")
    records.open()
    shard = open_shard(root / "memories", DIM)
    written: dict[str, str] = {}
    for n, name in enumerate(names):
        epoch = records.save(NamespaceRecord(name=name, kind="workspace", created_at=T0))
        stored = [memory(name, content=f"note {i} about {name}") for i in range(2)]
        keywords = KeywordEncoder()
        points = [
            qe.Point(
                point_id(name, m.id),
                point_vectors(unit(1, n), keywords.document(m.content)),
                memory_to_payload(m, epoch),
            )
            for m in stored
        ]
        shard.update(qe.UpdateOperation.upsert_points(points))
        written.update((m.id, name) for m in stored)
    shard.flush()
    shard.close()
    records.close()
    return written


@pytest.mark.parametrize("interrupted", [False, True])
async def test_a_single_shard_store_is_split_into_shards(tmp_path: Path, interrupted: bool) -> None:
    names = [f"workspace:w{i}" for i in range(40)]
    written = _write_single_shard_store(tmp_path, names)
    if interrupted:  # an earlier split killed midway left a partial copy
        (tmp_path / "store" / "shards.partial" / "03").mkdir(parents=True)
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    try:
        assert sorted(p.name for p in (tmp_path / "store").iterdir() if p.is_dir()) == ["shards"]
        assert point_count(store) == len(written)
        assert len(store._shards.open_shards()) > 8
        listed = await store.list_memories(names, everything(), 1000)
        assert {m.id: m.namespace for m in listed} == written
        # Keyword vectors came along: a keyword search finds a namespace's own notes.
        query = SearchQuery(keywords=KeywordEncoder().query(f"about {names[5]}"))
        hits = await store.query_memories([names[5], names[6]], query, everything(), 2)
        assert {h.memory.namespace for h in hits} == {names[5]}
        assert store.condition() == StoreCondition()
        assert store._records.counts == {live.epoch: 2 for live in store._records.live.values()}
    finally:
        await store.close()
