"""Both Qdrant server layouts in qdrant-client's local mode, and what the shared one promises.

Local mode needs no server, so this runs everywhere: the backend suite for the
shared layout (`QdrantServerBackend`) and the `collections` layout, then the
shared layout's own promises (thousands of namespaces, one request per search,
deletes that hold without the physical delete, the legacy-layout refusal) and
the migration between the two. What only a real server does (HTTP errors,
request shapes, payload indexes) is in test_qdrant_server_http.py.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest
from qdrant_client import AsyncQdrantClient
from qdrant_client.http import models

from adapters.base import MemoryFilter, NamespaceRecord, SearchQuery
from adapters.errors import BackendMisconfigured, BackendUnavailable
from adapters.qdrant import layout
from adapters.qdrant.migrate import copy_collections_to_shared
from adapters.qdrant.server import QdrantServerBackend, legacy_layout_line
from adapters.qdrant.server_calls import QdrantConnection
from adapters.qdrant.server_collections import QdrantCollectionsBackend
from tests.backends.suite import BackendSuite
from tests.backends.suite.hybrid import HybridSuite, KeywordIndexSuite
from tests.support.records import DIM, T0, dense, everything, memory, unit

MEMORIES, RECORDS = "memory-memories", "memory-namespaces"


class TestQdrantServerInMemory(BackendSuite, HybridSuite, KeywordIndexSuite):
    @pytest.fixture
    async def backend(self) -> AsyncIterator[QdrantServerBackend]:
        backend = QdrantServerBackend(DIM, location=":memory:")
        await backend.start()
        yield backend
        await backend.close()


class TestQdrantCollectionsInMemory(BackendSuite, HybridSuite, KeywordIndexSuite):
    @pytest.fixture
    async def backend(self) -> AsyncIterator[QdrantCollectionsBackend]:
        backend = QdrantCollectionsBackend(DIM, location=":memory:")
        await backend.start()
        yield backend
        await backend.close()


@pytest.fixture
async def connection() -> AsyncIterator[QdrantConnection]:
    """One local-mode store that several backends can share."""
    shared = QdrantConnection(location=":memory:")
    shared.open()
    yield shared
    await shared.close()


@pytest.fixture
async def shared(connection: QdrantConnection) -> QdrantServerBackend:
    backend = QdrantServerBackend(DIM, connection=connection)
    await backend.start()
    return backend


def client(connection: QdrantConnection) -> AsyncQdrantClient:
    found = connection._client
    assert found is not None
    return found


async def count(connection: QdrantConnection, collection: str) -> int:
    return (await client(connection).count(collection, exact=True)).count


def spy(
    monkeypatch: pytest.MonkeyPatch, connection: QdrantConnection, method: str
) -> list[tuple[Any, ...]]:
    """Record each call of the client's `method` (still made for real)."""
    calls: list[tuple[Any, ...]] = []
    real: Callable[..., Awaitable[Any]] = getattr(client(connection), method)

    async def recorded(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return await real(*args, **kwargs)

    monkeypatch.setattr(client(connection), method, recorded)
    return calls


def fail_filter_deletes(monkeypatch: pytest.MonkeyPatch, connection: QdrantConnection) -> None:
    """Every delete by filter in the memories collection times out (an outage mid-delete)."""
    real = client(connection).delete

    async def delete(collection: str, selector: Any, **kwargs: Any) -> Any:
        if collection == MEMORIES and isinstance(selector, models.FilterSelector):
            raise httpx.ReadTimeout("timed out")
        return await real(collection, selector, **kwargs)

    monkeypatch.setattr(client(connection), "delete", delete)


def ns_record(name: str) -> NamespaceRecord:
    return NamespaceRecord(name=name, kind=name.split(":")[0], created_at=T0)


async def test_thousands_of_namespaces(shared: QdrantServerBackend) -> None:
    names = [f"workspace:w{i:04d}" for i in range(2000)]
    for name in names:
        await shared.save_namespace(ns_record(name))
    await shared.upsert_memories([(memory(name, content=name), unit(1)) for name in names])
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
        await shared.upsert_memory(memory(name, pin=name == "org:c"), unit(1))
    batches = spy(monkeypatch, connection, "query_batch_points")
    singles = spy(monkeypatch, connection, "query_points")
    scrolls = spy(monkeypatch, connection, "scroll")
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
        await shared.upsert_memory(written, unit(1))
    with monkeypatch.context() as patched:
        fail_filter_deletes(patched, connection)
        assert await shared.delete_namespace(name) is True  # gone for callers all the same
        await shared.save_namespace(ns_record(name))
        assert await shared.get_memory(name, old[0].id) is None
        assert await shared.query_memories([name], dense(1), everything(), 10) == []
        assert await shared.list_memories([name], everything(), 10) == []
        assert await shared.delete_memory(name, old[1].id) is False
        again = memory(name, id=old[2].id, content="new life")
        await shared.upsert_memory(again, unit(0, 1))  # same point id: replaces a leftover
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
    for name in names:
        await shared.save_namespace(ns_record(name))
        await shared.upsert_memory(memory(name), unit(1))
    with monkeypatch.context() as patched:
        fail_filter_deletes(patched, connection)
        for name in names[:2]:
            assert await shared.delete_namespace(name) is True
    assert await count(connection, MEMORIES) == 3
    purges = await client(connection).scroll(
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
    await shared.upsert_memory(kept, unit(1))
    points, _ = await client(connection).scroll(RECORDS)
    [point] = points
    assert point.payload is not None
    epoch = point.payload["epoch"]
    stale = models.PointStruct(
        id=str(uuid.uuid4()),
        vector={},
        payload={"type": "purge", "epoch": epoch, "name": name},
    )
    await client(connection).upsert(RECORDS, [stale])
    await shared.maintain()
    assert await shared.get_memory(name, kept.id) == kept


async def test_legacy_layout_refuses_to_start(connection: QdrantConnection) -> None:
    legacy = QdrantCollectionsBackend(DIM, connection=connection)
    await legacy.start()
    for name in ["workspace:abc", "team:x"]:
        await legacy.save_namespace(ns_record(name))
    line = (
        "Qdrant holds 2 namespace collections in the per-namespace layout "
        "(e.g. memory-team~x); run 'memory-plugin-vector migrate-layout' to copy them "
        "into the shared layout, or set MEMORY_PLUGIN_QDRANT_LAYOUT=collections"
    )
    assert legacy_layout_line(["memory-team~x", "memory-workspace~abc"]) == line
    backend = QdrantServerBackend(DIM, connection=connection)
    with pytest.raises(BackendMisconfigured) as refused:
        await backend.start()
    assert str(refused.value) == line
    assert "\n" not in line
    with pytest.raises(BackendUnavailable, match="migrate-layout"):
        await backend.get_namespace("workspace:abc")
    assert await count(connection, "memory-workspace~abc") == 0
    assert {c.name for c in (await client(connection).get_collections()).collections} == {
        "memory-workspace~abc",
        "memory-team~x",
    }


async def test_wrong_dimension_refuses_to_start(connection: QdrantConnection) -> None:
    await QdrantServerBackend(DIM, connection=connection).start()
    with pytest.raises(BackendMisconfigured, match="memory-memories"):
        await QdrantServerBackend(DIM + 1, connection=connection).start()


async def test_start_tolerates_an_outage() -> None:
    backend = QdrantServerBackend(DIM, url="http://127.0.0.1:9", timeout_s=0.2)
    await backend.start()
    with pytest.raises(BackendUnavailable):
        await backend.ping()
    await backend.close()


async def stored_points(connection: QdrantConnection, collection: str) -> dict[Any, Any]:
    points, _ = await client(connection).scroll(collection, limit=10_000, with_vectors=True)
    return {p.id: (p.payload, p.vector) for p in points}


async def test_migration_copies_vectors_exactly_and_is_idempotent(
    connection: QdrantConnection,
) -> None:
    source = QdrantCollectionsBackend(DIM, connection=connection)
    await source.start()
    names = ["workspace:one", "team:two", "org:empty"]
    written: dict[str, list[Any]] = {name: [] for name in names}
    for index, name in enumerate(names):
        await source.save_namespace(
            NamespaceRecord(name=name, kind="org", created_at=T0, metadata={"i": index})
        )
    for i in range(7):
        for name in names[:2]:
            item = memory(
                name, content=f"{name} {i}", pin=i % 3 == 0, created_at=T0 + timedelta(seconds=i)
            )
            await source.upsert_memory(item, unit(1, i / 7, -i, 0.5))
            written[name].append(item)
    source_vectors = {
        (name, p.id): p.vector
        for name in names
        for p in (
            await client(connection).scroll(
                f"memory-{name.replace(':', '~')}", limit=100, with_vectors=True
            )
        )[0]
    }
    target = QdrantServerBackend(DIM, connection=connection)
    seen: list[tuple[str, int]] = []
    copied = await copy_collections_to_shared(
        source, target, progress=lambda name, n: seen.append((name, n)), batch_size=3
    )
    assert copied == (3, 14)
    assert sorted(seen) == sorted([("workspace:one", 7), ("team:two", 7), ("org:empty", 0)])
    for name in names:
        assert await target.get_namespace(name) == await source.get_namespace(name)
        assert await target.list_memories([name], everything(), 100) == await source.list_memories(
            [name], everything(), 100
        )
    target_points = await stored_points(connection, MEMORIES)
    assert len(target_points) == 14
    for (name, memory_id), vector in source_vectors.items():
        payload, copied_vector = target_points[layout.point_id(name, str(memory_id))]
        assert copied_vector == vector  # as stored, bit for bit
        assert payload["memory_id"] == memory_id
    query = unit(1, 0.3)
    for name in names[:2]:
        before = await source.query_memories([name], SearchQuery(query), everything(), 10)
        after = await target.query_memories([name], SearchQuery(query), everything(), 10)
        assert [(h.memory, h.score) for h in after] == [(h.memory, h.score) for h in before]

    records = await stored_points(connection, RECORDS)
    again = await copy_collections_to_shared(source, target, drop_source=True)
    assert again == (3, 14)
    assert await stored_points(connection, MEMORIES) == target_points
    assert await stored_points(connection, RECORDS) == records
    assert {c.name for c in (await client(connection).get_collections()).collections} == {
        MEMORIES,
        RECORDS,
    }
    fresh = QdrantServerBackend(DIM, connection=connection)
    await fresh.start()  # nothing of the old layout left to refuse
    assert [r.name for r in await fresh.list_namespaces()] == sorted(names)


async def test_expired_namespaces_scan_only_expiring_records(
    shared: QdrantServerBackend, connection: QdrantConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(20):
        await shared.save_namespace(ns_record(f"workspace:live{i}"))
    soon = NamespaceRecord(
        name="org:soon", kind="org", created_at=T0, expires_at=T0 + timedelta(seconds=1)
    )
    await shared.save_namespace(soon)
    scrolls = spy(monkeypatch, connection, "scroll")
    assert await shared.expired_namespaces(T0 + timedelta(seconds=1)) == [soon]
    assert len(scrolls) == 1


async def test_expired_memories_go_in_one_count_and_one_delete(
    shared: QdrantServerBackend, connection: QdrantConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f"workspace:ttl{i}" for i in range(5)]
    for name in names:
        await shared.save_namespace(ns_record(name))
        await shared.upsert_memory(memory(name, expires_at=T0 - timedelta(seconds=1)), unit(1))
        await shared.upsert_memory(memory(name, content="stays"), unit(1))
    counts = spy(monkeypatch, connection, "count")
    deletes = spy(monkeypatch, connection, "delete")
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
    await backend.upsert_memory(written, unit(1))
    records = backend._records
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
