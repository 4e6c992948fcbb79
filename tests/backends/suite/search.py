"""Queries and listings: ranking, filters, pin order, limits, several namespaces."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest

from adapters.base import VectorBackend
from adapters.values import MemoryFilter
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import SearchQuery
from tests.backends.suite.base import BackendCase
from tests.support.records import T0
from tests.support.records import cosine
from tests.support.records import dense
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit


class SearchSuite(BackendCase):
    """Queries and listings: ranking, filters, pin order, limits, several namespaces."""

    async def test_query_ranks_by_cosine(self, backend: VectorBackend, ns: str) -> None:
        vectors = {"close": unit(1, 0.1), "middle": unit(1, 1), "far": unit(0, 1), "away": unit(-1)}
        written = {}
        for content, vector in vectors.items():
            written[content] = memory(ns, content=content)
            await backend.upsert_memory(written[content], MemoryVectors(vector))
        query = unit(1)
        hits = await backend.query_memories([ns], SearchQuery(query), everything(), 3)
        assert [h.memory.content for h in hits] == ["close", "middle", "far"]
        for hit in hits:
            assert hit.score == pytest.approx(cosine(query, vectors[hit.memory.content]), abs=1e-4)
        assert hits[0].memory == written["close"]

    async def test_filters_by_pin_and_kind(self, backend: VectorBackend, ns: str) -> None:
        rows = [
            ("pinned fact", True, "fact"),
            ("plain fact", False, "fact"),
            ("pinned summary", True, "summary"),
            ("plain checkpoint", False, "checkpoint"),
        ]
        for content, pin, kind in rows:
            await backend.upsert_memory(
                memory(ns, content=content, pin=pin, kind=kind), MemoryVectors(unit(1))
            )

        async def contents(memory_filter: MemoryFilter) -> set[str]:
            queried = await backend.query_memories([ns], dense(1), memory_filter, 10)
            listed = await backend.list_memories([ns], memory_filter, 10)
            assert {h.memory.content for h in queried} == {m.content for m in listed}
            return {m.content for m in listed}

        assert await contents(MemoryFilter(now=T0, pinned=True)) == {
            "pinned fact",
            "pinned summary",
        }
        assert await contents(MemoryFilter(now=T0, pinned=False)) == {
            "plain fact",
            "plain checkpoint",
        }
        assert await contents(MemoryFilter(now=T0, kinds=frozenset({"fact", "checkpoint"}))) == {
            "pinned fact",
            "plain fact",
            "plain checkpoint",
        }
        assert await contents(MemoryFilter(now=T0, pinned=True, kinds=frozenset({"summary"}))) == {
            "pinned summary"
        }

    async def test_listing_is_newest_first_and_limited(
        self, backend: VectorBackend, ns: str
    ) -> None:
        for minute in [3, 1, 4, 0, 2]:
            await backend.upsert_memory(
                memory(ns, content=f"m{minute}", created_at=T0 + timedelta(minutes=minute)),
                MemoryVectors(unit(1, minute)),
            )
        listed = await backend.list_memories([ns], everything(T0), 3)
        assert [m.content for m in listed] == ["m4", "m3", "m2"]

    async def test_many_memories_listing_and_query_limit(
        self, backend: VectorBackend, ns: str
    ) -> None:
        for index in range(150):
            await backend.upsert_memory(
                memory(ns, content=f"n{index}", created_at=T0 + timedelta(seconds=index)),
                MemoryVectors(unit(1, index / 150)),
            )
        listed = await backend.list_memories([ns], everything(), 100)
        assert [m.content for m in listed] == [f"n{i}" for i in range(149, 49, -1)]
        hits = await backend.query_memories([ns], dense(1), everything(), 100)
        assert len(hits) == 100
        assert [h.memory.content for h in hits[:3]] == ["n0", "n1", "n2"]
        assert all(a.score >= b.score for a, b in itertools.pairwise(hits))

    async def test_search_spans_namespaces_pinned_first(self, backend: VectorBackend) -> None:
        names = ["workspace:w1", "team:t1", "org:o1", "org:not-asked"]
        for name in names:
            await backend.save_namespace(NamespaceRecord(name=name, kind="org", created_at=T0))
        rows = [
            ("workspace:w1", "w1 close", False, unit(1, 0.1), 1),
            ("workspace:w1", "w1 pinned far", True, unit(-1, 1), 2),
            ("team:t1", "t1 closest", False, unit(1), 3),
            ("team:t1", "t1 pinned", True, unit(0, 1), 4),
            ("org:o1", "o1 middle", False, unit(1, 1), 5),
            ("org:not-asked", "never", True, unit(1), 6),
        ]
        for name, content, pin, vector, minute in rows:
            written = memory(
                name, content=content, pin=pin, created_at=T0 + timedelta(minutes=minute)
            )
            await backend.upsert_memory(written, MemoryVectors(vector))
        asked = ["workspace:w1", "team:t1", "org:o1", "org:missing"]
        hits = await backend.query_memories(asked, dense(1), everything(), 10)
        assert [h.memory.content for h in hits] == [
            "t1 pinned",
            "w1 pinned far",
            "t1 closest",
            "w1 close",
            "o1 middle",
        ]
        assert [h.memory.namespace for h in hits[:2]] == ["team:t1", "workspace:w1"]
        top = await backend.query_memories(asked, dense(1), everything(), 3)
        assert [h.memory.content for h in top] == ["t1 pinned", "w1 pinned far", "t1 closest"]
        listed = await backend.list_memories(asked, everything(), 4)
        assert [m.content for m in listed] == [
            "t1 pinned",
            "w1 pinned far",
            "o1 middle",
            "t1 closest",
        ]
        unpinned = MemoryFilter(now=T0, pinned=False)
        listed = await backend.list_memories(asked, unpinned, 10)
        assert [m.content for m in listed] == ["o1 middle", "t1 closest", "w1 close"]
