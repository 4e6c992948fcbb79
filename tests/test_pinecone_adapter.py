"""What only the Pinecone adapter does: freshness, faults, start-up checks, metadata limits.

All through the real SDK against the HTTP-level fake in tests/pinecone_fake.py.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import pytest

from adapters.base import NamespaceRecord
from adapters.errors import BackendMisconfigured, BackendRejected, BackendUnavailable
from adapters.pinecone import PineconeBackend
from tests.backend_suite import DIM, T0, everything, memory, unit
from tests.pinecone_fake import FakePinecone, ManualClock

NS = "workspace:w1"
UPSERT = "POST /vectors/upsert"
QUERY = "POST /query"


@pytest.fixture
def ticks() -> ManualClock:
    return ManualClock(1000.0)


@pytest.fixture
def fake(ticks: ManualClock) -> Iterator[FakePinecone]:
    with FakePinecone(dimension=DIM, clock=ticks).mocked() as fake:
        yield fake


def make_backend(fake: FakePinecone, ticks: ManualClock, **options: object) -> PineconeBackend:
    settings: dict[str, object] = {"index_name": fake.name, "timeout_s": 1.0, "clock": ticks}
    settings.update(options)
    return PineconeBackend(DIM, api_key=fake.api_key, **settings)  # type: ignore[arg-type]


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

    assert [h.memory for h in await backend.query_memories(NS, unit(1), everything(), 5)] == [
        written
    ]
    assert await backend.list_memories(NS, everything(), 5) == [written]
    assert await backend.get_memory(NS, written.id) == written

    ticks.advance(6.0)  # Pinecone caught up; the overlay still holds it: one hit, not two
    assert list(fake.records(f"memory-{NS}")) == [written.id]
    assert await backend.list_memories(NS, everything(), 5) == [written]
    ticks.advance(30.0)  # out of the window: Pinecone alone answers
    assert len(backend.overlay) == 0
    assert await backend.list_memories(NS, everything(), 5) == [written]


async def test_an_update_and_a_forget_are_seen_at_once(
    backend: PineconeBackend, fake: FakePinecone, ticks: ManualClock
) -> None:
    original = memory(NS, content="first")
    await backend.upsert_memory(original, unit(1))
    fake.visibility_delay_s = 5.0
    updated = memory(NS, id=original.id, content="second")
    await backend.upsert_memory(updated, unit(1))
    assert fake.records(f"memory-{NS}")[original.id][1]["content"] == "first"
    assert [h.memory for h in await backend.query_memories(NS, unit(1), everything(), 5)] == [
        updated
    ]

    assert await backend.delete_memory(NS, original.id) is True
    assert original.id in fake.records(f"memory-{NS}")  # still in Pinecone's reads
    assert await backend.query_memories(NS, unit(1), everything(), 5) == []
    assert await backend.list_memories(NS, everything(), 5) == []
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
    assert await backend.list_memories(NS, everything(), 5) == []
    assert await backend.query_memories(NS, unit(1), everything(), 5) == []


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
    listed = await backend.list_memories(NS, everything(), 100)
    assert [m.content for m in listed] == [f"n{i}" for i in range(1199, 1099, -1)]


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
        await backend.query_memories(NS, unit(1), everything(), 5)
    assert time.monotonic() - started < 0.5
    assert fake.calls[QUERY] == 1


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
    assert await backend.list_memories(NS, everything(), 5) == []


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
        await backend.query_memories(NS, unit(1), everything(), 5)
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
        ({"metric": "dotproduct"}, "metric 'dotproduct'; the plugin needs 'cosine'"),
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


async def test_a_host_alone_is_enough(fake: FakePinecone, ticks: ManualClock) -> None:
    store = PineconeBackend(DIM, api_key=fake.api_key, host=fake.host, clock=ticks)
    await store.start()
    await store.ping()
    assert fake.calls["GET /indexes/{name}"] == 0
    await store.close()


async def test_unreachable_at_start_boots_then_recovers(
    fake: FakePinecone, ticks: ManualClock
) -> None:
    fake.refuse("*")
    store = PineconeBackend(DIM, api_key=fake.api_key, host=fake.host, timeout_s=0.3, clock=ticks)
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
