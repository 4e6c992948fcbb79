"""Token vectors on a mocked Qdrant server, both layouts: what a write, a rerank search and
the background fill send. Expected bodies: tests/support/qdrant_tokens.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np
import pytest
import respx
from qdrant_client.http import models

from adapters.base import VectorBackend
from adapters.qdrant.server.tenants import QdrantServerBackend
from adapters.values import MemoryFilter
from adapters.values import MemoryVectors
from adapters.values import PackedTokens
from adapters.values import SearchQuery
from adapters.values import SparseVector
from adapters.values import VectorKind
from tests.support.qdrant_rest import completed
from tests.support.qdrant_rest import error
from tests.support.qdrant_rest import mock_shared_ready
from tests.support.qdrant_rest import ok
from tests.support.qdrant_server import MEM
from tests.support.qdrant_server import NS
from tests.support.qdrant_server import body
from tests.support.qdrant_server import record_point
from tests.support.qdrant_server import stored
from tests.support.qdrant_tokens import COLL
from tests.support.qdrant_tokens import TOKENS
from tests.support.qdrant_tokens import leaf_filter
from tests.support.qdrant_tokens import rerank_search
from tests.support.qdrant_tokens import started_collections
from tests.support.qdrant_tokens import started_shared
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import memory
from tests.support.records import unit


@pytest.fixture
async def rerank(mock: respx.MockRouter) -> AsyncIterator[QdrantServerBackend]:
    """The shared layout in rerank mode, set up, with one namespace of epoch e1."""
    mock_shared_ready(mock, DIM)
    backend = await started_shared(mock, tokens=True)
    mock.routes.clear()
    mock.post("/collections/memory-namespaces/points").mock(
        return_value=ok([record_point(NS, "e1")])
    )
    yield backend
    await backend.close()


def upsert_route(mock: respx.MockRouter, layout: str) -> respx.Route:
    return mock.put(f"{MEM if layout == 'shared' else COLL}/points").mock(return_value=completed())


@pytest.mark.parametrize("layout", ["shared", "collections"])
async def test_an_upsert_carries_token_vectors_only_when_given(
    mock: respx.MockRouter, rerank: QdrantServerBackend, layout: str
) -> None:
    backend: VectorBackend = rerank
    if layout == "collections":
        backend = await started_collections(mock)
    route = upsert_route(mock, layout)
    keywords = SparseVector((3,), (0.5,))
    await backend.upsert_memory(memory(NS), MemoryVectors(unit(1), keywords, TOKENS))
    await backend.upsert_memory(memory(NS), MemoryVectors(unit(1), keywords))
    with_tokens, without = (body(c)["points"][0]["vector"] for c in route.calls)
    assert with_tokens == {
        "": pytest.approx(unit(1)),
        "keywords": {"indices": [3], "values": [0.5]},
        "tokens": [pytest.approx(unit(1)), pytest.approx(unit(0, 1))],
    }
    assert without == {"": pytest.approx(unit(1)), "keywords": {"indices": [3], "values": [0.5]}}
    if backend is not rerank:
        await backend.close()


async def test_a_rerank_search_is_one_request_with_the_fused_stage_and_max_sim(
    mock: respx.MockRouter, rerank: QdrantServerBackend
) -> None:
    found = memory(NS)
    answers = [models.QueryResponse(points=[stored(found, "e1", 2.5)])]
    batch = mock.post(f"{MEM}/points/query/batch").mock(return_value=ok(answers))
    query = SearchQuery(unit(1), SparseVector((3,), (0.5,)), TOKENS)
    hits = await rerank.query_memories([NS], query, MemoryFilter(now=T0, pinned=False), 5)
    assert [(hit.memory, hit.score) for hit in hits] == [(found, 2.5)]
    [search] = body(batch.calls.last)["searches"]
    assert leaf_filter(search)["must"][:2] == [
        {"key": "ns", "match": {"value": NS}},
        {"key": "epoch", "match": {"value": "e1"}},
    ]
    assert search == rerank_search(leaf_filter(search), 5)


async def test_a_weighed_rerank_asks_each_wordpieces_idf_then_scales_its_rows(
    mock: respx.MockRouter, rerank: QdrantServerBackend
) -> None:
    """IDF 3.0 for wordpiece 2040, 1.5 for 1996: the second row at half its length, and
    MaxSim's weight 4 / (1 + 0.5) (adapters/qdrant/wordpieces.py)."""
    idf = [  # asked in the ids' order: 1996, then 2040
        models.QueryResponse(points=[models.ScoredPoint(id=1, version=0, score=1.5)]),
        models.QueryResponse(points=[models.ScoredPoint(id=2, version=0, score=3.0)]),
    ]
    search = ok([models.QueryResponse(points=[])])
    batch = mock.post(f"{MEM}/points/query/batch").mock(side_effect=[ok(idf), search])
    tokens = PackedTokens(np.array(TOKENS, dtype=np.float32), np.array([2040, 1996]))
    query = SearchQuery(unit(1), SparseVector((3,), (0.5,)), tokens, weigh_tokens=True)
    await rerank.query_memories([NS], query, MemoryFilter(now=T0, pinned=False), 5)
    asked, searched = (body(call)["searches"] for call in batch.calls)
    assert asked == [
        {
            "query": {"nearest": {"indices": [piece], "values": [1.0]}},
            "using": "wordpieces",
            "limit": 1,
            "with_payload": False,
        }
        for piece in (1996, 2040)
    ]
    [reranked] = searched
    expected = rerank_search(leaf_filter(reranked), 5)
    half = [0.5 * x for x in unit(0, 1)]
    expected["prefetch"][1]["query"] = [pytest.approx(unit(1)), pytest.approx(half)]
    expected["query"]["formula"]["sum"][1]["mult"][0] = pytest.approx(4 / 1.5)
    assert reranked == expected


