"""The backend test suite: the same calls against every `VectorBackend`.

Each backend's test module subclasses `BackendSuite` and provides a `backend`
fixture (fsspec's abstract-test pattern). Vectors here are small synthetic
ones: adapters take vectors, and the real model is exercised by the API tests.
"""

from __future__ import annotations

import itertools
import math
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from adapters.base import MemoryFilter, MemoryRecord, NamespaceRecord, SearchQuery, VectorBackend
from adapters.errors import NamespaceGone

DIM = 8
T0 = datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=UTC)


def unit(*components: float) -> list[float]:
    """A unit vector of DIM dimensions starting with `components`."""
    padded = list(components) + [0.0] * (DIM - len(components))
    norm = math.sqrt(sum(c * c for c in padded))
    return [c / norm for c in padded]


def dense(*components: float) -> SearchQuery:
    """A dense-only search for the unit vector `unit(*components)`."""
    return SearchQuery(dense=unit(*components))


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def new_id() -> str:
    return str(uuid.uuid4())


def memory(namespace: str, **overrides: object) -> MemoryRecord:
    fields: dict[str, object] = {
        "id": new_id(),
        "namespace": namespace,
        "content": "user prefers tabs over spaces",
        "kind": "fact",
        "source": "agent",
        "created_at": T0,
    }
    fields.update(overrides)
    return MemoryRecord(**fields)  # type: ignore[arg-type]


def everything(now: datetime = T0) -> MemoryFilter:
    return MemoryFilter(now=now)


