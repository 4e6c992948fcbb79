"""Token vectors on a mocked Qdrant server, both layouts: the collections of the version
before gain them in place, in rerank mode only (docs/backends.md, "Reranking by token
vectors"). Expected bodies: tests/support/qdrant_tokens.py.
"""

from __future__ import annotations

import pytest
import respx
from qdrant_client.http import models

from adapters.errors import BackendMisconfigured
from adapters.qdrant.server.keyword_vectors import KEYWORD_VECTORS
from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.namespace_collections_records import RECORD_KEY
from adapters.qdrant.server.tenant_collections import MEMORY_STORE_INDEXES
from adapters.qdrant.server.tenants import QdrantServerBackend
from adapters.qdrant.server.token_vectors import token_params
from tests.support.qdrant_rest import collection_info
from tests.support.qdrant_rest import collections
from tests.support.qdrant_rest import completed
from tests.support.qdrant_rest import error
from tests.support.qdrant_rest import memory_vectors
from tests.support.qdrant_rest import mock_shared_ready
from tests.support.qdrant_rest import ok
from tests.support.qdrant_server import MEM
from tests.support.qdrant_server import URL
from tests.support.qdrant_server import body
from tests.support.qdrant_server import record
from tests.support.qdrant_tokens import COLL
from tests.support.qdrant_tokens import NEW_TOKENS
from tests.support.qdrant_tokens import NEW_WORDPIECES
from tests.support.qdrant_tokens import PLACEMENT
from tests.support.qdrant_tokens import old_collection
from tests.support.qdrant_tokens import started_collections
from tests.support.qdrant_tokens import started_shared
from tests.support.qdrant_tokens import upgrade_routes
from tests.support.qdrant_tokens import wordpieces_route
from tests.support.records import DIM


@pytest.mark.parametrize(
    ("has_tokens", "rerank", "upgraded"),
    [
        pytest.param(False, True, True, id="rerank gives the version before its token vectors"),
        pytest.param(False, False, False, id="other modes leave the version before as it is"),
        pytest.param(True, True, False, id="a collection with token vectors is not upgraded"),
    ],
)
async def test_a_shared_collection_gains_token_vectors_in_rerank_mode_only(
    mock: respx.MockRouter, has_tokens: bool, rerank: bool, upgraded: bool
) -> None:
    mock_shared_ready(mock, DIM, token_vectors=has_tokens)
    add, place = upgrade_routes(mock, MEM)
    await (await started_shared(mock, tokens=rerank)).close()
    added = [NEW_TOKENS] if upgraded else []
    assert [body(c) for c in add.calls] == added
    assert [c.request.url.params["wait"] for c in add.calls] == ["true"] * len(added)
    assert [body(c) for c in place.calls] == ([PLACEMENT] if upgraded else [])


async def test_an_upgrade_cut_short_is_placed_at_the_next_start(mock: respx.MockRouter) -> None:
    """Added, not yet placed (a crash between the two requests): only the placement."""
    mock_shared_ready(mock, DIM, token_vectors=False)
    added = memory_vectors(DIM, token_vectors=True)
    assert isinstance(added, dict)
    added["tokens"] = added["tokens"].model_copy(
        update={"hnsw_config": None, "quantization_config": None, "on_disk": None}
    )
    keywords = ["ns", "epoch", "kind"]
    info = collection_info(added, MEMORY_STORE_INDEXES, keyword=keywords, sparse=KEYWORD_VECTORS)
    mock.get(MEM).mock(return_value=info)
    add, place = upgrade_routes(mock, MEM)
    await (await started_shared(mock, tokens=True)).close()
    assert not add.called
    assert [body(c) for c in place.calls] == [PLACEMENT]


async def test_rerank_on_a_server_before_1_18_stops_the_start_with_one_line(
    mock: respx.MockRouter,
) -> None:
    mock_shared_ready(mock, DIM, token_vectors=False)
    mock.put(f"{MEM}/vectors/tokens").mock(return_value=error(404, "Not Found"))
    with pytest.raises(BackendMisconfigured) as refused:
        await QdrantServerBackend(DIM, url=URL, tokens=True).start()
    assert str(refused.value) == (
        "qdrant cannot add the token vectors to collection memory-memories in place (needs"
        " Qdrant 1.18 or later): upgrade Qdrant, or set MEMORY_PLUGIN_SEARCH=hybrid (no"
        " search reranks); with it set, `memory-plugin-vector export` and `import` into a"
        " new MEMORY_PLUGIN_COLLECTION_PREFIX make collections that have them"
    )


