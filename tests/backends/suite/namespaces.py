"""Namespace records: save, replace, list, expire, delete; the store's own metadata."""

from __future__ import annotations

from datetime import timedelta

import pytest

from adapters.base import VectorBackend
from adapters.errors import NamespaceGone
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from tests.backends.suite.base import BackendCase
from tests.support.records import T0
from tests.support.records import dense
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import new_id
from tests.support.records import unit


class NamespaceSuite(BackendCase):
    """Namespace records: save, replace, list, expire, delete; the store's own metadata."""

    async def test_ping_answers(self, backend: VectorBackend) -> None:
        await backend.ping()

    async def test_namespace_round_trip_and_replace(self, backend: VectorBackend) -> None:
        name = "team:alpha"
        assert await backend.get_namespace(name) is None
        first = NamespaceRecord(
            name=name,
            kind="team",
            created_at=T0,
            expires_at=T0 + timedelta(days=1),
            metadata={"owner": "ops", "nested": {"list": [1, 2.5, "x", None, True]}},
        )
        await backend.save_namespace(first)
        assert await backend.get_namespace(name) == first
        second = NamespaceRecord(name=name, kind="org", created_at=T0, metadata=None)
        await backend.save_namespace(second)
        assert await backend.get_namespace(name) == second
        assert [r for r in await backend.list_namespaces() if r.name == name] == [second]

    async def test_namespace_names_map_injectively(self, backend: VectorBackend) -> None:
        longest_a = "custom:" + "a" * 249
        longest_b = "custom:" + "a" * 248 + "b"
        names = ["org:a:b", "org:a.b", "org:a_b", "org:a-b", "org:A:b", longest_a, longest_b]
        assert len(longest_a) == 256
        for index, name in enumerate(names):
            await backend.save_namespace(
                NamespaceRecord(name=name, kind="custom", created_at=T0, metadata={"i": index})
            )
            await backend.upsert_memory(
                memory(name, content=f"in {name}"), MemoryVectors(unit(1, index))
            )
        for index, name in enumerate(names):
            record = await backend.get_namespace(name)
            assert record is not None
            assert record.metadata == {"i": index}
            listed = await backend.list_memories([name], everything(), 10)
            assert [m.content for m in listed] == [f"in {name}"]
        listed_names = {r.name for r in await backend.list_namespaces()}
        assert set(names) <= listed_names

    async def test_delete_namespace_drops_its_memories(
        self, backend: VectorBackend, ns: str
    ) -> None:
        await backend.upsert_memory(memory(ns), MemoryVectors(unit(1)))
        assert await backend.delete_namespace(ns) is True
        assert await backend.get_namespace(ns) is None
        assert await backend.delete_namespace(ns) is False
        await backend.save_namespace(NamespaceRecord(name=ns, kind="workspace", created_at=T0))
        assert await backend.list_memories([ns], everything(), 100) == []

    async def test_recreated_namespace_never_shows_old_memories(
        self, backend: VectorBackend, ns: str
    ) -> None:
        old = memory(ns, content="old")
        await backend.upsert_memory(old, MemoryVectors(unit(1)))
        assert await backend.delete_namespace(ns) is True
        assert await backend.get_memory(ns, old.id) is None
        await backend.save_namespace(NamespaceRecord(name=ns, kind="workspace", created_at=T0))
        assert await backend.get_memory(ns, old.id) is None
        assert await backend.query_memories([ns], dense(1), everything(), 10) == []
        assert await backend.delete_memory(ns, old.id) is False
        again = memory(ns, id=old.id, content="new life")
        await backend.upsert_memory(again, MemoryVectors(unit(0, 1)))
        assert await backend.list_memories([ns], everything(), 10) == [again]
        await backend.maintain()
        assert await backend.list_memories([ns], everything(), 10) == [again]

    async def test_get_namespaces_returns_those_that_exist(
        self, backend: VectorBackend, ns: str
    ) -> None:
        other = NamespaceRecord(name="team:gamma", kind="team", created_at=T0, metadata={"k": 1})
        await backend.save_namespace(other)
        found = await backend.get_namespaces([ns, "team:gamma", "org:absent"])
        assert dict(found) == {ns: await backend.get_namespace(ns), "team:gamma": other}
        assert dict(await backend.get_namespaces([])) == {}

    async def test_expired_namespaces(self, backend: VectorBackend) -> None:
        soon = NamespaceRecord(
            name="org:soon", kind="org", created_at=T0, expires_at=T0 + timedelta(seconds=1)
        )
        later = NamespaceRecord(
            name="org:later", kind="org", created_at=T0, expires_at=T0 + timedelta(days=1)
        )
        never = NamespaceRecord(name="org:never", kind="org", created_at=T0)
        for record in (soon, later, never):
            await backend.save_namespace(record)
        assert await backend.expired_namespaces(T0) == []
        assert await backend.expired_namespaces(T0 + timedelta(seconds=1)) == [soon]

    async def test_missing_namespace_reads_empty(self, backend: VectorBackend) -> None:
        assert await backend.list_memories(["org:none"], everything(), 10) == []
        assert await backend.query_memories(["org:none"], dense(1), everything(), 10) == []
        assert await backend.delete_memory("org:none", new_id()) is False

    async def test_upsert_into_missing_namespace_is_gone(self, backend: VectorBackend) -> None:
        with pytest.raises(NamespaceGone):
            await backend.upsert_memory(memory("org:never-created"), MemoryVectors(unit(1)))

    async def test_store_meta_round_trip(self, backend: VectorBackend, ns: str) -> None:
        """The store-wide facts (the embedding fingerprint) are kept apart from namespaces."""
        assert dict(await backend.store_meta.read_store_meta()) == {}
        await backend.store_meta.write_store_meta("embedding", "all-MiniLM-L6-v2/torch")
        await backend.store_meta.write_store_meta("other", "value")
        await backend.store_meta.write_store_meta("embedding", "all-MiniLM-L6-v2/onnx-int8")
        assert dict(await backend.store_meta.read_store_meta()) == {
            "embedding": "all-MiniLM-L6-v2/onnx-int8",
            "other": "value",
        }
        assert [record.name for record in await backend.list_namespaces()] == [ns]
