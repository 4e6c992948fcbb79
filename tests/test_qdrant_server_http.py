"""`QdrantServerBackend` against a mocked Qdrant REST API (respx; the SDK speaks httpx).

Covers what local mode cannot show: the requests a real server receives
(bodies, query strings, URLs, headers) and how HTTP failures are mapped to
`adapters.errors`. Response bodies are built from `qdrant_client.http.models`
so their shapes are the SDK's own.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
import respx
from qdrant_client.http import models

from adapters import naming
from adapters.base import MemoryFilter, NamespaceRecord, VectorBackend
from adapters.errors import BackendError, BackendUnavailable, NamespaceConflict, NamespaceGone
from adapters.payload import memory_to_payload, namespace_from_json, namespace_to_json, to_micros
from adapters.qdrant_server import RECORD_KEY, QdrantServerBackend
from tests.backend_suite import DIM, T0, memory, unit
from tests.qdrant_rest import completed, error, ok
from tests.qdrant_rest import not_found as rest_not_found

pytestmark = pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")

URL = "http://qdrant.test:6333"
NS = "workspace:abc"
COLL = "/collections/memory-workspace~abc"
ALL_INDEXES = ("created_us", "expires_us", "pinned", "kind")


def not_found(collection: str = COLL.removeprefix("/collections/")) -> httpx.Response:
    return rest_not_found(collection)


def record(name: str = NS) -> NamespaceRecord:
    return NamespaceRecord(name=name, kind="workspace", created_at=T0, metadata={"a": 1})


def collection_info(
    owner: NamespaceRecord | None = None, indexed: tuple[str, ...] = ALL_INDEXES
) -> httpx.Response:
    """GET /collections/{name} as a Qdrant 1.16+ server answers it."""
    integer = models.PayloadSchemaType.INTEGER
    schema = {
        field: models.PayloadIndexInfo(
            data_type=models.PayloadSchemaType.KEYWORD if field == "kind" else integer, points=0
        )
        for field in indexed
    }
    return ok(
        models.CollectionInfo(
            status=models.CollectionStatus.GREEN,
            optimizer_status=models.OptimizersStatusOneOf.OK,
            points_count=0,
            indexed_vectors_count=0,
            segments_count=2,
            config=models.CollectionConfig(
                params=models.CollectionParams(
                    vectors=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
                ),
                hnsw_config=models.HnswConfig(m=16, ef_construct=100, full_scan_threshold=10000),
                optimizer_config=models.OptimizersConfig(
                    default_segment_number=0, flush_interval_sec=5, deleted_threshold=0.2
                ),
                wal_config=models.WalConfig(wal_capacity_mb=32, wal_segments_ahead=0),
                metadata={RECORD_KEY: namespace_to_json(owner)} if owner else None,
            ),
            payload_schema=schema,
        )
    )


def body(call: Any) -> Any:
    return json.loads(call.request.content)


@pytest.fixture
def mock() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=URL, assert_all_called=False) as router:
        yield router


@pytest.fixture
async def backend(mock: respx.MockRouter) -> AsyncIterator[QdrantServerBackend]:
    backend = QdrantServerBackend(DIM, url=URL)
    await backend.start()
    yield backend
    await backend.close()


async def test_start_makes_no_request(mock: respx.MockRouter) -> None:
    route = mock.route().mock(side_effect=httpx.ConnectError("refused"))
    backend = QdrantServerBackend(DIM, url=URL, api_key="secret", timeout_s=0.2)
    await backend.start()
    await backend.close()
    assert not route.called
    assert not mock.calls


def test_constructor_wants_exactly_one_target() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        QdrantServerBackend(DIM)
    with pytest.raises(ValueError, match="exactly one"):
        QdrantServerBackend(DIM, url=URL, location=":memory:")


Operation = Callable[[VectorBackend], Awaitable[object]]
OPERATIONS: dict[str, Operation] = {
    "ping": lambda b: b.ping(),
    "get_namespace": lambda b: b.get_namespace(NS),
    "save_namespace": lambda b: b.save_namespace(record()),
    "list_namespaces": lambda b: b.list_namespaces(),
    "get_memory": lambda b: b.get_memory(NS, str(uuid.uuid4())),
    "upsert_memory": lambda b: b.upsert_memory(memory(NS), unit(1)),
    "query_memories": lambda b: b.query_memories(NS, unit(1), MemoryFilter(now=T0), 5),
    "list_memories": lambda b: b.list_memories(NS, MemoryFilter(now=T0), 5),
    "delete_memory": lambda b: b.delete_memory(NS, str(uuid.uuid4())),
    "delete_expired": lambda b: b.delete_expired_memories(NS, T0),
}


@pytest.mark.parametrize("operation", OPERATIONS.values(), ids=OPERATIONS.keys())
@pytest.mark.parametrize(
    "failure",
    [
        error(500, "Service internal error: boom"),
        error(502, "bad gateway"),
        error(503, "Service unavailable"),
        error(429, "Too many requests"),
        error(429, "Rate limiting exceeded", headers={"Retry-After": "2"}),
        error(
            429, "Rate limiting exceeded", headers={"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}
        ),
        httpx.ConnectError("[Errno 111] Connection refused"),
        httpx.ReadTimeout("timed out"),
    ],
    ids=[
        "500",
        "502",
        "503",
        "429",
        "429-retry-after",
        "429-retry-date",
        "refused",
        "read-timeout",
    ],
)
async def test_outages_are_backend_unavailable(
    mock: respx.MockRouter,
    backend: QdrantServerBackend,
    operation: Operation,
    failure: httpx.Response | Exception,
) -> None:
    if isinstance(failure, httpx.Response):
        mock.route().mock(return_value=failure)
    else:
        mock.route().mock(side_effect=failure)
    with pytest.raises(BackendUnavailable):
        await operation(backend)
    assert mock.calls


async def test_read_timeout_fails_fast(
    mock: respx.MockRouter, backend: QdrantServerBackend
) -> None:
    route = mock.route().mock(side_effect=httpx.ReadTimeout("timed out"))
    started = time.monotonic()
    with pytest.raises(BackendUnavailable):
        await backend.list_memories(NS, MemoryFilter(now=T0), 5)
    assert time.monotonic() - started < 0.5
    assert route.call_count == 1  # no retries behind our back


@pytest.mark.parametrize(("timeout_s", "sent"), [(0.2, 1), (1.0, 1), (2.5, 3)])
async def test_timeout_is_whole_seconds_rounded_up(
    mock: respx.MockRouter, timeout_s: float, sent: int
) -> None:
    route = mock.get("/collections").mock(return_value=ok({"collections": []}))
    backend = QdrantServerBackend(DIM, url=URL, timeout_s=timeout_s)
    await backend.start()
    await backend.ping()
    await backend.close()
    assert route.calls.last.request.extensions["timeout"]["read"] == sent


@pytest.mark.parametrize(
    "failure",
    [error(400, "Wrong input: bad"), error(401, "Unauthorized"), error(403, "Forbidden")],
    ids=["400", "401", "403"],
)
async def test_client_errors_are_backend_errors(
    mock: respx.MockRouter, backend: QdrantServerBackend, failure: httpx.Response
) -> None:
    mock.route().mock(return_value=failure)
    with pytest.raises(BackendError) as caught:
        await backend.list_memories(NS, MemoryFilter(now=T0), 5)
    assert type(caught.value) is BackendError
    with pytest.raises(BackendUnavailable):  # ping says "not answering now" for any failure
        await backend.ping()


async def test_malformed_response_does_not_leak_sdk_types(
    mock: respx.MockRouter, backend: QdrantServerBackend
) -> None:
    mock.get(COLL).mock(return_value=ok(True))
    with pytest.raises(BackendUnavailable):
        await backend.get_namespace(NS)


async def test_creation_sends_cosine_size_record_and_indexes(
    mock: respx.MockRouter, backend: QdrantServerBackend
) -> None:
    mock.get(COLL).mock(return_value=not_found())
    create = mock.put(COLL).mock(return_value=ok(True))
    index = mock.put(f"{COLL}/index").mock(return_value=completed())
    await backend.save_namespace(record())

    sent = body(create.calls.last)
    assert sent["vectors"] == {"size": DIM, "distance": "Cosine"}
    assert set(sent["metadata"]) == {RECORD_KEY}
    assert namespace_from_json(sent["metadata"][RECORD_KEY]) == record()

    schemas = {body(c)["field_name"]: body(c)["field_schema"] for c in index.calls}
    assert set(schemas) == set(ALL_INDEXES)
    assert schemas["created_us"]["type"] == "integer"
    assert schemas["created_us"]["range"] is True
    assert schemas["created_us"]["lookup"] is True
    assert schemas["expires_us"]["type"] == "integer"
    assert schemas["expires_us"]["range"] is True
    assert schemas["pinned"]["type"] == "integer"
    assert schemas["kind"] == "keyword"
    assert all(c.request.url.params["wait"] == "true" for c in index.calls)


async def test_existing_collection_gets_its_record_replaced_and_indexes_healed(
    mock: respx.MockRouter, backend: QdrantServerBackend
) -> None:
    mock.get(COLL).mock(return_value=collection_info(record(), indexed=("kind", "pinned")))
    create = mock.put(COLL).mock(return_value=ok(True))
    index = mock.put(f"{COLL}/index").mock(return_value=completed())
    patch = mock.patch(COLL).mock(return_value=ok(True))
    replacement = NamespaceRecord(name=NS, kind="org", created_at=T0)
    await backend.save_namespace(replacement)
    assert not create.called
    assert {body(c)["field_name"] for c in index.calls} == {"created_us", "expires_us"}
    assert body(patch.calls.last) == {"metadata": {RECORD_KEY: namespace_to_json(replacement)}}


async def test_lost_creation_race_updates_the_winner(
    mock: respx.MockRouter, backend: QdrantServerBackend
) -> None:
    mock.get(COLL).mock(side_effect=[not_found(), collection_info(record("workspace:abc"))])
    mock.put(COLL).mock(
        return_value=error(409, "Wrong input: Collection `memory-workspace~abc` already exists!")
    )
    patch = mock.patch(COLL).mock(return_value=ok(True))
    await backend.save_namespace(record())
    assert patch.called


async def test_collection_urls_use_mapped_names(
    mock: respx.MockRouter, backend: QdrantServerBackend
) -> None:
    long_name = "custom:" + "x" * 249
    hashed = naming.collection_name(long_name)
    assert hashed.startswith("memory-~")
    short = mock.get(COLL).mock(return_value=not_found())
    long = mock.get(f"/collections/{hashed}").mock(return_value=not_found(hashed))
    assert await backend.get_namespace(NS) is None
    assert await backend.get_namespace(long_name) is None
    assert short.called
    assert long.called
    assert str(short.calls.last.request.url) == f"{URL}/collections/memory-workspace~abc"


async def test_api_key_header_is_sent(mock: respx.MockRouter) -> None:
    route = mock.get("/collections").mock(return_value=ok({"collections": []}))
    backend = QdrantServerBackend(DIM, url=URL, api_key="s3cret")
    await backend.start()
    await backend.ping()
    await backend.close()
    assert route.calls.last.request.headers["api-key"] == "s3cret"


async def test_upsert_waits_and_sends_the_shared_payload(
    mock: respx.MockRouter, backend: QdrantServerBackend
) -> None:
    route = mock.put(f"{COLL}/points").mock(return_value=completed())
    written = memory(NS, pin=True, expires_at=T0 + timedelta(hours=1))
    await backend.upsert_memory(written, unit(1))
    request = route.calls.last.request
    assert request.url.params["wait"] == "true"
    [point] = json.loads(request.content)["points"]
    assert point["id"] == written.id
    assert point["vector"] == pytest.approx(unit(1))
    assert point["payload"] == memory_to_payload(written)


async def test_upsert_into_missing_collection_is_namespace_gone(
    mock: respx.MockRouter, backend: QdrantServerBackend
) -> None:
    mock.put(f"{COLL}/points").mock(return_value=not_found())
    with pytest.raises(NamespaceGone, match="namespace workspace:abc not found"):
        await backend.upsert_memory(memory(NS), unit(1))


async def test_missing_collection_reads_empty(
    mock: respx.MockRouter, backend: QdrantServerBackend
) -> None:
    mock.route(path__startswith=COLL).mock(return_value=not_found())
    assert await backend.get_namespace(NS) is None
    assert await backend.get_memory(NS, str(uuid.uuid4())) is None
    assert await backend.query_memories(NS, unit(1), MemoryFilter(now=T0), 5) == []
    assert await backend.list_memories(NS, MemoryFilter(now=T0), 5) == []
    assert await backend.delete_memory(NS, str(uuid.uuid4())) is False
    assert await backend.delete_expired_memories(NS, T0) == 0
    assert await backend.delete_namespace(NS) is False


async def test_record_of_another_name_is_a_conflict(
    mock: respx.MockRouter, backend: QdrantServerBackend
) -> None:
    mock.get(COLL).mock(return_value=collection_info(record("workspace:other")))
    writes = mock.route(method__in=["PUT", "PATCH", "DELETE"]).mock(return_value=ok(True))
    with pytest.raises(NamespaceConflict):
        await backend.get_namespace(NS)
    with pytest.raises(NamespaceConflict):
        await backend.save_namespace(record())
    with pytest.raises(NamespaceConflict):
        await backend.delete_namespace(NS)
    assert not writes.called


async def test_list_namespaces_keeps_only_prefixed_collections_with_records(
    mock: respx.MockRouter, backend: QdrantServerBackend
) -> None:
    names = ["memory-workspace~abc", "memory-team~bare", "memory-gone~now", "other-app"]
    mock.get("/collections").mock(return_value=ok({"collections": [{"name": n} for n in names]}))
    mock.get(COLL).mock(return_value=collection_info(record()))
    mock.get("/collections/memory-team~bare").mock(return_value=collection_info(None))
    mock.get("/collections/memory-gone~now").mock(return_value=not_found("memory-gone~now"))
    assert await backend.list_namespaces() == [record()]


async def test_query_sends_filter_and_reads_scores(
    mock: respx.MockRouter, backend: QdrantServerBackend
) -> None:
    stored = memory(NS, kind="summary", pin=True)
    point = models.ScoredPoint(
        id=stored.id, version=3, score=0.875, payload=memory_to_payload(stored)
    )
    route = mock.post(f"{COLL}/points/query").mock(
        return_value=ok(models.QueryResponse(points=[point]))
    )
    now = T0 + timedelta(seconds=1)
    memory_filter = MemoryFilter(now=now, pinned=True, kinds=frozenset({"summary", "fact"}))
    hits = await backend.query_memories(NS, unit(1), memory_filter, 4)
    assert [(h.memory, h.score) for h in hits] == [(stored, 0.875)]
    sent = body(route.calls.last)
    assert sent["limit"] == 4
    assert sent["with_payload"] is True
    assert sent["filter"]["must_not"] == [
        {"key": "expires_us", "range": {"lte": pytest.approx(to_micros(now))}}
    ]
    assert {"key": "pinned", "match": {"value": 1}} in sent["filter"]["must"]
    assert {"key": "kind", "match": {"any": ["fact", "summary"]}} in sent["filter"]["must"]


async def test_list_orders_by_created_us_descending(
    mock: respx.MockRouter, backend: QdrantServerBackend
) -> None:
    stored = [memory(NS, content=f"m{i}") for i in range(2)]
    points = [models.Record(id=m.id, payload=memory_to_payload(m)) for m in stored]
    route = mock.post(f"{COLL}/points/scroll").mock(
        return_value=ok(models.ScrollResult(points=points, next_page_offset=None))
    )
    assert await backend.list_memories(NS, MemoryFilter(now=T0, pinned=False), 2) == stored
    sent = body(route.calls.last)
    assert sent["order_by"] == {"key": "created_us", "direction": "desc"}
    assert sent["limit"] == 2
    assert {"key": "pinned", "match": {"value": 0}} in sent["filter"]["must"]


async def test_delete_memory_checks_then_deletes_with_wait(
    mock: respx.MockRouter, backend: QdrantServerBackend
) -> None:
    stored = memory(NS)
    mock.post(f"{COLL}/points").mock(
        return_value=ok([models.Record(id=stored.id, payload=memory_to_payload(stored))])
    )
    delete = mock.post(f"{COLL}/points/delete").mock(return_value=completed())
    assert await backend.delete_memory(NS, stored.id) is True
    assert delete.calls.last.request.url.params["wait"] == "true"
    assert body(delete.calls.last) == {"points": [stored.id]}
    assert await backend.delete_memory(NS, "not-a-uuid") is False
    assert delete.call_count == 1


async def test_delete_expired_counts_then_deletes_by_filter(
    mock: respx.MockRouter, backend: QdrantServerBackend
) -> None:
    count = mock.post(f"{COLL}/points/count").mock(return_value=ok(models.CountResult(count=3)))
    delete = mock.post(f"{COLL}/points/delete").mock(return_value=completed())
    assert await backend.delete_expired_memories(NS, T0) == 3
    expired = {"must": [{"key": "expires_us", "range": {"lte": pytest.approx(to_micros(T0))}}]}
    assert body(count.calls.last)["filter"] == expired
    assert body(count.calls.last)["exact"] is True
    assert body(delete.calls.last) == {"filter": expired}
    assert delete.calls.last.request.url.params["wait"] == "true"
