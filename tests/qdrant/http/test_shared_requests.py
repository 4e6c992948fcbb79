"""Both Qdrant server layouts against a mocked Qdrant REST API (respx; the SDK speaks httpx).

Covers what local mode cannot show: the requests a real server receives
(bodies, query strings, URLs, headers: collections created with per-tenant
HNSW, the tenant index, one batch request per search) and how HTTP failures
are mapped to `adapters.errors`. Response bodies are built from
`qdrant_client.http.models` so their shapes are the SDK's own.
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

from adapters.base import MemoryFilter, MemoryRecord, NamespaceRecord, VectorBackend
from adapters.errors import (
    BackendError,
    BackendMisconfigured,
    BackendUnavailable,
    NamespaceConflict,
    NamespaceGone,
)
from adapters.qdrant.layout import memory_to_payload, namespace_to_json, point_id
from adapters.qdrant.names import collection_name
from adapters.qdrant.server import RECORD_INDEXES, QdrantServerBackend, purge_id, record_id
from adapters.qdrant.server_collections import RECORD_KEY, QdrantCollectionsBackend
from adapters.qdrant.server_keywords import KEYWORD_VECTORS
from adapters.qdrant.server_records import generation_id, incarnation_epoch
from adapters.times import to_micros
from tests.support.qdrant_rest import (
    collection_info,
    collections,
    completed,
    error,
    mock_shared_ready,
    ok,
    shared_store_info,
)
from tests.support.records import DIM, T0, dense, memory, unit

pytestmark = pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")

URL = "http://qdrant.test:6333"
NS = "workspace:abc"
MEM = "/collections/memory-memories"
REC = "/collections/memory-namespaces"
INTEGER = {"type": "integer"}
MEMORY_SCHEMAS = {
    "ns": {"type": "keyword", "is_tenant": True},
    "epoch": "keyword",
    "created_us": {**INTEGER, "lookup": True, "range": True},
    "expires_us": {**INTEGER, "lookup": False, "range": True},
    "pinned": {**INTEGER, "lookup": True, "range": False},
    "kind": "keyword",
}
RECORD_SCHEMAS = {"type": "keyword", "expires_us": MEMORY_SCHEMAS["expires_us"]}
VECTORS = models.VectorParams(size=DIM, distance=models.Distance.COSINE)


def body(call: Any) -> Any:
    return json.loads(call.request.content)


def record(name: str = NS, **fields: Any) -> NamespaceRecord:
    return NamespaceRecord(name=name, kind="workspace", created_at=T0, **fields)


def record_point(name: str, epoch: str) -> models.Record:
    payload = {"type": "record", "name": name, "epoch": epoch}
    return models.Record(
        id=record_id(name), payload={**payload, "record": namespace_to_json(record(name))}
    )


def stored(item: MemoryRecord, epoch: str, score: float = 0.5) -> models.ScoredPoint:
    payload = memory_to_payload(item, epoch)
    return models.ScoredPoint(
        id=point_id(item.namespace, item.id), version=1, score=score, payload=payload
    )


def no_memories(router: respx.MockRouter) -> None:
    """The records collection answers, with no namespace: every read finds nothing."""
    router.post(f"{REC}/points").mock(return_value=ok([]))


@pytest.fixture
def mock() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=URL, assert_all_called=False) as router:
        yield router


@pytest.fixture
async def shared(mock: respx.MockRouter) -> AsyncIterator[QdrantServerBackend]:
    """The shared layout after its first contact: both collections in place, routes cleared."""
    mock_shared_ready(mock, DIM)
    backend = QdrantServerBackend(DIM, url=URL)
    await backend.start()
    mock.routes.clear()
    mock.calls.clear()
    yield backend
    await backend.close()


@pytest.fixture
async def coll(mock: respx.MockRouter) -> AsyncIterator[QdrantCollectionsBackend]:
    backend = QdrantCollectionsBackend(DIM, url=URL)
    await backend.start()
    yield backend
    await backend.close()


@pytest.fixture(params=["shared", "collections"])
def backend(request: pytest.FixtureRequest) -> VectorBackend:
    fixture = "shared" if request.param == "shared" else "coll"
    found: VectorBackend = request.getfixturevalue(fixture)
    return found


# -- the shared layout: first contact ---------------------------------------------------


async def test_start_survives_an_outage_and_first_use_retries(mock: respx.MockRouter) -> None:
    route = mock.route().mock(side_effect=httpx.ConnectError("refused"))
    backend = QdrantServerBackend(DIM, url=URL, api_key="secret", timeout_s=0.2)
    await backend.start()
    assert route.call_count == 1
    with pytest.raises(BackendUnavailable):
        await backend.get_namespace(NS)
    mock.routes.clear()
    mock_shared_ready(mock, DIM)
    no_memories(mock)
    assert await backend.get_namespace(NS) is None
    assert await backend.get_namespace(NS) is None
    assert mock.routes[0].call_count == 1  # GET /collections: once per process
    await backend.close()


async def test_first_use_creates_both_collections_with_tenant_indexes(
    mock: respx.MockRouter,
) -> None:
    mock.get("/collections").mock(return_value=collections("other-app"))
    create_memories = mock.put(MEM).mock(return_value=ok(True))
    create_records = mock.put(REC).mock(return_value=ok(True))
    memory_index = mock.put(f"{MEM}/index").mock(return_value=completed())
    record_index = mock.put(f"{REC}/index").mock(return_value=completed())
    backend = QdrantServerBackend(DIM, url=URL)
    await backend.start()
    await backend.close()

    assert body(create_memories.calls.last) == {
        "vectors": {"size": DIM, "distance": "Cosine"},
        "sparse_vectors": {"keywords": {"modifier": "idf"}},
        "hnsw_config": {"m": 0, "payload_m": 16},
    }
    assert body(create_records.calls.last) == {"vectors": {}}
    sent = [(body(c)["field_name"], body(c)["field_schema"]) for c in memory_index.calls]
    assert sent[0] == ("ns", {"type": "keyword", "is_tenant": True})  # the tenant key first
    assert dict(sent) == MEMORY_SCHEMAS
    assert {body(c)["field_name"]: body(c)["field_schema"] for c in record_index.calls} == (
        RECORD_SCHEMAS
    )
    indexes = [*memory_index.calls, *record_index.calls]
    assert all(c.request.url.params["wait"] == "true" for c in indexes)


async def test_existing_collections_are_checked_and_indexes_healed(
    mock: respx.MockRouter,
) -> None:
    mock.get("/collections").mock(return_value=collections("memory-memories", "memory-namespaces"))
    partial = ["epoch", "expires_us", "pinned", "kind"]
    mock.get(MEM).mock(return_value=collection_info(VECTORS, partial, keyword=["epoch", "kind"]))
    mock.get(REC).mock(return_value=collection_info({}, ["type"], keyword=["type"]))
    creates = mock.put(path__regex=r"^/collections/[^/]+$").mock(return_value=ok(True))
    memory_index = mock.put(f"{MEM}/index").mock(return_value=completed())
    record_index = mock.put(f"{REC}/index").mock(return_value=completed())
    keyword_vector = mock.put(f"{MEM}/vectors/keywords").mock(return_value=completed())
    await QdrantServerBackend(DIM, url=URL).start()
    assert not creates.called
    assert {body(c)["field_name"] for c in memory_index.calls} == {"ns", "created_us"}
    assert {body(c)["field_name"] for c in record_index.calls} == {"expires_us"}
    # A store made before keyword vectors existed gains its sparse vector in place.
    assert [body(c) for c in keyword_vector.calls] == [{"sparse": {"modifier": "idf"}}]
    assert keyword_vector.calls.last.request.url.params["wait"] == "true"


async def test_a_server_before_1_18_cannot_add_keyword_vectors_in_place(
    mock: respx.MockRouter,
) -> None:
    mock.get("/collections").mock(return_value=collections("memory-memories", "memory-namespaces"))
    mock.get(MEM).mock(return_value=shared_store_info(DIM, {}, keyword_vectors=False))
    mock.get(REC).mock(return_value=shared_store_info(DIM, RECORD_INDEXES, vectors=False))
    mock.put(path__regex=r"/index$").mock(return_value=completed())
    mock.put(f"{MEM}/vectors/keywords").mock(return_value=error(404, "Not Found"))
    with pytest.raises(BackendMisconfigured, match=r"needs Qdrant 1\.18 or later"):
        await QdrantServerBackend(DIM, url=URL).start()


async def test_lost_creation_race_is_fine(mock: respx.MockRouter) -> None:
    mock.get("/collections").mock(return_value=collections())
    mock.put(MEM).mock(
        return_value=error(409, "Wrong input: Collection `memory-memories` already exists!")
    )
    mock.get(MEM).mock(return_value=shared_store_info(DIM, {}))
    mock.put(REC).mock(return_value=ok(True))
    indexes = mock.put(path__regex=r"/index$").mock(return_value=completed())
    await QdrantServerBackend(DIM, url=URL).start()
    assert len(indexes.calls) == len(MEMORY_SCHEMAS) + len(RECORD_SCHEMAS)


async def test_per_namespace_collections_refuse_the_start(mock: respx.MockRouter) -> None:
    found = ["memory-workspace~abc", "other-app", "memory-memories", "memory-team~x"]
    mock.get("/collections").mock(return_value=collections(*found))
    writes = mock.route(method__in=["PUT", "POST", "PATCH", "DELETE"]).mock(return_value=ok(True))
    backend = QdrantServerBackend(DIM, url=URL)
    with pytest.raises(BackendMisconfigured) as refused:
        await backend.start()
    assert str(refused.value) == (
        "Qdrant holds 2 namespace collections in the per-namespace layout "
        "(e.g. memory-team~x); run 'memory-plugin-vector migrate-layout' to copy them "
        "into the shared layout, or set MEMORY_PLUGIN_QDRANT_LAYOUT=collections"
    )
    with pytest.raises(BackendUnavailable, match="2 namespace collections"):
        await backend.list_namespaces()
    assert not writes.called
    await backend.close()


async def test_wrong_dimension_refuses_the_start(mock: respx.MockRouter) -> None:
    mock.get("/collections").mock(return_value=collections("memory-memories", "memory-namespaces"))
    mock.get(MEM).mock(return_value=shared_store_info(DIM + 1, {}))
    with pytest.raises(BackendMisconfigured, match="memory-memories"):
        await QdrantServerBackend(DIM, url=URL).start()


# -- the shared layout: requests ----------------------------------------------------------


async def test_search_over_three_namespaces_is_one_batch_request(
    mock: respx.MockRouter, shared: QdrantServerBackend
) -> None:
    names = ["workspace:abc", "team:t", "org:o"]
    epochs = {name: f"e{i}" for i, name in enumerate(names)}
    records = mock.post(f"{REC}/points").mock(
        return_value=ok([record_point(name, epochs[name]) for name in names])
    )
    pinned, plain = memory("team:t", pin=True), memory("org:o", kind="summary")
    answers = [
        models.QueryResponse(points=[stored(pinned, "e1", 0.25)]),
        models.QueryResponse(points=[stored(plain, "e2", 0.75)]),
    ]
    batch = mock.post(f"{MEM}/points/query/batch").mock(return_value=ok(answers))
    kinds = frozenset({"summary", "fact"})
    asked = [*names, "org:missing"]
    hits = await shared.query_memories(asked, dense(1), MemoryFilter(now=T0, kinds=kinds), 5)
    assert [(h.memory, h.score) for h in hits] == [(pinned, 0.25), (plain, 0.75)]
    assert (len(mock.calls), records.call_count, batch.call_count) == (2, 1, 1)
    assert set(body(records.calls.last)["ids"]) == {record_id(name) for name in asked}
    searches = body(batch.calls.last)["searches"]
    assert [s["filter"]["must"][2] for s in searches] == [
        {"key": "pinned", "match": {"value": 1}},
        {"key": "pinned", "match": {"value": 0}},
    ]
    for search in searches:
        assert search["query"] == {"nearest": pytest.approx(unit(1))}
        assert (search["limit"], search["with_payload"]) == (5, True)
        assert "params" not in search  # a server searches each tenant's own HNSW graph
        assert search["filter"]["must"][:2] == [
            {"key": "ns", "match": {"any": sorted(names)}},
            {"key": "epoch", "match": {"any": ["e0", "e1", "e2"]}},
        ]
        assert search["filter"]["must"][3] == {"key": "kind", "match": {"any": ["fact", "summary"]}}
        assert search["filter"]["must_not"] == [
            {"key": "expires_us", "range": {"lte": pytest.approx(to_micros(T0))}}
        ]


async def test_listing_orders_by_created_us_in_the_batch(
    mock: respx.MockRouter, shared: QdrantServerBackend
) -> None:
    mock.post(f"{REC}/points").mock(return_value=ok([record_point(NS, "e0")]))
    newest = [memory(NS, created_at=T0 - timedelta(minutes=i)) for i in range(2)]
    answer = models.QueryResponse(points=[stored(m, "e0") for m in newest])
    batch = mock.post(f"{MEM}/points/query/batch").mock(return_value=ok([answer]))
    assert await shared.list_memories([NS], MemoryFilter(now=T0, pinned=False), 2) == newest
    [search] = body(batch.calls.last)["searches"]
    assert search["query"] == {"order_by": {"key": "created_us", "direction": "desc"}}
    assert search["limit"] == 2
    assert search["filter"]["must"] == [
        {"key": "ns", "match": {"value": NS}},
        {"key": "epoch", "match": {"value": "e0"}},
        {"key": "pinned", "match": {"value": 0}},
    ]


async def test_upsert_writes_the_current_epoch_and_waits(
    mock: respx.MockRouter, shared: QdrantServerBackend
) -> None:
    mock.post(f"{REC}/points").mock(return_value=ok([record_point(NS, "e7")]))
    route = mock.put(f"{MEM}/points").mock(return_value=completed())
    written = memory(NS, pin=True, expires_at=T0 + timedelta(hours=1))
    await shared.upsert_memory(written, unit(1))
    assert route.calls.last.request.url.params["wait"] == "true"
    [point] = body(route.calls.last)["points"]
    assert point["id"] == point_id(NS, written.id)
    assert point["vector"] == pytest.approx(unit(1))
    assert point["payload"] == memory_to_payload(written, "e7")
    assert point["payload"]["ns"] == NS


async def test_upsert_into_missing_namespace_is_gone(
    mock: respx.MockRouter, shared: QdrantServerBackend
) -> None:
    no_memories(mock)
    writes = mock.put(f"{MEM}/points").mock(return_value=completed())
    with pytest.raises(NamespaceGone, match="namespace workspace:abc not found"):
        await shared.upsert_memory(memory(NS), unit(1))
    assert not writes.called


async def test_save_keeps_the_epoch_of_an_existing_namespace(
    mock: respx.MockRouter, shared: QdrantServerBackend
) -> None:
    reads = mock.post(f"{REC}/points").mock(side_effect=[ok([record_point(NS, "e3")]), ok([])])
    write = mock.put(f"{REC}/points").mock(return_value=completed())
    replacement = record(expires_at=T0 + timedelta(days=1), metadata={"a": 1})
    await shared.save_namespace(replacement)
    [point] = body(write.calls.last)["points"]
    assert point == {
        "id": record_id(NS),
        "vector": {},
        "payload": {
            "type": "record",
            "name": NS,
            "epoch": "e3",
            "record": namespace_to_json(replacement),
            "expires_us": to_micros(T0 + timedelta(days=1)),
        },
    }
    assert write.calls.last.request.url.params["wait"] == "true"
    assert body(reads.calls.last)["ids"] == [purge_id("e3")]  # not deleted meanwhile


async def test_save_gives_a_new_namespace_a_fresh_epoch(
    mock: respx.MockRouter, shared: QdrantServerBackend
) -> None:
    no_memories(mock)
    write = mock.put(f"{REC}/points").mock(return_value=completed())
    await shared.save_namespace(record())
    [point] = body(write.calls.last)["points"]
    # Never deleted (no generation point): generation 0's epoch, the same on every replica.
    assert point["payload"]["epoch"] == incarnation_epoch(NS, 0)
    assert "expires_us" not in point["payload"]
    assert len(mock.calls) == 3  # record, generation, upsert


async def test_delete_namespace_is_one_batch_then_a_purge(
    mock: respx.MockRouter, shared: QdrantServerBackend
) -> None:
    mock.post(f"{REC}/points").mock(return_value=ok([record_point(NS, "e5")]))
    batch = mock.post(f"{REC}/points/batch").mock(
        return_value=ok(
            [models.UpdateResult(operation_id=1, status=models.UpdateStatus.COMPLETED)] * 2
        )
    )
    purge = mock.post(f"{MEM}/points/delete").mock(return_value=completed())
    done = mock.post(f"{REC}/points/delete").mock(return_value=completed())
    assert await shared.delete_namespace(NS) is True
    assert body(batch.calls.last) == {
        "operations": [
            {
                "upsert": {
                    "points": [
                        {
                            "id": purge_id("e5"),
                            "vector": {},
                            "payload": {"type": "purge", "epoch": "e5", "name": NS},
                        },
                        {
                            "id": generation_id(NS),
                            "vector": {},
                            "payload": {"type": "generation", "name": NS, "generation": 1},
                        },
                    ]
                }
            },
            {"delete": {"points": [record_id(NS)]}},
        ]
    }
    assert body(purge.calls.last) == {
        "filter": {"must": [{"key": "epoch", "match": {"any": ["e5"]}}]}
    }
    assert body(done.calls.last) == {"points": [purge_id("e5")]}
    paths = [c.request.url.path for c in mock.calls]
    assert paths == [
        f"{REC}/points",
        f"{REC}/points",
        f"{REC}/points/batch",
        f"{MEM}/points/delete",
        f"{REC}/points/delete",
    ]
    assert all(c.request.url.params["wait"] == "true" for c in mock.calls[2:])  # the writes


async def test_delete_namespace_holds_when_the_purge_fails(
    mock: respx.MockRouter, shared: QdrantServerBackend
) -> None:
    mock.post(f"{REC}/points").mock(return_value=ok([record_point(NS, "e5")]))
    mock.post(f"{REC}/points/batch").mock(return_value=ok([]))
    mock.post(f"{MEM}/points/delete").mock(return_value=error(503, "Service unavailable"))
    done = mock.post(f"{REC}/points/delete").mock(return_value=completed())
    assert await shared.delete_namespace(NS) is True
    assert not done.called  # the purge point stays for maintain()


async def test_maintain_purges_dead_epochs_only(
    mock: respx.MockRouter, shared: QdrantServerBackend
) -> None:
    purges = [
        models.Record(id=purge_id(epoch), payload={"type": "purge", "epoch": epoch, "name": name})
        for name, epoch in [("team:gone", "e1"), (NS, "e2")]
    ]
    scroll = mock.post(f"{REC}/points/scroll").mock(
        return_value=ok(models.ScrollResult(points=purges, next_page_offset=None))
    )
    mock.post(f"{REC}/points").mock(return_value=ok([record_point(NS, "e2")]))  # live again
    purge = mock.post(f"{MEM}/points/delete").mock(return_value=completed())
    done = mock.post(f"{REC}/points/delete").mock(return_value=completed())
    await shared.maintain()
    assert body(scroll.calls.last)["filter"] == {
        "must": [{"key": "type", "match": {"value": "purge"}}]
    }
    assert body(purge.calls.last) == {
        "filter": {"must": [{"key": "epoch", "match": {"any": ["e1"]}}]}
    }
    assert body(done.calls.last) == {"points": [purge_id("e1")]}


async def test_expired_namespaces_scan_by_expiry(
    mock: respx.MockRouter, shared: QdrantServerBackend
) -> None:
    scroll = mock.post(f"{REC}/points/scroll").mock(
        return_value=ok(models.ScrollResult(points=[record_point(NS, "e1")], next_page_offset=None))
    )
    assert await shared.expired_namespaces(T0) == [record()]
    assert body(scroll.calls.last)["filter"] == {
        "must": [{"key": "expires_us", "range": {"lte": pytest.approx(to_micros(T0))}}]
    }


async def test_get_memory_of_an_old_incarnation_is_none(
    mock: respx.MockRouter, shared: QdrantServerBackend
) -> None:
    old = memory(NS)
    mock.post(f"{REC}/points").mock(return_value=ok([record_point(NS, "e2")]))
    point = models.Record(id=point_id(NS, old.id), payload=memory_to_payload(old, "e1"))
    mock.post(f"{MEM}/points").mock(return_value=ok([point]))
    assert await shared.get_memory(NS, old.id) is None
    assert await shared.delete_memory(NS, old.id) is False


async def test_delete_expired_is_one_count_and_one_delete(
    mock: respx.MockRouter, shared: QdrantServerBackend
) -> None:
    count = mock.post(f"{MEM}/points/count").mock(return_value=ok(models.CountResult(count=3)))
    delete = mock.post(f"{MEM}/points/delete").mock(return_value=completed())
    assert await shared.delete_expired_memories(T0) == 3
    expired = {"must": [{"key": "expires_us", "range": {"lte": pytest.approx(to_micros(T0))}}]}
    assert body(count.calls.last) == {"filter": expired, "exact": True}
    assert body(delete.calls.last) == {"filter": expired}
    assert delete.calls.last.request.url.params["wait"] == "true"
    assert len(mock.calls) == 2


async def test_vanished_collection_is_set_up_again(
    mock: respx.MockRouter, shared: QdrantServerBackend
) -> None:
    mock.post(f"{REC}/points").mock(
        return_value=error(404, "Not found: Collection `memory-namespaces` doesn't exist!")
    )
    with pytest.raises(BackendUnavailable, match="vanished"):
        await shared.get_namespace(NS)
    mock.routes.clear()
    mock_shared_ready(mock, DIM)
    no_memories(mock)
    assert await shared.get_namespace(NS) is None
    assert mock.routes[0].called  # GET /collections again


# -- both layouts: failures ------------------------------------------------------------------

Operation = Callable[[VectorBackend], Awaitable[object]]
OPERATIONS: dict[str, Operation] = {
    "ping": lambda b: b.ping(),
    "get_namespace": lambda b: b.get_namespace(NS),
    "save_namespace": lambda b: b.save_namespace(record()),
    "delete_namespace": lambda b: b.delete_namespace(NS),
    "list_namespaces": lambda b: b.list_namespaces(),
    "expired_namespaces": lambda b: b.expired_namespaces(T0),
    "get_memory": lambda b: b.get_memory(NS, str(uuid.uuid4())),
    "upsert_memory": lambda b: b.upsert_memory(memory(NS), unit(1)),
    "query_memories": lambda b: b.query_memories([NS, "team:x"], dense(1), MemoryFilter(now=T0), 5),
    "list_memories": lambda b: b.list_memories([NS, "team:x"], MemoryFilter(now=T0), 5),
    "delete_memory": lambda b: b.delete_memory(NS, str(uuid.uuid4())),
    "delete_expired": lambda b: b.delete_expired_memories(T0),
    "maintain": lambda b: b.maintain(),
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
    backend: VectorBackend,
    operation: Operation,
    failure: httpx.Response | Exception,
) -> None:
    if isinstance(failure, httpx.Response):
        mock.route().mock(return_value=failure)
    else:
        mock.route().mock(side_effect=failure)
    if operation is OPERATIONS["maintain"] and isinstance(backend, QdrantCollectionsBackend):
        await operation(backend)  # nothing to do in that layout
        return
    with pytest.raises(BackendUnavailable):
        await operation(backend)
    assert mock.calls


async def test_read_timeout_fails_fast(mock: respx.MockRouter, backend: VectorBackend) -> None:
    route = mock.route().mock(side_effect=httpx.ReadTimeout("timed out"))
    started = time.monotonic()
    with pytest.raises(BackendUnavailable):
        await backend.list_memories([NS], MemoryFilter(now=T0), 5)
    assert time.monotonic() - started < 0.5
    assert route.call_count == 1  # no retries behind our back


@pytest.mark.parametrize(("timeout_s", "sent"), [(0.2, 1), (1.0, 1), (2.5, 3)])
async def test_timeout_is_whole_seconds_rounded_up(
    mock: respx.MockRouter, timeout_s: float, sent: int
) -> None:
    mock_shared_ready(mock, DIM)
    backend = QdrantServerBackend(DIM, url=URL, timeout_s=timeout_s)
    await backend.start()
    await backend.close()
    assert all(c.request.extensions["timeout"]["read"] == sent for c in mock.calls)


@pytest.mark.parametrize(
    "failure",
    [error(400, "Wrong input: bad"), error(401, "Unauthorized"), error(403, "Forbidden")],
    ids=["400", "401", "403"],
)
async def test_client_errors_are_backend_errors(
    mock: respx.MockRouter, backend: VectorBackend, failure: httpx.Response
) -> None:
    mock.route().mock(return_value=failure)
    with pytest.raises(BackendError) as caught:
        await backend.list_memories([NS], MemoryFilter(now=T0), 5)
    assert type(caught.value) is BackendError
    with pytest.raises(BackendUnavailable):  # ping says "not answering now" for any failure
        await backend.ping()


async def test_malformed_response_does_not_leak_sdk_types(
    mock: respx.MockRouter, backend: VectorBackend
) -> None:
    mock.route().mock(return_value=ok(True))
    with pytest.raises(BackendUnavailable):
        await backend.get_namespace(NS)


async def test_api_key_header_is_sent(mock: respx.MockRouter) -> None:
    mock_shared_ready(mock, DIM)
    backend = QdrantServerBackend(DIM, url=URL, api_key="s3cret")
    await backend.start()
    await backend.close()
    assert mock.calls
    assert all(c.request.headers["api-key"] == "s3cret" for c in mock.calls)


def test_constructor_wants_exactly_one_target() -> None:
    for kind in (QdrantServerBackend, QdrantCollectionsBackend):
        with pytest.raises(ValueError, match="exactly one"):
            kind(DIM)
        with pytest.raises(ValueError, match="exactly one"):
            kind(DIM, url=URL, location=":memory:")


# -- the collections layout ------------------------------------------------------------------

COLL = "/collections/memory-workspace~abc"
ALL_INDEXES = ("created_us", "expires_us", "pinned", "kind")


def coll_info(
    owner: NamespaceRecord | None = None,
    indexed: tuple[str, ...] = ALL_INDEXES,
    *,
    keyword_vectors: bool = True,
) -> httpx.Response:
    metadata = {RECORD_KEY: namespace_to_json(owner)} if owner else None
    sparse = KEYWORD_VECTORS if keyword_vectors else None
    return collection_info(VECTORS, indexed, keyword=["kind"], metadata=metadata, sparse=sparse)


def coll_missing(collection: str = COLL.removeprefix("/collections/")) -> httpx.Response:
    return error(404, f"Not found: Collection `{collection}` doesn't exist!")


async def test_collections_start_makes_no_request(mock: respx.MockRouter) -> None:
    route = mock.route().mock(side_effect=httpx.ConnectError("refused"))
    backend = QdrantCollectionsBackend(DIM, url=URL, api_key="secret", timeout_s=0.2)
    await backend.start()
    await backend.close()
    assert not route.called


async def test_collection_creation_sends_cosine_size_record_and_indexes(
    mock: respx.MockRouter, coll: QdrantCollectionsBackend
) -> None:
    mock.get(COLL).mock(return_value=coll_missing())
    create = mock.put(COLL).mock(return_value=ok(True))
    index = mock.put(f"{COLL}/index").mock(return_value=completed())
    await coll.save_namespace(record(metadata={"a": 1}))
    sent = body(create.calls.last)
    assert sent["vectors"] == {"size": DIM, "distance": "Cosine"}
    assert "hnsw_config" not in sent
    assert sent["metadata"] == {RECORD_KEY: namespace_to_json(record(metadata={"a": 1}))}
    schemas = {body(c)["field_name"]: body(c)["field_schema"] for c in index.calls}
    assert schemas == {k: v for k, v in MEMORY_SCHEMAS.items() if k in ALL_INDEXES}
    assert all(c.request.url.params["wait"] == "true" for c in index.calls)


async def test_existing_collection_gets_its_record_replaced_and_indexes_healed(
    mock: respx.MockRouter, coll: QdrantCollectionsBackend
) -> None:
    mock.get(COLL).mock(return_value=coll_info(record(), indexed=("kind", "pinned")))
    create = mock.put(COLL).mock(return_value=ok(True))
    index = mock.put(f"{COLL}/index").mock(return_value=completed())
    patch = mock.patch(COLL).mock(return_value=ok(True))
    replacement = NamespaceRecord(name=NS, kind="org", created_at=T0)
    await coll.save_namespace(replacement)
    assert not create.called
    assert {body(c)["field_name"] for c in index.calls} == {"created_us", "expires_us"}
    assert body(patch.calls.last) == {"metadata": {RECORD_KEY: namespace_to_json(replacement)}}


async def test_lost_collection_creation_race_updates_the_winner(
    mock: respx.MockRouter, coll: QdrantCollectionsBackend
) -> None:
    mock.get(COLL).mock(side_effect=[coll_missing(), coll_info(record())])
    mock.put(COLL).mock(
        return_value=error(409, "Wrong input: Collection `memory-workspace~abc` already exists!")
    )
    patch = mock.patch(COLL).mock(return_value=ok(True))
    await coll.save_namespace(record())
    assert patch.called


async def test_collection_urls_use_mapped_names(
    mock: respx.MockRouter, coll: QdrantCollectionsBackend
) -> None:
    long_name = "custom:" + "x" * 249
    hashed = collection_name(long_name)
    assert hashed.startswith("memory-~")
    short = mock.get(COLL).mock(return_value=coll_missing())
    long = mock.get(f"/collections/{hashed}").mock(return_value=coll_missing(hashed))
    assert await coll.get_namespace(NS) is None
    assert await coll.get_namespace(long_name) is None
    assert long.called
    assert str(short.calls.last.request.url) == f"{URL}/collections/memory-workspace~abc"


async def test_collection_upsert_waits_and_sends_the_payload(
    mock: respx.MockRouter, coll: QdrantCollectionsBackend
) -> None:
    route = mock.put(f"{COLL}/points").mock(return_value=completed())
    written = memory(NS, pin=True, expires_at=T0 + timedelta(hours=1))
    await coll.upsert_memory(written, unit(1))
    assert route.calls.last.request.url.params["wait"] == "true"
    [point] = body(route.calls.last)["points"]
    assert (point["id"], point["payload"]) == (written.id, memory_to_payload(written))
    assert point["vector"] == pytest.approx(unit(1))


async def test_collection_upsert_into_missing_collection_is_namespace_gone(
    mock: respx.MockRouter, coll: QdrantCollectionsBackend
) -> None:
    mock.put(f"{COLL}/points").mock(return_value=coll_missing())
    with pytest.raises(NamespaceGone, match="namespace workspace:abc not found"):
        await coll.upsert_memory(memory(NS), unit(1))


async def test_missing_collection_reads_empty(
    mock: respx.MockRouter, coll: QdrantCollectionsBackend
) -> None:
    mock.route(path__startswith=COLL).mock(return_value=coll_missing())
    assert await coll.get_namespace(NS) is None
    assert await coll.get_memory(NS, str(uuid.uuid4())) is None
    assert await coll.query_memories([NS], dense(1), MemoryFilter(now=T0), 5) == []
    assert await coll.list_memories([NS], MemoryFilter(now=T0), 5) == []
    assert await coll.delete_memory(NS, str(uuid.uuid4())) is False
    assert await coll.delete_namespace(NS) is False


async def test_record_of_another_name_is_a_conflict(
    mock: respx.MockRouter, coll: QdrantCollectionsBackend
) -> None:
    mock.get(COLL).mock(return_value=coll_info(record("workspace:other")))
    writes = mock.route(method__in=["PUT", "PATCH", "DELETE"]).mock(return_value=ok(True))
    with pytest.raises(NamespaceConflict):
        await coll.get_namespace(NS)
    with pytest.raises(NamespaceConflict):
        await coll.save_namespace(record())
    with pytest.raises(NamespaceConflict):
        await coll.delete_namespace(NS)
    assert not writes.called


async def test_list_namespaces_keeps_namespace_collections_with_records(
    mock: respx.MockRouter, coll: QdrantCollectionsBackend
) -> None:
    names = ["memory-workspace~abc", "memory-team~bare", "memory-gone~now", "other-app"]
    mock.get("/collections").mock(return_value=collections(*names, "memory-memories"))
    mock.get(COLL).mock(return_value=coll_info(record()))
    mock.get("/collections/memory-team~bare").mock(return_value=coll_info(None))
    mock.get("/collections/memory-gone~now").mock(return_value=coll_missing("memory-gone~now"))
    assert await coll.list_namespaces() == [record()]


async def test_collection_query_asks_each_namespace_once_and_merges(
    mock: respx.MockRouter, coll: QdrantCollectionsBackend
) -> None:
    mine, theirs = memory(NS, kind="summary", pin=True), memory("team:x", kind="fact")

    def answer(item: MemoryRecord, score: float) -> httpx.Response:
        point = models.ScoredPoint(
            id=item.id, version=3, score=score, payload=memory_to_payload(item)
        )
        return ok([models.QueryResponse(points=[point]), models.QueryResponse(points=[])])

    route = mock.post(f"{COLL}/points/query/batch").mock(return_value=answer(mine, 0.25))
    other = mock.post("/collections/memory-team~x/points/query/batch").mock(
        return_value=ok([models.QueryResponse(points=[]), models.QueryResponse(points=[])])
    )
    other.return_value = answer(theirs, 0.875)
    now = T0 + timedelta(seconds=1)
    memory_filter = MemoryFilter(now=now, kinds=frozenset({"summary", "fact"}))
    hits = await coll.query_memories([NS, "team:x"], dense(1), memory_filter, 4)
    assert [(h.memory, h.score) for h in hits] == [(mine, 0.25), (theirs, 0.875)]
    assert (route.call_count, other.call_count) == (1, 1)
    searches = body(route.calls.last)["searches"]
    assert [s["filter"]["must"][0] for s in searches] == [
        {"key": "pinned", "match": {"value": 1}},
        {"key": "pinned", "match": {"value": 0}},
    ]
    for search in searches:
        assert (search["limit"], search["with_payload"]) == (4, True)
        assert {"key": "kind", "match": {"any": ["fact", "summary"]}} in search["filter"]["must"]
        assert search["filter"]["must_not"] == [
            {"key": "expires_us", "range": {"lte": pytest.approx(to_micros(now))}}
        ]


async def test_collection_list_orders_by_created_us_descending(
    mock: respx.MockRouter, coll: QdrantCollectionsBackend
) -> None:
    newest = [memory(NS, created_at=T0 - timedelta(minutes=i)) for i in range(2)]
    points = [
        models.ScoredPoint(id=m.id, version=1, score=0, payload=memory_to_payload(m))
        for m in newest
    ]
    route = mock.post(f"{COLL}/points/query/batch").mock(
        return_value=ok([models.QueryResponse(points=points)])
    )
    assert await coll.list_memories([NS], MemoryFilter(now=T0, pinned=False), 2) == newest
    [search] = body(route.calls.last)["searches"]
    assert search["query"] == {"order_by": {"key": "created_us", "direction": "desc"}}
    assert search["limit"] == 2
    assert search["filter"]["must"] == [{"key": "pinned", "match": {"value": 0}}]


async def test_collection_delete_memory_checks_then_deletes_with_wait(
    mock: respx.MockRouter, coll: QdrantCollectionsBackend
) -> None:
    item = memory(NS)
    mock.post(f"{COLL}/points").mock(
        return_value=ok([models.Record(id=item.id, payload=memory_to_payload(item))])
    )
    delete = mock.post(f"{COLL}/points/delete").mock(return_value=completed())
    assert await coll.delete_memory(NS, item.id) is True
    assert delete.calls.last.request.url.params["wait"] == "true"
    assert body(delete.calls.last) == {"points": [item.id]}
    assert await coll.delete_memory(NS, "not-a-uuid") is False
    assert delete.call_count == 1


async def test_collection_delete_expired_visits_every_namespace_collection(
    mock: respx.MockRouter, coll: QdrantCollectionsBackend
) -> None:
    found = ["memory-workspace~abc", "memory-team~x", "memory-memories", "other-app"]
    mock.get("/collections").mock(return_value=collections(*found))
    counts = mock.post(path__regex=r"/points/count$").mock(
        side_effect=[ok(models.CountResult(count=0)), ok(models.CountResult(count=3))]
    )
    delete = mock.post(path__regex=r"/points/delete$").mock(return_value=completed())
    assert await coll.delete_expired_memories(T0) == 3
    expired = {"must": [{"key": "expires_us", "range": {"lte": pytest.approx(to_micros(T0))}}]}
    assert [c.request.url.path for c in counts.calls] == [
        "/collections/memory-team~x/points/count",
        f"{COLL}/points/count",
    ]
    assert body(counts.calls.last) == {"filter": expired, "exact": True}
    assert [c.request.url.path for c in delete.calls] == [f"{COLL}/points/delete"]
    assert body(delete.calls.last) == {"filter": expired}
    assert delete.calls.last.request.url.params["wait"] == "true"
