"""What only the Pinecone adapter does: read-your-writes freshness, and searches over namespaces.

Faults and start-up checks: test_adapter_faults.py; the `backend` fixture: conftest.py.

All through the real SDK against the HTTP-level fake in harness/pinecone_fake.py.
"""

from __future__ import annotations

from datetime import timedelta

from adapters.pinecone import PineconeBackend
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from harness.clocks import ManualClock
from harness.pinecone_backend import DELETE
from harness.pinecone_backend import FETCH
from harness.pinecone_backend import NS
from harness.pinecone_backend import QUERY
from harness.pinecone_backend import RECORDS
from harness.pinecone_backend import adapter_backend
from harness.pinecone_fake import FakePinecone
from tests.support.records import T0
from tests.support.records import dense
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit

# -- read-your-writes ------------------------------------------------------------------


async def test_a_write_is_read_back_before_pinecone_shows_it(
    backend: PineconeBackend, fake: FakePinecone, ticks: ManualClock
) -> None:
    fake.visibility_delay_s = 5.0
    written = memory(NS)
    await backend.upsert_memory(written, MemoryVectors(unit(1)))
    assert fake.records(f"memory-{NS}") == {}  # Pinecone itself does not show it yet

    assert [h.memory for h in await backend.query_memories([NS], dense(1), everything(), 5)] == [
        written
    ]
    assert await backend.list_memories([NS], everything(), 5) == [written]
    assert await backend.get_memory(NS, written.id) == written

    ticks.advance(6.0)  # Pinecone caught up; the overlay still holds it: one hit, not two
    assert list(fake.records(f"memory-{NS}")) == [written.id]
    assert await backend.list_memories([NS], everything(), 5) == [written]
    ticks.advance(30.0)  # out of the window: Pinecone alone answers
    assert len(backend.overlay) == 0
    assert await backend.list_memories([NS], everything(), 5) == [written]


async def test_an_update_and_a_forget_are_seen_at_once(
    backend: PineconeBackend, fake: FakePinecone, ticks: ManualClock
) -> None:
    original = memory(NS, content="first")
    await backend.upsert_memory(original, MemoryVectors(unit(1)))
    fake.visibility_delay_s = 5.0
    updated = memory(NS, id=original.id, content="second")
    await backend.upsert_memory(updated, MemoryVectors(unit(1)))
    assert fake.records(f"memory-{NS}")[original.id][1]["content"] == "first"
    assert [h.memory for h in await backend.query_memories([NS], dense(1), everything(), 5)] == [
        updated
    ]

    assert await backend.delete_memory(NS, original.id) is True
    assert original.id in fake.records(f"memory-{NS}")  # still in Pinecone's reads
    assert await backend.query_memories([NS], dense(1), everything(), 5) == []
    assert await backend.list_memories([NS], everything(), 5) == []
    assert await backend.get_memory(NS, original.id) is None


async def test_a_recreated_namespace_never_shows_the_old_memories(
    backend: PineconeBackend, fake: FakePinecone
) -> None:
    await backend.upsert_memory(memory(NS, content="before"), MemoryVectors(unit(1)))
    fake.visibility_delay_s = 3600.0  # the namespace delete never lands during the test
    assert await backend.delete_namespace(NS) is True
    assert await backend.get_namespace(NS) is None
    await backend.save_namespace(NamespaceRecord(name=NS, kind="workspace", created_at=T0))
    assert len(fake.records(f"memory-{NS}")) == 1  # the old vector is still there
    assert await backend.list_memories([NS], everything(), 5) == []
    assert await backend.query_memories([NS], dense(1), everything(), 5) == []


async def test_the_overlay_is_bounded(fake: FakePinecone, ticks: ManualClock) -> None:
    store = adapter_backend(fake, ticks, overlay_max_entries=100)
    await store.start()
    await store.save_namespace(NamespaceRecord(name=NS, kind="workspace", created_at=T0))
    for index in range(150):
        await store.upsert_memory(memory(NS, content=f"m{index}"), MemoryVectors(unit(1)))
    assert len(store.overlay) == 100
    assert store.overlay.evicted_early == 51  # 150 memories + 1 namespace record - 100
    await store.close()


async def test_listing_beyond_one_query_is_exact(backend: PineconeBackend) -> None:
    for index in range(1200):
        created = T0 + timedelta(seconds=index)
        await backend.upsert_memory(
            memory(NS, content=f"n{index}", created_at=created), MemoryVectors(unit(1))
        )
    listed = await backend.list_memories([NS], everything(), 100)
    assert [m.content for m in listed] == [f"n{i}" for i in range(1199, 1099, -1)]


# -- several namespaces ----------------------------------------------------------------


