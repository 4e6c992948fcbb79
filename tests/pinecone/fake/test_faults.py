"""The Pinecone fake's eventual consistency and injected faults, through the real SDK."""

from __future__ import annotations

import time

import pytest
from pinecone import ApiError
from pinecone import AsyncIndex
from pinecone import AsyncPinecone
from pinecone import PineconeConnectionError
from pinecone import PineconeTimeoutError
from pinecone import RateLimitError
from pinecone import ServiceError

from harness.clocks import ManualClock
from harness.pinecone_fake import FakePinecone
from tests.support.pinecone_sdk import KEY
from tests.support.pinecone_sdk import NS
from tests.support.pinecone_sdk import ROWS
from tests.support.pinecone_sdk import ids_of
from tests.support.pinecone_sdk import info
from tests.support.pinecone_sdk import upsert

# --- eventual consistency ---------------------------------------------------------------------


async def visible_ids(idx: AsyncIndex) -> list[str]:
    listed = ids_of(await idx.list_paginated(namespace=NS))
    fetched = sorted((await idx.fetch(ids=["a", "b", "c", "d"], namespace=NS)).vectors)
    queried = sorted(
        m.id for m in (await idx.query(vector=[1, 0, 0, 0], top_k=9, namespace=NS)).matches
    )
    counted = (await idx.describe_index_stats()).total_vector_count
    assert listed == fetched == queried
    assert counted == len(listed)
    return listed


async def test_writes_become_visible_only_after_the_delay(
    fake: FakePinecone, idx: AsyncIndex, ticks: ManualClock
) -> None:
    fake.visibility_delay_s = 1.0
    written = await idx.upsert(vectors=ROWS[:2], namespace=NS)
    assert await visible_ids(idx) == []
    ticks.advance(0.99)
    assert await visible_ids(idx) == []
    ticks.advance(0.01)
    assert await visible_ids(idx) == ["a", "b"]
    lsn = info(written).lsn_committed
    found = await idx.query(vector=[1, 0, 0, 0], top_k=1, namespace=NS)
    assert lsn is not None
    assert info(found).is_reconciled(lsn)

    await idx.delete(ids=["a"], namespace=NS)
    ticks.advance(0.5)
    assert await visible_ids(idx) == ["a", "b"]
    ticks.advance(0.5)
    assert await visible_ids(idx) == ["b"]


async def test_writes_apply_in_order_and_reconcile_all(
    fake: FakePinecone, idx: AsyncIndex, ticks: ManualClock
) -> None:
    fake.visibility_delay_s = 5.0
    await upsert(idx, ROWS[0])
    fake.visibility_delay_s = 0.0
    await upsert(idx, ROWS[1])  # due now, but queued behind the slower write
    found = await idx.query(vector=[1, 0, 0, 0], top_k=1, namespace=NS)
    assert found.matches == []
    assert not info(found).is_reconciled(1)
    assert sorted(fake.records(NS, committed=True)) == ["a", "b"]
    fake.reconcile_all()
    assert await visible_ids(idx) == ["a", "b"]


# --- faults ---------------------------------------------------------------------------------


async def test_429_with_retry_after_is_retried_by_the_sdk(
    fake: FakePinecone, idx: AsyncIndex, retry_sleeps: list[float]
) -> None:
    fake.fail_next("POST /query", 429, retry_after=2.0)
    await idx.query(vector=[1, 0, 0, 0], top_k=1, namespace=NS)
    assert fake.calls["POST /query"] == 2
    assert len(retry_sleeps) == 1
    assert 2.0 <= retry_sleeps[0] <= 3.0


async def test_retries_run_out_after_three(
    fake: FakePinecone, idx: AsyncIndex, retry_sleeps: list[float]
) -> None:
    fake.fail_next("*", 429, 429, 429, 429, retry_after=1)
    with pytest.raises(RateLimitError) as caught:
        await idx.describe_index_stats()
    assert caught.value.retry_after == 1.0
    assert len(retry_sleeps) == 3
    fake.fail_next("*", 500, 503, 503, 503, 200, 502)
    with pytest.raises(ServiceError, match="Service Unavailable"):
        await idx.fetch(ids=["a"], namespace=NS)
    assert fake.calls == {"POST /describe_index_stats": 4, "GET /vectors/fetch": 4}
    await upsert(idx, ROWS[0])  # the 200 spacer lets this one through...
    assert (await idx.fetch(ids=["a"], namespace=NS)).vectors  # ...and the 502 is retried
    assert fake.calls["GET /vectors/fetch"] == 6


async def test_400_is_not_retried_and_star_spares_the_control_plane(fake: FakePinecone) -> None:
    fake.fail_next("*", 400)
    async with AsyncPinecone(api_key=KEY) as pc, await pc.index(name="memories") as index:
        with pytest.raises(ApiError, match="Bad Request"):
            await index.describe_index_stats()
    assert fake.calls == {"GET /indexes/{name}": 1, "POST /describe_index_stats": 1}


async def test_hang_past_the_timeout_is_the_sdks_timeout_error(fake: FakePinecone) -> None:
    fake.hang("POST /query", 5.0)
    async with AsyncIndex(host=fake.host, api_key=KEY, timeout=0.2) as index:
        started = time.monotonic()
        with pytest.raises(PineconeTimeoutError):
            await index.query(vector=[1, 0, 0, 0], top_k=1, namespace=NS)
        assert 0.75 < time.monotonic() - started < 3.0  # four attempts of 0.2 s each
        assert fake.calls["POST /query"] == 4
        fake.hang("POST /query", 0.05)  # shorter than the timeout: slow but fine
        await index.query(vector=[1, 0, 0, 0], top_k=1, namespace=NS)
        fake.heal()
        await index.query(vector=[1, 0, 0, 0], top_k=1, namespace=NS)


async def test_refused_connections_until_healed(fake: FakePinecone, idx: AsyncIndex) -> None:
    fake.refuse("*")
    with pytest.raises(PineconeConnectionError, match="Connection refused"):
        await upsert(idx, ROWS[0])
    assert fake.calls["POST /vectors/upsert"] == 4
    assert fake.records(NS, committed=True) == {}
    fake.heal("*")
    await upsert(idx, ROWS[0])
    assert list(fake.records(NS)) == ["a"]
