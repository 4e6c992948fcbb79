"""Expiry: expired memories are never returned, and the sweep deletes them."""

from __future__ import annotations

from datetime import timedelta

from adapters.base import VectorBackend
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from tests.backends.suite.base import BackendCase
from tests.support.records import T0
from tests.support.records import dense
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit


class ForgetSuite(BackendCase):
    """Expiry: expired memories are never returned, and the sweep deletes them."""

    async def test_expired_memories_are_never_returned(
        self, backend: VectorBackend, ns: str
    ) -> None:
        await backend.upsert_memory(memory(ns, content="forever"), MemoryVectors(unit(1)))
        await backend.upsert_memory(
            memory(ns, content="gone", expires_at=T0 - timedelta(microseconds=1)),
            MemoryVectors(unit(1)),
        )
        await backend.upsert_memory(
            memory(ns, content="at the edge", expires_at=T0), MemoryVectors(unit(1))
        )
        await backend.upsert_memory(
            memory(ns, content="later", expires_at=T0 + timedelta(microseconds=1)),
            MemoryVectors(unit(1)),
        )
        listed = await backend.list_memories([ns], everything(T0), 10)
        queried = await backend.query_memories([ns], dense(1), everything(T0), 10)
        assert {m.content for m in listed} == {"forever", "later"}
        assert {h.memory.content for h in queried} == {"forever", "later"}

    async def test_delete_expired_memories(self, backend: VectorBackend, ns: str) -> None:
        keep = [
            memory(ns, content="no ttl"),
            memory(ns, content="future", expires_at=T0 + timedelta(days=1)),
        ]
        drop = [
            memory(ns, content=f"old{i}", expires_at=T0 - timedelta(seconds=i)) for i in range(3)
        ]
        for record in keep + drop:
            await backend.upsert_memory(record, MemoryVectors(unit(1)))
        assert await backend.delete_expired_memories(T0) == 3
        assert await backend.delete_expired_memories(T0) == 0
        remaining = await backend.list_memories([ns], everything(T0 - timedelta(days=9)), 10)
        assert sorted(m.content for m in remaining) == ["future", "no ttl"]

    async def test_delete_expired_memories_spans_namespaces(self, backend: VectorBackend) -> None:
        names = [f"workspace:exp{i}" for i in range(3)]
        for index, name in enumerate(names):
            await backend.save_namespace(
                NamespaceRecord(name=name, kind="workspace", created_at=T0)
            )
            await backend.upsert_memory(memory(name, content="keep"), MemoryVectors(unit(1)))
            if index != 1:
                await backend.upsert_memory(
                    memory(name, content="drop", expires_at=T0 - timedelta(seconds=1)),
                    MemoryVectors(unit(1)),
                )
        assert await backend.delete_expired_memories(T0) == 2
        past = everything(T0 - timedelta(days=1))
        for name in names:
            assert [m.content for m in await backend.list_memories([name], past, 10)] == ["keep"]
