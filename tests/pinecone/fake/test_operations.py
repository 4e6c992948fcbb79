"""The Pinecone fake, driven only through the real pinecone 10.2.0 SDK.

Every answer the fake gives must decode through the SDK's own models and error mapping, so
these tests prove the wire shapes, not just the fake's bookkeeping. A few server-side rules the
SDK pre-empts client-side are reached through the SDK's own HTTP client (`idx._http`), which
still sends the SDK's headers and maps errors with its `_raise_for_status`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pinecone import (
    ApiError,
    AsyncIndex,
    AsyncPinecone,
    NotFoundError,
    PayloadTooLargeError,
    PineconeConnectionError,
    PineconeTimeoutError,
    RateLimitError,
    ServiceError,
    UnauthorizedError,
)
from pinecone._internal import http_client
from pinecone.models.indexes.deployment import ManagedDeployment
from pinecone.models.indexes.schema import DenseVectorField
from pinecone.models.response_info import ResponseInfo
from pinecone.models.vectors.responses import ListResponse

from tests.support.clocks import ManualClock
from tests.support.pinecone_fake import DEFAULT_NAMESPACE, FakePinecone

KEY = "test-api-key"
NS = "people"


@pytest.fixture
def pinecone_options() -> dict[str, Any]:
    return {"dimension": 4}


@pytest.fixture(autouse=True)
def retry_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The SDK's retry backoff, recorded instead of slept (its documented test seam)."""
    sleeps: list[float] = []

    async def record(delay: float) -> None:
        sleeps.append(delay)

    monkeypatch.setattr(http_client, "_async_retry_sleep", record)
    return sleeps


@pytest.fixture
async def idx(fake: FakePinecone) -> AsyncIterator[AsyncIndex]:
    async with AsyncIndex(host=fake.host, api_key=KEY) as index:
        yield index


async def upsert(idx: AsyncIndex, *rows: Any) -> None:
    await idx.upsert(vectors=list(rows), namespace=NS)


def ids_of(page: ListResponse) -> list[str]:
    return [str(item.id) for item in page.vectors]


def info(response: Any) -> ResponseInfo:
    """The response's headers as the SDK read them (always set on data-plane results)."""
    assert isinstance(response.response_info, ResponseInfo)
    return response.response_info


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


# --- filters --------------------------------------------------------------------------------

ROWS: list[tuple[str, list[float], dict[str, Any]]] = [
    ("a", [1, 0, 0, 0], {"kind": "note", "n": 1, "tags": ["red", "blue"], "pin": True}),
    ("b", [1, 0.1, 0, 0], {"kind": "todo", "n": 2.5, "tags": ["green"], "pin": False}),
    ("c", [1, 0.2, 0, 0], {"kind": "note", "n": 10}),
    ("d", [1, 0.3, 0, 0], {"other": "x"}),
]


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ({"kind": "note"}, "ac"),
        ({"kind": {"$eq": "todo"}}, "b"),
        ({"n": 1.0}, "a"),  # numbers compare as floats
        ({"pin": {"$eq": 1}}, ""),  # booleans are not numbers
        ({"kind": {"$ne": "note"}}, "bd"),  # a missing field matches a negation
        ({"n": {"$gt": 1}}, "bc"),
        ({"n": {"$gte": 2.5}}, "bc"),
        ({"n": {"$lt": 10}}, "ab"),
        ({"n": {"$lte": 2.5}}, "ab"),
        ({"n": {"$gt": 1, "$lt": 10}}, "b"),
        ({"kind": {"$in": ["todo", "none"]}}, "b"),
        ({"kind": {"$nin": ["note"]}}, "bd"),
        ({"tags": "blue"}, "a"),  # a list matches when any element does
        ({"tags": {"$in": ["green", "red"]}}, "ab"),
        ({"tags": {"$ne": "red"}}, "bcd"),
        ({"tags": {"$nin": ["red", "green"]}}, "cd"),
        ({"tags": {"$exists": True}}, "ab"),
        ({"n": {"$exists": False}}, "d"),
        ({"$and": [{"kind": "note"}, {"n": {"$gt": 5}}]}, "c"),
        ({"$or": [{"kind": "todo"}, {"other": "x"}]}, "bd"),
        ({"kind": "note", "pin": True}, "a"),
    ],
)
async def test_filter_operators(idx: AsyncIndex, flt: dict[str, Any], expected: str) -> None:
    await upsert(idx, *ROWS)
    found = await idx.query(vector=[1, 0, 0, 0], top_k=10, namespace=NS, filter=flt)
    assert "".join(sorted(m.id for m in found.matches)) == expected