class BackendSuite:
    """Behaviour every backend must share. Subclasses provide `backend`."""

    @pytest.fixture
    async def ns(self, backend: VectorBackend) -> str:
        name = "workspace:550e8400-e29b-41d4-a716-446655440000"
        await backend.save_namespace(NamespaceRecord(name=name, kind="workspace", created_at=T0))
        return name

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
            await backend.upsert_memory(memory(name, content=f"in {name}"), unit(1, index))
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
        await backend.upsert_memory(memory(ns), unit(1))
        assert await backend.delete_namespace(ns) is True
        assert await backend.get_namespace(ns) is None
        assert await backend.delete_namespace(ns) is False
        await backend.save_namespace(NamespaceRecord(name=ns, kind="workspace", created_at=T0))
        assert await backend.list_memories([ns], everything(), 100) == []

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
        await backend.upsert_memory(written, unit(1))
        assert await backend.get_memory(ns, written.id) == written
        assert await backend.get_memory(ns, new_id()) is None
        assert await backend.get_memory("org:missing", written.id) is None

    async def test_a_memory_is_read_back_with_its_stored_vector(
        self, backend: VectorBackend, ns: str
    ) -> None:
        """What lets a commit of unchanged content skip the model (plugin/core/service.py)."""
        written = memory(ns, content="stored with its vector")
        await backend.upsert_memory(written, unit(1, 0.5, -0.25))
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
        await backend.upsert_memory(first, unit(1))
        second = memory(ns, id=first.id, content="second", pin=True)
        await backend.upsert_memory(second, unit(0, 1))
        assert await backend.list_memories([ns], everything(), 100) == [second]
        hits = await backend.query_memories([ns], dense(0, 1), everything(), 10)
        assert [(h.memory, round(h.score, 4)) for h in hits] == [(second, 1.0)]

    async def test_same_id_in_two_namespaces_is_two_memories(
        self, backend: VectorBackend, ns: str
    ) -> None:
        other = "team:beta"
        await backend.save_namespace(NamespaceRecord(name=other, kind="team", created_at=T0))
        shared_id = new_id()
        await backend.upsert_memory(memory(ns, id=shared_id, content="mine"), unit(1))
        await backend.upsert_memory(memory(other, id=shared_id, content="theirs"), unit(1))
        mine = await backend.get_memory(ns, shared_id)
        theirs = await backend.get_memory(other, shared_id)
        assert (mine and mine.content, theirs and theirs.content) == ("mine", "theirs")
        assert await backend.delete_memory(other, shared_id) is True
        assert await backend.get_memory(ns, shared_id) == mine

    async def test_query_ranks_by_cosine(self, backend: VectorBackend, ns: str) -> None:
        vectors = {"close": unit(1, 0.1), "middle": unit(1, 1), "far": unit(0, 1), "away": unit(-1)}
        written = {}
        for content, vector in vectors.items():
            written[content] = memory(ns, content=content)
            await backend.upsert_memory(written[content], vector)
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
            await backend.upsert_memory(memory(ns, content=content, pin=pin, kind=kind), unit(1))

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

    async def test_expired_memories_are_never_returned(
        self, backend: VectorBackend, ns: str
    ) -> None:
        await backend.upsert_memory(memory(ns, content="forever"), unit(1))
        await backend.upsert_memory(
            memory(ns, content="gone", expires_at=T0 - timedelta(microseconds=1)), unit(1)
        )
        await backend.upsert_memory(memory(ns, content="at the edge", expires_at=T0), unit(1))
        await backend.upsert_memory(
            memory(ns, content="later", expires_at=T0 + timedelta(microseconds=1)), unit(1)
        )
        listed = await backend.list_memories([ns], everything(T0), 10)
        queried = await backend.query_memories([ns], dense(1), everything(T0), 10)
        assert {m.content for m in listed} == {"forever", "later"}
        assert {h.memory.content for h in queried} == {"forever", "later"}

    async def test_listing_is_newest_first_and_limited(
        self, backend: VectorBackend, ns: str
    ) -> None:
        for minute in [3, 1, 4, 0, 2]:
            await backend.upsert_memory(
                memory(ns, content=f"m{minute}", created_at=T0 + timedelta(minutes=minute)),
                unit(1, minute),
            )
        listed = await backend.list_memories([ns], everything(T0), 3)
        assert [m.content for m in listed] == ["m4", "m3", "m2"]

    async def test_delete_memory_only_in_its_namespace(
        self, backend: VectorBackend, ns: str
    ) -> None:
        written = memory(ns)
        await backend.upsert_memory(written, unit(1))
        assert await backend.delete_memory("org:elsewhere", written.id) is False
        assert await backend.delete_memory(ns, new_id()) is False
        assert await backend.delete_memory(ns, written.id) is True
        assert await backend.get_memory(ns, written.id) is None
        assert await backend.delete_memory(ns, written.id) is False

    async def test_delete_expired_memories(self, backend: VectorBackend, ns: str) -> None:
        keep = [
            memory(ns, content="no ttl"),
            memory(ns, content="future", expires_at=T0 + timedelta(days=1)),
        ]
        drop = [
            memory(ns, content=f"old{i}", expires_at=T0 - timedelta(seconds=i)) for i in range(3)
        ]
        for record in keep + drop:
            await backend.upsert_memory(record, unit(1))
        assert await backend.delete_expired_memories(T0) == 3
        assert await backend.delete_expired_memories(T0) == 0
        remaining = await backend.list_memories([ns], everything(T0 - timedelta(days=9)), 10)
        assert sorted(m.content for m in remaining) == ["future", "no ttl"]

    async def test_upsert_into_missing_namespace_is_gone(self, backend: VectorBackend) -> None:
        with pytest.raises(NamespaceGone):
            await backend.upsert_memory(memory("org:never-created"), unit(1))

    async def test_missing_namespace_reads_empty(self, backend: VectorBackend) -> None:
        assert await backend.list_memories(["org:none"], everything(), 10) == []
        assert await backend.query_memories(["org:none"], dense(1), everything(), 10) == []
        assert await backend.delete_memory("org:none", new_id()) is False

    async def test_many_memories_listing_and_query_limit(
        self, backend: VectorBackend, ns: str
    ) -> None:
        for index in range(150):
            await backend.upsert_memory(
                memory(ns, content=f"n{index}", created_at=T0 + timedelta(seconds=index)),
                unit(1, index / 150),
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
            await backend.upsert_memory(written, vector)
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

    async def test_recreated_namespace_never_shows_old_memories(
        self, backend: VectorBackend, ns: str
    ) -> None:
        old = memory(ns, content="old")
        await backend.upsert_memory(old, unit(1))
        assert await backend.delete_namespace(ns) is True
        assert await backend.get_memory(ns, old.id) is None
        await backend.save_namespace(NamespaceRecord(name=ns, kind="workspace", created_at=T0))
        assert await backend.get_memory(ns, old.id) is None
        assert await backend.query_memories([ns], dense(1), everything(), 10) == []
        assert await backend.delete_memory(ns, old.id) is False
        again = memory(ns, id=old.id, content="new life")
        await backend.upsert_memory(again, unit(0, 1))
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

    async def test_delete_expired_memories_spans_namespaces(self, backend: VectorBackend) -> None:
        names = [f"workspace:exp{i}" for i in range(3)]
        for index, name in enumerate(names):
            await backend.save_namespace(
                NamespaceRecord(name=name, kind="workspace", created_at=T0)
            )
            await backend.upsert_memory(memory(name, content="keep"), unit(1))
            if index != 1:
                await backend.upsert_memory(
                    memory(name, content="drop", expires_at=T0 - timedelta(seconds=1)), unit(1)
                )
        assert await backend.delete_expired_memories(T0) == 2
        past = everything(T0 - timedelta(days=1))
        for name in names:
            assert [m.content for m in await backend.list_memories([name], past, 10)] == ["keep"]

    # -- bulk transfer: iter_memories and upsert_memories (export, import) -------------

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
        assert await backend.upsert_memories(batch) == len(batch)
        pages = [page async for page in backend.iter_memories(ns, T0, page_size=50)]
        assert all(pages)  # no empty page (a store may serve fresh writes in one)
        streamed = [item for page in pages for item in page]
        assert len(streamed) == len(written)
        for found, vector in streamed:
            expected, expected_vector = written[found.id]
            assert found == expected
            assert vector == pytest.approx(expected_vector, abs=1e-5)
        bare = [item async for page in backend.iter_memories(ns, T0) for item in page]
        assert sorted(m.id for m, _ in bare) == sorted(written)
        assert {len(v) for _, v in bare} == {DIM}
        ids_only = [
            v async for page in backend.iter_memories(ns, T0, with_vectors=False) for _, v in page
        ]
        assert ids_only == [[]] * len(written)

    async def test_iter_memories_sees_only_the_current_incarnation(
        self, backend: VectorBackend, ns: str
    ) -> None:
        assert [page async for page in backend.iter_memories("org:missing", T0)] == []
        await backend.upsert_memory(memory(ns, content="old life"), unit(1))
        assert await backend.delete_namespace(ns) is True
        assert [page async for page in backend.iter_memories(ns, T0)] == []
        await backend.save_namespace(NamespaceRecord(name=ns, kind="workspace", created_at=T0))
        again = memory(ns, content="new life")
        await backend.upsert_memory(again, unit(0, 1))
        pages = [page async for page in backend.iter_memories(ns, T0)]
        assert [[m for m, _ in page] for page in pages] == [[again]]

    async def test_upsert_memories_replaces_by_id_across_namespaces(
        self, backend: VectorBackend, ns: str
    ) -> None:
        other = "org:batch"
        await backend.save_namespace(NamespaceRecord(name=other, kind="org", created_at=T0))
        first = memory(ns, content="first")
        elsewhere = memory(other, id=first.id, content="same id elsewhere")
        assert await backend.upsert_memories([(first, unit(1)), (elsewhere, unit(1))]) == 2
        second = memory(ns, id=first.id, content="second", pin=True)
        assert await backend.upsert_memories([(second, unit(0, 1))]) == 1
        assert await backend.list_memories([ns], everything(), 10) == [second]
        assert await backend.get_memory(other, first.id) == elsewhere
        hits = await backend.query_memories([ns], dense(0, 1), everything(), 10)
        assert [(h.memory, round(h.score, 4)) for h in hits] == [(second, 1.0)]
        assert await backend.upsert_memories([]) == 0
        with pytest.raises(NamespaceGone):
            await backend.upsert_memories([(memory("org:never-created"), unit(1))])

    async def test_store_meta_round_trip(self, backend: VectorBackend, ns: str) -> None:
        """The store-wide facts (the embedding fingerprint) are kept apart from namespaces."""
        assert dict(await backend.read_store_meta()) == {}
        await backend.write_store_meta("embedding", "all-MiniLM-L6-v2/torch")
        await backend.write_store_meta("other", "value")
        await backend.write_store_meta("embedding", "all-MiniLM-L6-v2/onnx-int8")
        assert dict(await backend.read_store_meta()) == {
            "embedding": "all-MiniLM-L6-v2/onnx-int8",
            "other": "value",
        }
        assert [record.name for record in await backend.list_namespaces()] == [ns]
