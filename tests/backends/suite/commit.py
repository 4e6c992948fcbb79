"""Writing memories: what is stored is read back, ids replace, deletes stay in their namespace."""

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


class CommitSuite(BackendCase):
    """Writes and deletes, read back the same by every backend."""

    async def test_memory_round_trip_keeps_every_field(
        self, backend: VectorBackend, ns: str
    ) -> None:
        written = memory(
            ns,
            content="deploys happen on Tuesdays ✓",
            kind="summary",
            source="user",
            pin=True,
            expires_at=T0 + timedelta(hours=1, microseconds=7),
            propagation={"to": ["team:a"], "depth": 2, "why": None},
        )
        await backend.upsert_memory(written, MemoryVectors(unit(1)))
        assert await backend.get_memory(ns, written.id) == written
        assert await backend.get_memory(ns, new_id()) is None
        assert await backend.get_memory("org:missing", written.id) is None

    async def test_a_memory_is_read_back_with_its_stored_vector(
        self, backend: VectorBackend, ns: str
    ) -> None:
        """What lets a commit of unchanged content skip the model (plugin/core/service.py)."""
        written = memory(ns, content="stored with its vector")
        await backend.upsert_memory(written, MemoryVectors(unit(1, 0.5, -0.25)))
        found = await backend.get_stored_memory(ns, written.id)
        assert found is not None
        assert found[0] == written
        assert found[1] == pytest.approx(unit(1, 0.5, -0.25), abs=1e-5)
        assert await backend.get_stored_memory(ns, new_id()) is None
        assert await backend.get_stored_memory("org:missing", written.id) is None
        assert await backend.delete_memory(ns, written.id) is True
        assert await backend.get_stored_memory(ns, written.id) is None

    async def test_upsert_with_same_id_replaces_in_place(
        self, backend: VectorBackend, ns: str
    ) -> None:
        first = memory(ns, content="first")
        await backend.upsert_memory(first, MemoryVectors(unit(1)))
        second = memory(ns, id=first.id, content="second", pin=True)
        await backend.upsert_memory(second, MemoryVectors(unit(0, 1)))
        assert await backend.list_memories([ns], everything(), 100) == [second]
        hits = await backend.query_memories([ns], dense(0, 1), everything(), 10)
        assert [(h.memory, round(h.score, 4)) for h in hits] == [(second, 1.0)]

    async def test_a_batch_writes_each_memory_and_fails_only_those_of_a_missing_namespace(
        self, backend: VectorBackend, ns: str
    ) -> None:
        other = "team:batch"
        await backend.save_namespace(NamespaceRecord(name=other, kind="team", created_at=T0))
        mine, theirs = memory(ns, content="mine"), memory(other, content="theirs")
        lost = memory("org:never-created", content="lost")
        replaced = memory(ns, id=mine.id, content="mine again", pin=True)
        failed = await backend.upsert_batch(
            [
                (mine, MemoryVectors(unit(1))),
                (lost, MemoryVectors(unit(1))),
                (theirs, MemoryVectors(unit(0, 1))),
            ]
        )
        assert [type(error) for error in failed] == [type(None), NamespaceGone, type(None)]
        assert await backend.get_memory(ns, mine.id) == mine
        assert await backend.get_memory(other, theirs.id) == theirs
        assert await backend.get_memory("org:never-created", lost.id) is None
        assert await backend.upsert_batch([(replaced, MemoryVectors(unit(0, 1)))]) == [None]
        assert await backend.list_memories([ns], everything(), 10) == [replaced]
        assert await backend.upsert_batch([]) == []

    async def test_same_id_in_two_namespaces_is_two_memories(
        self, backend: VectorBackend, ns: str
    ) -> None:
        other = "team:beta"
        await backend.save_namespace(NamespaceRecord(name=other, kind="team", created_at=T0))
        shared_id = new_id()
        await backend.upsert_memory(
            memory(ns, id=shared_id, content="mine"), MemoryVectors(unit(1))
        )
        await backend.upsert_memory(
            memory(other, id=shared_id, content="theirs"), MemoryVectors(unit(1))
        )
        mine = await backend.get_memory(ns, shared_id)
        theirs = await backend.get_memory(other, shared_id)
        assert (mine and mine.content, theirs and theirs.content) == ("mine", "theirs")
        assert await backend.delete_memory(other, shared_id) is True
        assert await backend.get_memory(ns, shared_id) == mine

    async def test_delete_memory_only_in_its_namespace(
        self, backend: VectorBackend, ns: str
    ) -> None:
        written = memory(ns)
        await backend.upsert_memory(written, MemoryVectors(unit(1)))
        assert await backend.delete_memory("org:elsewhere", written.id) is False
        assert await backend.delete_memory(ns, new_id()) is False
        assert await backend.delete_memory(ns, written.id) is True
        assert await backend.get_memory(ns, written.id) is None
        assert await backend.delete_memory(ns, written.id) is False

    async def test_upsert_memories_replaces_by_id_across_namespaces(
        self, backend: VectorBackend, ns: str
    ) -> None:
        other = "org:batch"
        await backend.save_namespace(NamespaceRecord(name=other, kind="org", created_at=T0))
        first = memory(ns, content="first")
        elsewhere = memory(other, id=first.id, content="same id elsewhere")
        assert await backend.transfer.upsert_memories([(first, unit(1)), (elsewhere, unit(1))]) == 2
        second = memory(ns, id=first.id, content="second", pin=True)
        assert await backend.transfer.upsert_memories([(second, unit(0, 1))]) == 1
        assert await backend.list_memories([ns], everything(), 10) == [second]
        assert await backend.get_memory(other, first.id) == elsewhere
        hits = await backend.query_memories([ns], dense(0, 1), everything(), 10)
        assert [(h.memory, round(h.score, 4)) for h in hits] == [(second, 1.0)]
        assert await backend.transfer.upsert_memories([]) == 0
        with pytest.raises(NamespaceGone):
            await backend.transfer.upsert_memories([(memory("org:never-created"), unit(1))])
