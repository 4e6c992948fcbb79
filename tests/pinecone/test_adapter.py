"""What only the Pinecone adapter does: freshness, faults, start-up checks, metadata limits.

All through the real SDK against the HTTP-level fake in tests/support/pinecone_fake.py.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from adapters.base import MemoryFilter, MemoryRecord, NamespaceRecord
from adapters.errors import BackendMisconfigured, BackendRejected, BackendUnavailable
from adapters.pinecone import PineconeBackend
from tests.support.clocks import ManualClock
from tests.support.pinecone import pinecone_backend
from tests.support.pinecone_fake import FakePinecone
from tests.support.records import DIM, T0, dense, everything, memory, unit

NS = "workspace:w1"
UPSERT = "POST /vectors/upsert"
QUERY = "POST /query"
FETCH = "GET /vectors/fetch"
DELETE = "POST /vectors/delete"
RECORDS = "memory-~namespaces"


def make_backend(fake: FakePinecone, ticks: ManualClock, **options: object) -> PineconeBackend:
    return pinecone_backend(fake, **{"timeout_s": 1.0, "clock": ticks, **options})


@pytest.fixture
async def backend(fake: FakePinecone, ticks: ManualClock) -> AsyncIterator[PineconeBackend]:
    store = make_backend(fake, ticks, freshness_window_s=30.0)
    await store.start()
    await store.save_namespace(NamespaceRecord(name=NS, kind="workspace", created_at=T0))
    yield store
    await store.close()


# -- read-your-writes ------------------------------------------------------------------


async def test_a_write_is_read_back_before_pinecone_shows_it(
    backend: PineconeBackend, fake: FakePinecone, ticks: ManualClock
) -> None:
    fake.visibility_delay_s = 5.0
    written = memory(NS)
    await backend.upsert_memory(written, unit(1))
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
    await backend.upsert_memory(original, unit(1))
    fake.visibility_delay_s = 5.0
    updated = memory(NS, id=original.id, content="second")
    await backend.upsert_memory(updated, unit(1))
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
    await backend.upsert_memory(memory(NS, content="before"), unit(1))
    fake.visibility_delay_s = 3600.0  # the namespace delete never lands during the test
    assert await backend.delete_namespace(NS) is True
    assert await backend.get_namespace(NS) is None
    await backend.save_namespace(NamespaceRecord(name=NS, kind="workspace", created_at=T0))
    assert len(fake.records(f"memory-{NS}")) == 1  # the old vector is still there
    assert await backend.list_memories([NS], everything(), 5) == []
    assert await backend.query_memories([NS], dense(1), everything(), 5) == []


async def test_the_overlay_is_bounded(fake: FakePinecone, ticks: ManualClock) -> None:
    store = make_backend(fake, ticks, overlay_max_entries=100)
    await store.start()
    await store.save_namespace(NamespaceRecord(name=NS, kind="workspace", created_at=T0))
    for index in range(150):
        await store.upsert_memory(memory(NS, content=f"m{index}"), unit(1))
    assert len(store.overlay) == 100
    assert store.overlay.evicted_early == 51  # 150 memories + 1 namespace record - 100
    await store.close()


async def test_listing_beyond_one_query_is_exact(backend: PineconeBackend) -> None:
    for index in range(1200):
        created = T0 + timedelta(seconds=index)
        await backend.upsert_memory(memory(NS, content=f"n{index}", created_at=created), unit(1))
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

    await backend.upsert_memory(row(NS, "w pinned far", True, 2), unit(-1, 1))
    await backend.upsert_memory(row(NS, "w close", False, 5), unit(1, 0.1))
    ticks.advance(31.0)  # Pinecone shows those; the overlay has forgotten them
    fake.visibility_delay_s = 3600.0  # the team's memories exist only in the overlay
    await backend.upsert_memory(row(team, "t pinned", True, 4), unit(0, 1))
    await backend.upsert_memory(row(team, "t closest", False, 3), unit(1))
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
        await backend.upsert_memory(memory(name, content="drop", expires_at=past), unit(1))
    ticks.advance(31.0)  # Pinecone shows those; the overlay has forgotten them
    fake.visibility_delay_s = 3600.0  # from here on, only the overlay shows writes
    await backend.upsert_memory(memory("team:b", content="drop", expires_at=past), unit(1))
    for name in ("team:a", "team:b"):
        await backend.upsert_memory(memory(name, content="keep"), unit(1))
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


# -- faults ----------------------------------------------------------------------------


async def test_429_then_success_is_retried_once(
    backend: PineconeBackend, fake: FakePinecone
) -> None:
    fake.fail_next(UPSERT, 429)
    written = memory(NS)
    await backend.upsert_memory(written, unit(1))
    assert fake.calls[UPSERT] == 3  # namespace record, the 429, the retry: no SDK retries
    assert await backend.get_memory(NS, written.id) == written


async def test_retry_after_beyond_the_budget_fails_fast(
    backend: PineconeBackend, fake: FakePinecone
) -> None:
    fake.fail_next(QUERY, 429, retry_after=30)
    started = time.monotonic()
    with pytest.raises(BackendUnavailable, match="429"):
        await backend.query_memories([NS], dense(1), everything(), 5)
    assert time.monotonic() - started < 0.5
    assert fake.calls[QUERY] == 2  # one query per pin side, and no retry of the 429


async def test_repeated_500s_give_unavailable_and_write_nothing(
    backend: PineconeBackend, fake: FakePinecone
) -> None:
    fake.fail_next(UPSERT, *[500] * 50)
    written = memory(NS)
    started = time.monotonic()
    with pytest.raises(BackendUnavailable, match="500"):
        await backend.upsert_memory(written, unit(1))
    assert time.monotonic() - started < 1.2
    assert fake.calls[UPSERT] >= 3
    assert fake.records(f"memory-{NS}", committed=True) == {}
    fake.heal()
    assert await backend.get_memory(NS, written.id) is None
    assert await backend.list_memories([NS], everything(), 5) == []


@pytest.mark.parametrize("fault", ["hang", "refuse"])
async def test_a_dead_connection_is_unavailable_within_the_budget(
    backend: PineconeBackend, fake: FakePinecone, fault: str
) -> None:
    if fault == "hang":
        fake.hang(QUERY, 10.0)
    else:
        fake.refuse(QUERY)
    started = time.monotonic()
    with pytest.raises(BackendUnavailable):
        await backend.query_memories([NS], dense(1), everything(), 5)
    assert time.monotonic() - started < 1.5


async def test_metadata_over_the_limit_is_refused_before_any_write(
    backend: PineconeBackend, fake: FakePinecone
) -> None:
    before = fake.calls[UPSERT]
    with pytest.raises(BackendRejected, match=r"40960-byte metadata limit"):
        await backend.upsert_memory(memory(NS, content="x" * 41_000), unit(1))
    assert fake.calls[UPSERT] == before
    assert fake.records(f"memory-{NS}", committed=True) == {}


async def test_write_shapes_carry_no_nulls_and_serialised_propagation(
    backend: PineconeBackend, fake: FakePinecone
) -> None:
    written = memory(NS, propagation={"to": ["team:x"], "depth": 1})
    await backend.upsert_memory(written, unit(1))
    (vector,) = fake.bodies[UPSERT][-1]["vectors"]
    assert vector["id"] == written.id
    assert fake.bodies[UPSERT][-1]["namespace"] == f"memory-{NS}"
    assert None not in vector["metadata"].values()
    assert vector["metadata"]["propagation"] == '{"depth":1,"to":["team:x"]}'
    assert "expires_at" not in vector["metadata"]


# -- start-up checks --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        ({"api_key": "another-key"}, "refused the API key"),
        ({"index_exists": False}, r"does not exist \(check PINECONE_INDEX\)"),
        ({"dimension": DIM + 1}, f"dimension {DIM + 1} but the embedding model produces {DIM}"),
        ({"metric": "euclidean"}, "metric 'euclidean'; the plugin needs 'cosine' or 'dotproduct'"),
    ],
)
async def test_a_misconfigured_index_ends_start_up(
    fake: FakePinecone, ticks: ManualClock, breakage: dict[str, object], message: str
) -> None:
    for key, value in breakage.items():
        setattr(fake, key, value)
    store = PineconeBackend(
        DIM,
        api_key="test-api-key",
        index_name=fake.name,
        timeout_s=1.0,
        clock=ticks,
    )
    with pytest.raises(BackendMisconfigured, match=message):
        await store.start()
    await store.close()


async def test_hybrid_search_needs_a_dotproduct_index(
    fake: FakePinecone, ticks: ManualClock
) -> None:
    store = pinecone_backend(fake, hybrid=True)
    with pytest.raises(BackendMisconfigured) as refused:
        await store.start()
    await store.close()
    assert str(refused.value) == (
        "MEMORY_PLUGIN_SEARCH=hybrid needs a Pinecone index with metric 'dotproduct', not"
        " 'cosine': create one and copy the memories into it with `memory-plugin-vector"
        " export` and `import`, or unset MEMORY_PLUGIN_SEARCH"
    )


async def test_a_host_alone_is_enough(fake: FakePinecone, ticks: ManualClock) -> None:
    store = pinecone_backend(fake, host=fake.host, clock=ticks)
    await store.start()
    await store.ping()
    assert fake.calls["GET /indexes/{name}"] == 0
    await store.close()


async def test_unreachable_at_start_boots_then_recovers(
    fake: FakePinecone, ticks: ManualClock
) -> None:
    fake.refuse("*")
    store = pinecone_backend(fake, host=fake.host, timeout_s=0.3, clock=ticks)
    await store.start()  # does not raise: the server boots during an outage
    with pytest.raises(BackendUnavailable):
        await store.ping()
    fake.heal()
    ticks.advance(2.0)
    await store.ping()
    await store.close()


async def test_listing_namespaces_pages_through_records(
    backend: PineconeBackend, fake: FakePinecone, ticks: ManualClock
) -> None:
    names = [f"team:t{index:03d}" for index in range(150)]
    for name in names:
        await backend.save_namespace(NamespaceRecord(name=name, kind="team", created_at=T0))
    fake.visibility_delay_s = 3600.0
    await backend.delete_namespace("team:t000")  # recent: Pinecone still lists it
    ticks.advance(1.0)
    listed = [record.name for record in await backend.list_namespaces()]
    assert listed == sorted([*names[1:], NS])
    assert fake.calls["GET /vectors/list"] == 2  # 151 records, 100 per page