async def test_a_namespace_collection_of_the_version_before_gains_them_on_save(
    mock: respx.MockRouter,
) -> None:
    mock.get(COLL).mock(return_value=old_collection())
    add = mock.put(f"{COLL}/vectors/tokens").mock(return_value=completed())
    pieces = wordpieces_route(mock, COLL)
    patches = mock.patch(COLL).mock(return_value=ok(True))
    backend = await started_collections(mock)
    await backend.save_namespace(record())
    await backend.close()
    assert [body(c) for c in add.calls] == [NEW_TOKENS]
    assert [body(c) for c in pieces.calls] == [NEW_WORDPIECES]
    assert body(patches.calls[0]) == PLACEMENT  # then the record, as before
    assert RECORD_KEY in body(patches.calls[1])["metadata"]


async def test_a_rerank_start_upgrades_every_older_namespace_collection(
    mock: respx.MockRouter,
) -> None:
    mock.get(COLL).mock(return_value=old_collection())
    add, place = upgrade_routes(mock, COLL)
    backend = await started_collections(mock, "memory-workspace~abc", "other-app")
    assert [body(c) for c in add.calls] == [NEW_TOKENS]
    assert [body(c) for c in place.calls] == [PLACEMENT]
    await backend.close()


async def test_a_collections_start_before_1_18_stops_with_one_line(
    mock: respx.MockRouter,
) -> None:
    mock.get("/collections").mock(return_value=collections("memory-workspace~abc"))
    mock.get(COLL).mock(return_value=old_collection())
    mock.put(f"{COLL}/vectors/tokens").mock(return_value=error(404, "Not Found"))
    with pytest.raises(BackendMisconfigured, match=r"memory-workspace~abc in place \(needs"):
        await QdrantCollectionsBackend(DIM, url=URL, tokens=True).start()


async def test_token_vectors_of_another_size_are_dropped_and_added_at_the_new_one(
    mock: respx.MockRouter,
) -> None:
    """The embedder's projection changed the token vectors' size: the old ones go, the new
    multivector is added and placed, and the fill gives every memory its own again."""
    mock_shared_ready(mock, DIM, token_vectors=True)
    dropped = mock.delete(f"{MEM}/vectors/tokens").mock(return_value=completed())
    unpieced = mock.delete(f"{MEM}/vectors/wordpieces").mock(return_value=completed())
    add, place = upgrade_routes(mock, MEM)
    backend = QdrantServerBackend(DIM, url=URL, tokens=True, token_dimension=DIM // 2)
    await backend.start()
    await backend.close()
    assert (dropped.call_count, unpieced.call_count) == (1, 1)  # the fill finds them all
    resized = {"dense": {**NEW_TOKENS["dense"], "size": DIM // 2}}
    assert [body(c) for c in add.calls] == [resized]
    assert [body(c) for c in place.calls] == [PLACEMENT]


async def test_token_vectors_by_cosine_are_dropped_and_added_for_dot_products(
    mock: respx.MockRouter,
) -> None:
    """Made before the rerank weighed query tokens: cosine would undo the query's weights,
    so the multivector is made again with Dot, and the wordpieces added beside it."""
    cosine = token_params(DIM).model_copy(update={"distance": models.Distance.COSINE})
    vectors = {"": models.VectorParams(size=DIM, distance=models.Distance.COSINE), "tokens": cosine}
    mock_shared_ready(mock, DIM, token_vectors=True)
    mock.get(MEM).mock(
        return_value=collection_info(
            vectors, MEMORY_STORE_INDEXES, keyword=["tenant", "kind"], sparse=KEYWORD_VECTORS
        )
    )
    dropped = mock.delete(f"{MEM}/vectors/tokens").mock(return_value=completed())
    add, place = upgrade_routes(mock, MEM)
    pieces = wordpieces_route(mock, MEM)
    await (await started_shared(mock, tokens=True)).close()
    assert dropped.call_count == 1
    assert [body(c) for c in add.calls] == [NEW_TOKENS]
    assert [body(c) for c in place.calls] == [PLACEMENT]
    assert [body(c) for c in pieces.calls] == [NEW_WORDPIECES]


async def test_token_vectors_of_the_configured_size_stay(mock: respx.MockRouter) -> None:
    mock_shared_ready(mock, DIM, token_vectors=True)
    dropped = mock.delete(f"{MEM}/vectors/tokens").mock(return_value=completed())
    add, place = upgrade_routes(mock, MEM)
    await (await started_shared(mock, tokens=True)).close()
    assert not dropped.called
    assert not add.called
    assert not place.called
