"""The Pinecone fake's control and data planes, driven only through the real pinecone 10.2.0 SDK.

Every answer the fake gives must decode through the SDK's own models and error mapping, so
these tests prove the wire shapes, not just the fake's bookkeeping. Its rules: test_rules.py;
consistency and faults: test_faults.py; the fixtures: conftest.py.
"""

from __future__ import annotations

import pytest
from pinecone import ApiError
from pinecone import AsyncIndex
from pinecone import AsyncPinecone
from pinecone import NotFoundError
from pinecone import UnauthorizedError
from pinecone.models.indexes.deployment import ManagedDeployment
from pinecone.models.indexes.schema import DenseVectorField

from harness.clocks import ManualClock
from harness.pinecone_fake import DEFAULT_NAMESPACE
from harness.pinecone_fake import FakePinecone
from tests.support.pinecone_sdk import KEY
from tests.support.pinecone_sdk import NS
from tests.support.pinecone_sdk import ROWS
from tests.support.pinecone_sdk import ids_of
from tests.support.pinecone_sdk import upsert

# --- control plane ------------------------------------------------------------------------


async def test_describe_decodes_into_index_model(fake: FakePinecone) -> None:
    async with AsyncPinecone(api_key=KEY) as pc:
        model = await pc.indexes.describe("memories")
    assert model.host == fake.host
    assert model.status.ready is True
    [dense] = [f for f in model.schema.fields.values() if isinstance(f, DenseVectorField)]
    assert (dense.dimension, dense.metric) == (4, "cosine")
    assert isinstance(model.deployment, ManagedDeployment)
    assert (model.deployment.cloud, model.deletion_protection) == ("aws", "disabled")
    sent = fake.requests[0]
    assert sent.url == "https://api.pinecone.io/indexes/memories"
    assert sent.headers["Api-Key"] == KEY
    assert sent.headers["X-Pinecone-Api-Version"] == "2026-07"


async def test_metric_is_configurable_for_the_start_up_check(ticks: ManualClock) -> None:
    with FakePinecone(dimension=2, metric="dotproduct", clock=ticks).mocked():
        async with AsyncPinecone(api_key=KEY) as pc:
            model = await pc.indexes.describe("memories")
    assert (model.dimension, model.metric) == (2, "dotproduct")


@pytest.mark.parametrize("name", ["other", "memories"])
async def test_describe_unknown_index_is_not_found(fake: FakePinecone, name: str) -> None:
    fake.index_exists = name == "other"
    async with AsyncPinecone(api_key=KEY) as pc:
        with pytest.raises(NotFoundError, match=f"Resource {name} not found"):
            await pc.indexes.describe(name)


async def test_index_by_name_resolves_the_data_plane_host(fake: FakePinecone) -> None:
    async with AsyncPinecone(api_key=KEY) as pc, await pc.index(name="memories") as index:
        assert index.host == fake.host
        await index.upsert(vectors=[("a", [1, 0, 0, 0])])
    assert fake.calls == {"GET /indexes/{name}": 1, "POST /vectors/upsert": 1}


async def test_wrong_api_key_is_unauthorized_on_both_planes(fake: FakePinecone) -> None:
    async with AsyncPinecone(api_key="nope") as pc:
        with pytest.raises(UnauthorizedError, match="Invalid API Key"):
            await pc.indexes.describe("memories")
    async with AsyncIndex(host=fake.host, api_key="nope") as index:
        with pytest.raises(UnauthorizedError, match="Invalid API Key") as caught:
            await index.describe_index_stats()
    assert caught.value.status_code == 401


async def test_other_hosts_are_not_mocked(fake: FakePinecone) -> None:
    async with AsyncIndex(host="https://else-1.svc.pinecone.io", api_key=KEY) as index:
        with pytest.raises(AssertionError, match="not mocked"):
            await index.describe_index_stats()


# --- upsert / fetch / query -----------------------------------------------------------------


async def test_upsert_and_fetch_round_trip_like_pinecone(
    fake: FakePinecone, idx: AsyncIndex
) -> None:
    written = await idx.upsert(
        vectors=[("a", [0.1, 0.123456789, 0, 1], {"year": 2020, "tags": ["x"], "ok": True})],
        namespace=NS,
    )
    assert written.upserted_count == 1
    got = await idx.fetch(ids=["a", "missing"], namespace=NS)
    assert list(got.vectors) == ["a"]
    assert got.vectors["a"].values == [0.1, 0.12345679, 0.0, 1.0]  # stored as float32
    assert got.vectors["a"].metadata == {"year": 2020.0, "tags": ["x"], "ok": True}
    assert isinstance(got.vectors["a"].metadata["year"], float)  # numbers come back as floats
    assert fake.bodies["POST /vectors/upsert"][0]["namespace"] == NS
    assert fake.requests[-1].url.params.get_list("ids") == ["a", "missing"]


async def test_fetch_from_a_missing_namespace_is_empty(idx: AsyncIndex) -> None:
    assert (await idx.fetch(ids=["a"], namespace="nowhere")).vectors == {}


