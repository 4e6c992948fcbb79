"""The shared Qdrant layout's first contact with a mocked server: collections, indexes, refusals."""

from __future__ import annotations

import httpx
import pytest
import respx

from adapters.errors import BackendMisconfigured
from adapters.errors import BackendUnavailable
from adapters.qdrant.server.tenant_collections import RECORD_INDEXES
from adapters.qdrant.server.tenants import QdrantServerBackend
from tests.support.qdrant_rest import collection_info
from tests.support.qdrant_rest import collections
from tests.support.qdrant_rest import completed
from tests.support.qdrant_rest import error
from tests.support.qdrant_rest import mock_shared_ready
from tests.support.qdrant_rest import ok
from tests.support.qdrant_rest import shared_store_info
from tests.support.qdrant_server import MEM
from tests.support.qdrant_server import MEMORY_SCHEMAS
from tests.support.qdrant_server import MEMORY_VECTORS
from tests.support.qdrant_server import NS
from tests.support.qdrant_server import REC
from tests.support.qdrant_server import RECORD_SCHEMAS
from tests.support.qdrant_server import URL
from tests.support.qdrant_server import VECTORS
from tests.support.qdrant_server import body
from tests.support.qdrant_server import no_memories
from tests.support.records import DIM

pytestmark = pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")


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
        "vectors": MEMORY_VECTORS,
        "sparse_vectors": {"keywords": {"modifier": "idf"}, "wordpieces": {"modifier": "idf"}},
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
