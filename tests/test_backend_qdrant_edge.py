"""The backend suite against the embedded qdrant-edge store, plus what only it does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.base import NamespaceRecord
from adapters.qdrant_edge import QdrantEdgeBackend
from tests.backend_suite import DIM, T0, BackendSuite, everything, memory, unit


class TestQdrantEdge(BackendSuite):
    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[QdrantEdgeBackend]:
        store = QdrantEdgeBackend(DIM, tmp_path, max_open_shards=3)
        await store.start()
        yield store
        await store.close()


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
    assert await reopened.list_memories("org:acme", everything(), 10) == [written]
    await reopened.close()


async def test_more_namespaces_than_open_shards(tmp_path: Path) -> None:
    store = QdrantEdgeBackend(DIM, tmp_path, max_open_shards=2)
    await store.start()
    names = [f"workspace:w{i}" for i in range(7)]
    for name in names:
        await store.save_namespace(NamespaceRecord(name=name, kind="workspace", created_at=T0))
        await store.upsert_memory(memory(name, content=name), unit(1))
    for name in reversed(names):
        assert [m.content for m in await store.list_memories(name, everything(), 10)] == [name]
    assert len(store._pool.open_paths()) <= 2
    await store.maintain()
    await store.close()


async def test_interrupted_creation_and_delete_are_cleaned_at_start(tmp_path: Path) -> None:
    root = tmp_path / "namespaces"
    (root / "memory-org~half").mkdir(parents=True)
    (root / ".trash-0123").mkdir()
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    assert await store.list_namespaces() == []
    assert sorted(p.name for p in root.iterdir()) == []
    await store.close()


async def test_maintain_vacuums_after_many_changes(tmp_path: Path) -> None:
    store = QdrantEdgeBackend(DIM, tmp_path)
    await store.start()
    await store.save_namespace(NamespaceRecord(name="org:busy", kind="org", created_at=T0))
    written = memory("org:busy")
    for index in range(1001):
        await store.upsert_memory(
            memory("org:busy", id=written.id, content=f"v{index}"), unit(1, index)
        )
    await store.maintain()
    assert [m.content for m in await store.list_memories("org:busy", everything(), 5)] == ["v1000"]
    await store.close()