async def test_query_ranks_by_cosine_with_deterministic_ties(idx: AsyncIndex) -> None:
    await upsert(
        idx,
        ("far", [0, 1, 0, 0], {}),
        ("near", [1, 1, 0, 0], {"k": "v"}),
        ("tie-b", [2, 0, 0, 0], {}),
        ("tie-a", [1, 0, 0, 0], {}),
    )
    found = await idx.query(vector=[1, 0, 0, 0], top_k=3, namespace=NS)
    assert [(m.id, m.score) for m in found.matches] == [
        ("tie-a", 1.0),
        ("tie-b", 1.0),
        ("near", pytest.approx(0.70710677)),
    ]
    assert all(m.values == [] and m.metadata is None for m in found.matches)
    full = await idx.query(
        vector=[1, 0, 0, 0], top_k=4, namespace=NS, include_values=True, include_metadata=True
    )
    assert [m.id for m in full.matches][-1] == "far"
    assert full.matches[2].values == [1.0, 1.0, 0.0, 0.0]
    assert full.matches[2].metadata == {"k": "v"}


async def test_query_by_stored_id(idx: AsyncIndex) -> None:
    await upsert(idx, ("a", [1, 0, 0, 0], {}), ("b", [1, 1, 0, 0], {}), ("c", [0, 0, 1, 0], {}))
    found = await idx.query(id="b", top_k=2, namespace=NS)
    assert [m.id for m in found.matches] == ["b", "a"]


async def test_query_on_a_missing_namespace_has_no_matches(idx: AsyncIndex) -> None:
    found = await idx.query(vector=[1, 0, 0, 0], top_k=5, namespace="nowhere")
    assert found.matches == []


async def test_other_metrics_score_like_pinecone(ticks: ManualClock) -> None:
    for metric, expected in [("dotproduct", ["big", "small"]), ("euclidean", ["small", "big"])]:
        with FakePinecone(dimension=2, metric=metric, clock=ticks).mocked() as fake:
            async with AsyncIndex(host=fake.host, api_key=KEY) as index:
                await index.upsert(vectors=[("big", [3, 0]), ("small", [1, 0])])
                found = await index.query(vector=[1, 0], top_k=2)
        assert [m.id for m in found.matches] == expected
        assert found.matches[0].score == (3.0 if metric == "dotproduct" else 0.0)


# --- list / delete / stats -------------------------------------------------------------------


async def test_list_pages_ids_in_lexicographic_order(idx: AsyncIndex) -> None:
    ids = ["a10", "a2", "a1", "b1", "a3"]
    await upsert(idx, *[(i, [1, 0, 0, 0], {}) for i in ids])
    first = await idx.list_paginated(namespace=NS, prefix="a", limit=2)
    assert ids_of(first) == ["a1", "a10"]
    assert first.pagination is not None
    assert first.pagination.next
    second = await idx.list_paginated(
        namespace=NS, prefix="a", limit=2, pagination_token=first.pagination.next
    )
    assert ids_of(second) == ["a2", "a3"]
    assert second.pagination is None
    pages = [ids_of(page) async for page in idx.list(namespace=NS, limit=3)]
    assert pages == [["a1", "a10", "a2"], ["a3", "b1"]]
    with pytest.raises(ApiError, match="Invalid pagination token"):
        await idx.list_paginated(namespace=NS, pagination_token="garbage")


async def test_delete_by_ids_all_and_filter(idx: AsyncIndex) -> None:
    await upsert(idx, *ROWS)
    await idx.delete(ids=["a", "unknown"], namespace=NS)
    assert ids_of(await idx.list_paginated(namespace=NS)) == ["b", "c", "d"]
    await idx.delete(filter={"kind": "note"}, namespace=NS)
    assert ids_of(await idx.list_paginated(namespace=NS)) == ["b", "d"]
    await idx.delete(delete_all=True, namespace=NS)
    assert (await idx.list_paginated(namespace=NS)).vectors == []
    await idx.delete_namespace(name=NS)  # emptied, but it still exists until deleted


async def test_delete_namespace_removes_it_and_a_missing_one_is_404(idx: AsyncIndex) -> None:
    await upsert(idx, *ROWS)
    await idx.delete_namespace(name=NS)
    assert (await idx.describe_index_stats()).namespaces == {}
    with pytest.raises(NotFoundError, match=f"Namespace {NS} not found"):
        await idx.delete_namespace(name=NS)


async def test_stats_count_reconciled_vectors(idx: AsyncIndex) -> None:
    await upsert(idx, *ROWS)
    await idx.upsert(vectors=[("z", [0, 0, 0, 1])])
    stats = await idx.describe_index_stats()
    assert {ns: s.vector_count for ns, s in stats.namespaces.items()} == {
        DEFAULT_NAMESPACE: 1,
        NS: 4,
    }
    assert (stats.total_vector_count, stats.dimension, stats.metric) == (5, 4, "cosine")
    assert (stats.vector_type, stats.index_fullness) == ("dense", 0.0)
    with pytest.raises(ApiError, match="do not support describing index stats"):
        await idx.describe_index_stats(filter={"kind": "note"})
