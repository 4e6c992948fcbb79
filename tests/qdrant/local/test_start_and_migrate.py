"""The Qdrant server layouts' start-up refusals and the migration between them, in local mode."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from adapters.errors import BackendMisconfigured
from adapters.errors import BackendUnavailable
from adapters.qdrant import layout
from adapters.qdrant.server.connection import QdrantConnection
from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.tenant_collections import legacy_layout_line
from adapters.qdrant.server.tenants import QdrantServerBackend
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import SearchQuery
from plugin.commands.migrate_layout import copy_collections_to_shared
from tests.support.qdrant_local import MEMORIES
from tests.support.qdrant_local import RECORDS
from tests.support.qdrant_local import client
from tests.support.qdrant_local import collection_names
from tests.support.qdrant_local import count
from tests.support.qdrant_local import ns_record
from tests.support.qdrant_local import stored_points
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit


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
    assert await collection_names(connection) == {"memory-workspace~abc", "memory-team~x"}


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
            await source.upsert_memory(item, MemoryVectors(unit(1, i / 7, -i, 0.5)))
            written[name].append(item)
    raw = await client(connection)
    source_vectors = {
        (name, p.id): p.vector
        for name in names
        for p in (
            await raw.scroll(f"memory-{name.replace(':', '~')}", limit=100, with_vectors=True)
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
    assert await collection_names(connection) == {MEMORIES, RECORDS}
    fresh = QdrantServerBackend(DIM, connection=connection)
    await fresh.start()  # nothing of the old layout left to refuse
    assert [r.name for r in await fresh.list_namespaces()] == sorted(names)
