"""What the shared Qdrant layout promises, in qdrant-client's local mode (no server needed).

Thousands of namespaces, one request per search, deletes that hold without the
physical delete, purges finished by `maintain`, expiry scans, racing first saves.
What only a real server does (HTTP errors, request shapes, payload indexes) is in
tests/qdrant/http/.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest
from qdrant_client.http import models

from adapters.errors import BackendUnavailable
from adapters.qdrant.server.connection import QdrantConnection
from adapters.qdrant.server.tenants import QdrantServerBackend
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from tests.support.qdrant_local import MEMORIES
from tests.support.qdrant_local import RECORDS
from tests.support.qdrant_local import client
from tests.support.qdrant_local import count
from tests.support.qdrant_local import fail_filter_deletes
from tests.support.qdrant_local import ns_record
from tests.support.qdrant_local import spy
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import dense
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit


async def seed(
    shared: QdrantServerBackend, names: list[str], *builds: Callable[[str], MemoryRecord]
) -> None:
    """Each of `names` saved, with a memory from each of `builds` (at `unit(1)`)."""
    for name in names:
        await shared.save_namespace(ns_record(name))
        for build in builds:
            await shared.upsert_memory(build(name), MemoryVectors(unit(1)))


async def test_thousands_of_namespaces(shared: QdrantServerBackend) -> None:
    names = [f"workspace:w{i:04d}" for i in range(2000)]
    for name in names:
        await shared.save_namespace(ns_record(name))
    await shared.transfer.upsert_memories([(memory(name, content=name), unit(1)) for name in names])
    asked = ["workspace:w0007", "workspace:w1234", "workspace:w1999"]
    hits = await shared.query_memories(asked, dense(1), everything(), 100)
    assert sorted(h.memory.content for h in hits) == asked
    listed = await shared.list_memories(asked, everything(), 100)
    assert sorted(m.content for m in listed) == asked
    assert len(await shared.list_namespaces()) == 2000


async def test_search_over_namespaces_is_one_batch_request(
    shared: QdrantServerBackend, connection: QdrantConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = ["workspace:a", "team:b", "org:c"]
    for name in names:
        await shared.save_namespace(ns_record(name))
        await shared.upsert_memory(memory(name, pin=name == "org:c"), MemoryVectors(unit(1)))
    batches = await spy(monkeypatch, connection, "query_batch_points")
    singles = await spy(monkeypatch, connection, "query_points")
    scrolls = await spy(monkeypatch, connection, "scroll")
    hits = await shared.query_memories(names, dense(1), everything(), 10)
    assert hits[0].memory.namespace == "org:c"  # pinned first
    assert sorted(h.memory.namespace for h in hits) == sorted(names)
    assert len(batches) == 1
    assert len(batches[0][1]) == 2  # the pinned side and the unpinned side
    assert await shared.list_memories(names, everything(), 10)
    assert len(batches) == 2
    assert (singles, scrolls) == ([], [])


async def test_recreated_namespace_hides_memories_left_by_a_failed_purge(
    shared: QdrantServerBackend, connection: QdrantConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "workspace:phoenix"
    await shared.save_namespace(ns_record(name))
    old = [memory(name, content=f"old {i}") for i in range(3)]
    for written in old:
        await shared.upsert_memory(written, MemoryVectors(unit(1)))
    with monkeypatch.context() as patched:
        await fail_filter_deletes(patched, connection)
        assert await shared.delete_namespace(name) is True  # gone for callers all the same
        await shared.save_namespace(ns_record(name))
        assert await shared.get_memory(name, old[0].id) is None
        assert await shared.query_memories([name], dense(1), everything(), 10) == []
        assert await shared.list_memories([name], everything(), 10) == []
        assert await shared.delete_memory(name, old[1].id) is False
        again = memory(name, id=old[2].id, content="new life")
        await shared.upsert_memory(
            again, MemoryVectors(unit(0, 1))
        )  # same point id: replaces a leftover
        assert await shared.list_memories([name], everything(), 10) == [again]
        with pytest.raises(BackendUnavailable):
            await shared.maintain()  # the outage is still on
        assert await count(connection, MEMORIES) == 3
        assert await count(connection, RECORDS) == 3  # record, purge and generation points
    await shared.maintain()
    assert await count(connection, MEMORIES) == 1
    assert await count(connection, RECORDS) == 2  # the record and the name's generation
    assert await shared.list_memories([name], everything(), 10) == [again]


async def test_purge_points_survive_a_failure_and_maintain_finishes_them(
    shared: QdrantServerBackend, connection: QdrantConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f"team:t{i}" for i in range(3)]
    await seed(shared, names, memory)
    with monkeypatch.context() as patched:
        await fail_filter_deletes(patched, connection)
        for name in names[:2]:
            assert await shared.delete_namespace(name) is True
    assert await count(connection, MEMORIES) == 3
    raw = await client(connection)
    purges = await raw.scroll(
        RECORDS,
        models.Filter(
            must=[models.FieldCondition(key="type", match=models.MatchValue(value="purge"))]
        ),
    )
    assert sorted(p.payload["name"] for p in purges[0] if p.payload) == names[:2]
    assert [r.name for r in await shared.list_namespaces()] == names[2:]
    # A restarted process finds the purge points on its own.
    restarted = QdrantServerBackend(DIM, connection=connection)
    await restarted.start()
    await restarted.maintain()
    assert await count(connection, MEMORIES) == 1
    assert await count(connection, RECORDS) == 3  # one record, two names' generations
    assert [m.namespace for m in await restarted.list_memories(names, everything(), 10)] == [
        names[2]
    ]


async def test_maintain_never_purges_a_live_epoch(
    shared: QdrantServerBackend, connection: QdrantConnection
) -> None:
    """A purge point naming the live incarnation (a save racing a delete) purges nothing."""
    name = "org:alive"
    await shared.save_namespace(ns_record(name))
    kept = memory(name)
    await shared.upsert_memory(kept, MemoryVectors(unit(1)))
    raw = await client(connection)
    points, _ = await raw.scroll(RECORDS)
    [point] = points
    assert point.payload is not None
    epoch = point.payload["epoch"]
    stale = models.PointStruct(
        id=str(uuid.uuid4()),
        vector={},
        payload={"type": "purge", "epoch": epoch, "name": name},
    )
    await raw.upsert(RECORDS, [stale])
    await shared.maintain()
    assert await shared.get_memory(name, kept.id) == kept


async def test_expired_namespaces_scan_only_expiring_records(
    shared: QdrantServerBackend, connection: QdrantConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(20):
        await shared.save_namespace(ns_record(f"workspace:live{i}"))
    soon = NamespaceRecord(
        name="org:soon", kind="org", created_at=T0, expires_at=T0 + timedelta(seconds=1)
    )
    await shared.save_namespace(soon)
    scrolls = await spy(monkeypatch, connection, "scroll")
    assert await shared.expired_namespaces(T0 + timedelta(seconds=1)) == [soon]
    assert len(scrolls) == 1


async def test_expired_memories_go_in_one_count_and_one_delete(
    shared: QdrantServerBackend, connection: QdrantConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f"workspace:ttl{i}" for i in range(5)]
    expired = T0 - timedelta(seconds=1)
    await seed(
        shared,
        names,
        lambda name: memory(name, expires_at=expired),
        lambda name: memory(name, content="stays"),
    )
    counts = await spy(monkeypatch, connection, "count")
    deletes = await spy(monkeypatch, connection, "delete")
    assert await shared.delete_expired_memories(T0) == 5
    assert (len(counts), len(deletes)) == (1, 1)
    assert await shared.delete_expired_memories(T0) == 0
    assert (len(counts), len(deletes)) == (2, 1)
    past = MemoryFilter(now=T0 - timedelta(days=1))
    assert {m.content for m in await shared.list_memories(names, past, 50)} == {"stays"}


async def test_racing_first_saves_agree_on_one_incarnation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A first PUT that raced another (it too saw no record) must not replace the epoch.

    Two replicas creating one new namespace at once: with a random epoch per save,
    a memory written under the first would vanish behind the second.
    """
    backend = QdrantServerBackend(DIM, location=":memory:")
    await backend.start()
    name = "workspace:racing"
    record = NamespaceRecord(name=name, kind="workspace", created_at=T0)
    await backend.save_namespace(record)
    written = memory(name)
    await backend.upsert_memory(written, MemoryVectors(unit(1)))
    records = backend.records  # its namespace records part (tenant_namespaces.py)
    seen_before = records.live

    async def nothing_yet(asked: object) -> dict[str, object]:
        return {}

    monkeypatch.setattr(records, "live", nothing_yet)
    await backend.save_namespace(record)  # the racing replica's save
    monkeypatch.setattr(records, "live", seen_before)
    assert await backend.get_memory(name, written.id) == written
    # A delete still starts a new incarnation: the old memory stays invisible.
    assert await backend.delete_namespace(name) is True
    await backend.save_namespace(record)
    assert await backend.get_memory(name, written.id) is None
    await backend.close()
