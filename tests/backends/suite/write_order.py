"""A memory's place in its namespace's write order: kept with it, and given later."""

from __future__ import annotations

from dataclasses import replace

import pytest

from adapters.base import VectorBackend
from adapters.values import MemoryVectors
from adapters.values import SearchQuery
from tests.backends.suite.base import BackendCase
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit


class WriteOrderSuite(BackendCase):
    """`MemoryRecord.position` round-trips; `transfer.place_memories` sets it afterwards."""

    async def test_a_memorys_place_is_kept_with_it(self, backend: VectorBackend, ns: str) -> None:
        placed = memory(ns, content="placed", position=7)
        unplaced = memory(ns, content="unplaced")
        await backend.upsert_memory(placed, MemoryVectors(unit(1)))
        await backend.upsert_memory(unplaced, MemoryVectors(unit(0, 1)))
        assert await backend.get_memory(ns, placed.id) == placed
        assert await backend.get_memory(ns, unplaced.id) == unplaced
        hits = await backend.query_memories([ns], SearchQuery(unit(1)), everything(), 5)
        assert [(hit.memory.id, hit.memory.position) for hit in hits] == [
            (placed.id, 7),
            (unplaced.id, None),
        ]

    async def test_place_memories_places_held_memories_and_changes_nothing_else(
        self, backend: VectorBackend, ns: str
    ) -> None:
        assert backend.transfer is not None
        first = memory(ns, content="first", pin=True)
        second = memory(ns, content="second", position=3)
        await backend.upsert_memory(first, MemoryVectors(unit(1)))
        await backend.upsert_memory(second, MemoryVectors(unit(0, 1)))
        asked = [(first.id, 0), (second.id, 1), (memory(ns).id, 2)]  # the last is not held
        assert await backend.transfer.place_memories(ns, asked) == 3
        assert await backend.get_memory(ns, first.id) == replace(first, position=0)
        assert await backend.get_memory(ns, second.id) == replace(second, position=1)
        hits = await backend.query_memories([ns], SearchQuery(unit(0, 1)), everything(), 5)
        assert [hit.memory.id for hit in hits] == [first.id, second.id]  # pinned first
        assert hits[1].score == pytest.approx(1.0, abs=1e-3)  # its vector unchanged

    async def test_place_memories_in_a_missing_namespace_writes_nothing(
        self, backend: VectorBackend, ns: str
    ) -> None:
        assert backend.transfer is not None
        assert await backend.transfer.place_memories("org:missing", [("m", 0)]) == 1
        assert await backend.get_memory("org:missing", "m") is None
        assert await backend.transfer.place_memories(ns, []) == 0
