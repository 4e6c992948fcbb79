"""`iter_memories`, which export reads: every live memory once, with its vector."""

from __future__ import annotations

from datetime import timedelta

import pytest

from adapters.base import VectorBackend
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from tests.backends.suite.base import BackendCase
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import memory
from tests.support.records import unit


class ExportSuite(BackendCase):
    """`iter_memories`, which export reads: every live memory once, with its vector."""

    async def test_iter_memories_yields_every_live_memory_once_with_its_vector(
        self, backend: VectorBackend, ns: str
    ) -> None:
        other = "team:neighbour"
        await backend.save_namespace(NamespaceRecord(name=other, kind="team", created_at=T0))
        written = {
            m.id: (m, unit(1, index / 120, (index % 7) / 7))
            for index in range(120)
            for m in [memory(ns, content=f"c{index}", pin=index % 5 == 0)]
        }
        expired = memory(ns, content="expired", expires_at=T0)
        later = memory(ns, content="later", expires_at=T0 + timedelta(seconds=1))
        written[later.id] = (later, unit(0, 0, 1))
        batch = [*written.values(), (expired, unit(1)), (memory(other), unit(1))]
        assert await backend.transfer.upsert_memories(batch) == len(batch)
        pages = [page async for page in backend.transfer.iter_memories(ns, T0, page_size=50)]
        assert all(pages)  # no empty page (a store may serve fresh writes in one)
        streamed = [item for page in pages for item in page]
        assert len(streamed) == len(written)
        for found, vector in streamed:
            expected, expected_vector = written[found.id]
            assert found == expected
            assert vector == pytest.approx(expected_vector, abs=1e-5)
        bare = [item async for page in backend.transfer.iter_memories(ns, T0) for item in page]
        assert sorted(m.id for m, _ in bare) == sorted(written)
        assert {len(v) for _, v in bare} == {DIM}
        ids_only = [
            v
            async for page in backend.transfer.iter_memories(ns, T0, with_vectors=False)
            for _, v in page
        ]
        assert ids_only == [[]] * len(written)

    async def test_iter_memories_sees_only_the_current_incarnation(
        self, backend: VectorBackend, ns: str
    ) -> None:
        assert [page async for page in backend.transfer.iter_memories("org:missing", T0)] == []
        await backend.upsert_memory(memory(ns, content="old life"), MemoryVectors(unit(1)))
        assert await backend.delete_namespace(ns) is True
        assert [page async for page in backend.transfer.iter_memories(ns, T0)] == []
        await backend.save_namespace(NamespaceRecord(name=ns, kind="workspace", created_at=T0))
        again = memory(ns, content="new life")
        await backend.upsert_memory(again, MemoryVectors(unit(0, 1)))
        pages = [page async for page in backend.transfer.iter_memories(ns, T0)]
        assert [[m for m, _ in page] for page in pages] == [[again]]