@pytest.mark.parametrize(
    ("flt", "message"),
    [
        ({"kind": {"$regex": "no.*"}}, "unsupported operator '\\$regex'"),
        ({"$not": {"kind": "note"}}, "unsupported operator '\\$not'"),
        ({"n": {"$gt": "5"}}, "\\$gt requires a number"),
        ({"$or": []}, "\\$or requires a non-empty array"),
        ({"kind": None}, "unsupported value None"),
    ],
)
async def test_bad_filters_are_400s(idx: AsyncIndex, flt: dict[str, Any], message: str) -> None:
    with pytest.raises(ApiError, match=message) as caught:
        await idx.query(vector=[1, 0, 0, 0], top_k=1, namespace=NS, filter=flt)
    assert caught.value.status_code == 400


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


# --- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "namespace", "message"),
    [
        ([("a", [1, 0, 0])], NS, "Vector dimension 3 does not match the dimension of the index 4"),
        ([("a", [0, 0, 0, 0])], NS, "Dense vectors must contain at least one non-zero value"),
        ([("a", [1, 0, 0, 0], {"gone": None})], NS, "got 'null' for field 'gone'"),
        (
            [("a", [1, 0, 0, 0], {"text": "x" * 41_000})],
            NS,
            "metadata size is 41011 bytes, which exceeds the limit of 40960 bytes per vector",
        ),
        ([("", [1, 0, 0, 0])], NS, "Vector ID must be a non-empty string"),
        ([("i" * 513, [1, 0, 0, 0])], NS, "Vector ID must be 1-512 ASCII characters"),
        ([("a", [1, 0, 0, 0])], "espaço", "namespace must be 1-512 ASCII characters"),
        ([(str(i), [1, 0, 0, 0]) for i in range(1001)], NS, "exceeds the limit of 1000"),
    ],
)
async def test_invalid_upserts_are_400s_and_write_nothing(
    fake: FakePinecone, idx: AsyncIndex, rows: list[Any], namespace: str, message: str
) -> None:
    with pytest.raises(ApiError, match=message) as caught:
        await idx.upsert(vectors=[*rows, ("ok", [1, 0, 0, 0])], namespace=namespace)
    assert caught.value.status_code == 400
    assert (caught.value.body or {})["code"] == 3
    assert fake.records(namespace, committed=True) == {}


async def test_null_metadata_can_be_stripped_instead(fake: FakePinecone, idx: AsyncIndex) -> None:
    fake.strip_null_metadata = True
    await upsert(idx, ("a", [1, 0, 0, 0], {"gone": None, "kept": 1}))
    assert fake.records(NS)["a"][1] == {"kept": 1.0}


async def test_query_validation(idx: AsyncIndex) -> None:
    with pytest.raises(ApiError, match="Query vector dimension 2 does not match"):
        await idx.query(vector=[1, 0], top_k=1, namespace=NS)
    with pytest.raises(ApiError, match="at least one non-zero value"):
        await idx.query(vector=[0, 0, 0, 0], top_k=1, namespace=NS)
    await idx.query(vector=[1, 0, 0, 0], top_k=10_000, namespace=NS)
    with pytest.raises(ApiError, match="top_k must be at most 1000 when include_values"):
        await idx.query(vector=[1, 0, 0, 0], top_k=1001, include_metadata=True, namespace=NS)


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/query", {"topK": 10_001, "vector": [1, 0, 0, 0]}, "between 1 and 10000"),
        ("/query", {"topK": 1}, "No query provided"),
        ("/query", {"topK": 1, "id": "a", "vector": [1, 0, 0, 0]}, "both 'ID' and 'vector'"),
        (
            "/vectors/upsert",
            {"vectors": [{"id": "a", "values": [1, 0, 0, 0], "metadata": {"o": {}}}]},
            "got '\\{\\}' for field 'o'",
        ),
        (
            "/vectors/upsert",
            {"vectors": [{"id": "a", "values": [1, 0, 0, 0], "metadata": {"l": [1]}}]},
            "got '\\[1\\]' for field 'l'",
        ),
        ("/vectors/upsert", [1], "must be a JSON object"),
        ("/vectors/delete", {"deleteAll": True, "ids": ["a"]}, "No explicit IDs or filter"),
        ("/vectors/delete", {"filter": {}}, "Delete with empty metadata filter is not allowed"),
    ],
)
async def test_rules_the_sdk_checks_first_are_also_enforced(
    fake: FakePinecone, idx: AsyncIndex, path: str, body: Any, message: str
) -> None:
    with pytest.raises(ApiError, match=message) as caught:
        await idx._http.post(path, json=body)
    assert caught.value.status_code == 400
    assert fake.calls[f"POST {path}"] == 1


async def test_oversized_request_is_413(idx: AsyncIndex) -> None:
    rows = [(f"v{i}", [1, 0, 0, 0], {"text": "x" * 40_000}) for i in range(60)]
    with pytest.raises(PayloadTooLargeError):
        await idx.upsert(vectors=rows, namespace=NS)


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
