"""The per-namespace collections layout against a mocked Qdrant server: the requests it sends."""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx
import pytest
import respx
from qdrant_client.http import models

from adapters.errors import NamespaceConflict
from adapters.errors import NamespaceGone
from adapters.qdrant.layout import memory_to_payload
from adapters.qdrant.layout import namespace_to_json
from adapters.qdrant.names import collection_name
from adapters.qdrant.server.keyword_vectors import KEYWORD_VECTORS
from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.namespace_collections_records import RECORD_KEY
from adapters.times import to_micros
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from tests.support.qdrant_rest import collection_info
from tests.support.qdrant_rest import collections
from tests.support.qdrant_rest import completed
from tests.support.qdrant_rest import error
from tests.support.qdrant_rest import ok
from tests.support.qdrant_server import MEMORY_SCHEMAS
from tests.support.qdrant_server import MEMORY_VECTORS
from tests.support.qdrant_server import NS
from tests.support.qdrant_server import URL
from tests.support.qdrant_server import VECTORS
from tests.support.qdrant_server import body
from tests.support.qdrant_server import record
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import dense
from tests.support.records import memory
from tests.support.records import unit

pytestmark = pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")


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
    assert sent["vectors"] == MEMORY_VECTORS
    idf = {"modifier": "idf"}
    assert sent["sparse_vectors"] == {"keywords": idf, "wordpieces": idf}
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
    await coll.upsert_memory(written, MemoryVectors(unit(1)))
    assert route.calls.last.request.url.params["wait"] == "true"
    [point] = body(route.calls.last)["points"]
    assert (point["id"], point["payload"]) == (written.id, memory_to_payload(written))
    assert point["vector"] == {"": pytest.approx(unit(1))}


async def test_collection_upsert_into_missing_collection_is_namespace_gone(
    mock: respx.MockRouter, coll: QdrantCollectionsBackend
) -> None:
    mock.put(f"{COLL}/points").mock(return_value=coll_missing())
    with pytest.raises(NamespaceGone, match="namespace workspace:abc not found"):
        await coll.upsert_memory(memory(NS), MemoryVectors(unit(1)))


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