async def test_a_search_asks_each_namespace_and_side_once_and_merges_pinned_first(
    backend: PineconeBackend, fake: FakePinecone, ticks: ManualClock
) -> None:
    team = "team:t1"
    await backend.save_namespace(NamespaceRecord(name=team, kind="team", created_at=T0))

    def row(name: str, content: str, pin: bool, minute: int) -> MemoryRecord:
        return memory(name, content=content, pin=pin, created_at=T0 + timedelta(minutes=minute))

    await backend.upsert_memory(row(NS, "w pinned far", True, 2), MemoryVectors(unit(-1, 1)))
    await backend.upsert_memory(row(NS, "w close", False, 5), MemoryVectors(unit(1, 0.1)))
    ticks.advance(31.0)  # Pinecone shows those; the overlay has forgotten them
    fake.visibility_delay_s = 3600.0  # the team's memories exist only in the overlay
    await backend.upsert_memory(row(team, "t pinned", True, 4), MemoryVectors(unit(0, 1)))
    await backend.upsert_memory(row(team, "t closest", False, 3), MemoryVectors(unit(1)))
    ticks.advance(2.0)  # past the record cache: the search reads the records again
    asked = [NS, team, "org:missing"]
    queries, fetches = fake.calls[QUERY], fake.calls[FETCH]

    hits = await backend.query_memories(asked, dense(1), everything(), 3)

    assert [h.memory.content for h in hits] == ["t pinned", "w pinned far", "t closest"]
    assert fake.calls[QUERY] - queries == 4  # 2 live namespaces x 2 pin sides
    assert fake.calls[FETCH] - fetches == 1  # every record at once; none for memories
    (records_fetch,) = [r for r in fake.requests[-5:] if r.url.path == "/vectors/fetch"]
    assert set(records_fetch.url.params.get_list("ids")) == set(asked)
    listed = await backend.list_memories(asked, everything(), 3)
    assert [m.content for m in listed] == ["t pinned", "w pinned far", "w close"]
    pinned = await backend.list_memories(asked, MemoryFilter(now=T0, pinned=True), 10)
    assert [m.content for m in pinned] == ["t pinned", "w pinned far"]
    assert fake.calls[QUERY] - queries == 4 + 4 + 2


async def test_get_namespaces_is_one_fetch_and_sees_recent_saves_and_deletes(
    backend: PineconeBackend, fake: FakePinecone, ticks: ManualClock
) -> None:
    names = [f"team:t{index}" for index in range(5)]
    saved = {name: NamespaceRecord(name=name, kind="team", created_at=T0) for name in names}
    for record in saved.values():
        await backend.save_namespace(record)
    ticks.advance(31.0)  # overlay and cache have forgotten them: Pinecone answers
    before = fake.calls[FETCH]
    found = await backend.get_namespaces([*names, "org:absent", names[0]])
    assert dict(found) == saved
    assert fake.calls[FETCH] == before + 1
    assert sorted(fake.requests[-1].url.params.get_list("ids")) == sorted([*names, "org:absent"])

    fake.visibility_delay_s = 3600.0  # Pinecone will not show the next writes
    await backend.delete_namespace(names[0])
    fresh = NamespaceRecord(name="org:fresh", kind="org", created_at=T0, metadata={"new": 1})
    await backend.save_namespace(fresh)
    assert names[0] in fake.records(RECORDS)  # Pinecone still shows the deleted one
    assert "org:fresh" not in fake.records(RECORDS)  # and not yet the new one
    ticks.advance(2.0)  # past the record cache, well within the overlay's window
    before = fake.calls[FETCH]
    found = await backend.get_namespaces([names[0], names[1], "org:fresh"])
    assert dict(found) == {names[1]: saved[names[1]], "org:fresh": fresh}
    assert fake.calls[FETCH] == before + 1
    assert fake.requests[-1].url.params.get_list("ids") == [names[1]]  # the overlay knew the rest
    assert dict(await backend.get_namespaces([names[0], "org:fresh"])) == {"org:fresh": fresh}
    assert fake.calls[FETCH] == before + 1


async def test_expiry_sweeps_every_live_namespace(
    backend: PineconeBackend, fake: FakePinecone, ticks: ManualClock
) -> None:
    names = ["team:a", "team:b", "team:c", "team:gone"]
    for name in names:
        await backend.save_namespace(NamespaceRecord(name=name, kind="team", created_at=T0))
    past = T0 - timedelta(seconds=1)
    for name in ("team:a", "team:a", "team:gone"):
        await backend.upsert_memory(
            memory(name, content="drop", expires_at=past), MemoryVectors(unit(1))
        )
    ticks.advance(31.0)  # Pinecone shows those; the overlay has forgotten them
    fake.visibility_delay_s = 3600.0  # from here on, only the overlay shows writes
    await backend.upsert_memory(
        memory("team:b", content="drop", expires_at=past), MemoryVectors(unit(1))
    )
    for name in ("team:a", "team:b"):
        await backend.upsert_memory(memory(name, content="keep"), MemoryVectors(unit(1)))
    await backend.delete_namespace("team:gone")  # Pinecone still lists it, with its memory
    queries, deletes = len(fake.bodies[QUERY]), fake.calls[DELETE]

    assert await backend.delete_expired_memories(T0) == 3

    swept = [body["namespace"] for body in fake.bodies[QUERY][queries:]]
    assert sorted(swept) == [f"memory-{name}" for name in sorted([NS, *names[:3]])]
    assert fake.calls[DELETE] - deletes == 2  # only where something expired
    assert await backend.delete_expired_memories(T0) == 0  # Pinecone still shows team:a's
    for name in ("team:a", "team:b"):
        kept = await backend.list_memories([name], everything(past), 10)
        assert [m.content for m in kept] == ["keep"]
    fake.reconcile_all()  # the filter deletes land after the writes before them
    for name in ("team:a", "team:b"):
        stored = fake.records(f"memory-{name}").values()
        assert [meta["content"] for _, meta, _ in stored if meta] == ["keep"]
