"""The shared Qdrant layout against a mocked Qdrant REST API: the requests a server receives.

Covers what local mode cannot show (respx; the SDK speaks httpx): bodies, query
strings and URLs of searches, listings, upserts, namespace saves and deletes,
purges and the expiry sweep. Response bodies are built from
`qdrant_client.http.models` so their shapes are the SDK's own. The mocked
server and its helpers: tests/qdrant/http/conftest.py, tests/support/qdrant_server.py.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import respx
from qdrant_client.http import models

from adapters.errors import BackendUnavailable
from adapters.errors import NamespaceGone
from adapters.qdrant.layout import memory_to_payload
from adapters.qdrant.layout import namespace_to_json
from adapters.qdrant.layout import point_id
from adapters.qdrant.server.tenant_namespaces import generation_id
from adapters.qdrant.server.tenant_namespaces import incarnation_epoch
from adapters.qdrant.server.tenant_namespaces import purge_id
from adapters.qdrant.server.tenant_namespaces import record_id
from adapters.qdrant.server.tenants import QdrantServerBackend
from adapters.times import to_micros
from adapters.values import MemoryFilter
from adapters.values import MemoryVectors
from tests.support.qdrant_rest import completed
from tests.support.qdrant_rest import error
from tests.support.qdrant_rest import mock_shared_ready
from tests.support.qdrant_rest import ok
from tests.support.qdrant_server import MEM
from tests.support.qdrant_server import NS
from tests.support.qdrant_server import REC
from tests.support.qdrant_server import body
from tests.support.qdrant_server import no_memories
from tests.support.qdrant_server import record
from tests.support.qdrant_server import record_point
from tests.support.qdrant_server import stored
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import dense
from tests.support.records import memory
from tests.support.records import unit

pytestmark = pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")


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
    await shared.upsert_memory(written, MemoryVectors(unit(1)))
    assert route.calls.last.request.url.params["wait"] == "true"
    [point] = body(route.calls.last)["points"]
    assert point["id"] == point_id(NS, written.id)
    assert point["vector"] == {"": pytest.approx(unit(1))}
    assert point["payload"] == memory_to_payload(written, "e7")
    assert point["payload"]["ns"] == NS


async def test_upsert_into_missing_namespace_is_gone(
    mock: respx.MockRouter, shared: QdrantServerBackend
) -> None:
    no_memories(mock)
    writes = mock.put(f"{MEM}/points").mock(return_value=completed())
    with pytest.raises(NamespaceGone, match="namespace workspace:abc not found"):
        await shared.upsert_memory(memory(NS), MemoryVectors(unit(1)))
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