async def test_the_collections_layout_asks_the_same_per_namespace(
    mock: respx.MockRouter,
) -> None:
    backend = await started_collections(mock)
    answer = models.QueryResponse(points=[])
    batch = mock.post(f"{COLL}/points/query/batch").mock(return_value=ok([answer]))
    query = SearchQuery(unit(1), SparseVector((3,), (0.5,)), TOKENS)
    await backend.query_memories([NS], query, MemoryFilter(now=T0, pinned=True), 7)
    [search] = body(batch.calls.last)["searches"]
    assert search == rerank_search(leaf_filter(search), 7)
    await backend.close()


async def test_the_fill_walks_memories_without_token_vectors_and_sets_them_if_still_unset(
    mock: respx.MockRouter, rerank: QdrantServerBackend
) -> None:
    point = "0b9f3c56-3a4e-5c7e-9b1d-2f7a8e6d4c10"
    record = models.Record(id=point, payload={"content": "the router ticket"})
    scroll = mock.post(f"{MEM}/points/scroll").mock(
        return_value=ok(models.ScrollResult(points=[record], next_page_offset=None))
    )
    update = mock.put(f"{MEM}/points/vectors").mock(return_value=completed())
    part = rerank.vector_fill
    found, cursor = await part.missing(VectorKind.TOKENS, None, 64)
    key = f"memory-memories/{point}"  # a walk over the one memories collection
    assert (found, cursor) == ([(key, "the router ticket")], None)
    unset = {"must_not": [{"has_vector": "wordpieces"}]}  # written with the token vectors
    asked = body(scroll.calls.last)
    assert (asked["filter"], asked["limit"], asked["with_payload"]) == (unset, 64, ["content"])
    rows = [pytest.approx(unit(1)), pytest.approx(unit(0, 1))]
    assert await part.fill(VectorKind.TOKENS, [(key, TOKENS)]) == 1  # no ids: no wordpieces
    sent = body(update.calls.last)
    assert sent["update_filter"] == unset
    assert sent["points"] == [{"id": point, "vector": {"tokens": rows}}]
    with_ids = PackedTokens(np.array(TOKENS), np.array([2040, 1996]))
    assert await part.fill(VectorKind.TOKENS, [(key, with_ids)]) == 1
    pieces = {"indices": [1996, 2040], "values": [1.0, 1.0]}
    assert body(update.calls.last)["points"] == [
        {"id": point, "vector": {"tokens": rows, "wordpieces": pieces}}
    ]


async def test_a_collection_still_without_token_vectors_is_searched_as_fused(
    mock: respx.MockRouter,
) -> None:
    """Made meanwhile by an older replica: MaxSim 0 for all, the fused ranking alone."""
    backend = await started_collections(mock)
    lacking = error(400, "Wrong input: Not existing vector name error: tokens")
    answer = ok([models.QueryResponse(points=[stored(memory(NS), "e1", 0.9)])])
    batch = mock.post(f"{COLL}/points/query/batch").mock(side_effect=[lacking, answer])
    query = SearchQuery(unit(1), SparseVector((3,), (0.5,)), TOKENS)
    hits = await backend.query_memories([NS], query, MemoryFilter(now=T0, pinned=True), 7)
    assert [hit.score for hit in hits] == [0.9]
    [again] = body(batch.calls.last)["searches"]
    assert again == rerank_search(leaf_filter(again), 7)["prefetch"][0] | {
        "limit": 7,
        "with_payload": True,
    }
    await backend.close()
