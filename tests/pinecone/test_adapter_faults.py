"""The Pinecone adapter under faults and at start-up: retries, budgets, limits, bad indexes.

All through the real SDK against the HTTP-level fake in harness/pinecone_fake.py.
"""

from __future__ import annotations

import time

import pytest

from adapters.errors import BackendMisconfigured
from adapters.errors import BackendRejected
from adapters.errors import BackendUnavailable
from adapters.pinecone import PineconeBackend
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from harness.clocks import ManualClock
from harness.pinecone_backend import NS
from harness.pinecone_backend import QUERY
from harness.pinecone_backend import UPSERT
from harness.pinecone_backend import pinecone_backend
from harness.pinecone_fake import FakePinecone
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import dense
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit

# -- faults ----------------------------------------------------------------------------


async def test_429_then_success_is_retried_once(
    backend: PineconeBackend, fake: FakePinecone
) -> None:
    fake.fail_next(UPSERT, 429)
    written = memory(NS)
    await backend.upsert_memory(written, MemoryVectors(unit(1)))
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
        await backend.upsert_memory(written, MemoryVectors(unit(1)))
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
        await backend.upsert_memory(memory(NS, content="x" * 41_000), MemoryVectors(unit(1)))
    assert fake.calls[UPSERT] == before
    assert fake.records(f"memory-{NS}", committed=True) == {}


async def test_write_shapes_carry_no_nulls_and_serialised_propagation(
    backend: PineconeBackend, fake: FakePinecone
) -> None:
    written = memory(NS, propagation={"to": ["team:x"], "depth": 1})
    await backend.upsert_memory(written, MemoryVectors(unit(1)))
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
