"""Token vectors on a mocked Qdrant server: the bodies Qdrant's REST API expects, and helpers.

For tests/qdrant/http/test_token_*.py. Expected bodies are written out here as
Qdrant spells them (not built from the adapter's own models), so a drift in the
adapter fails those tests.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import respx

from adapters.qdrant.layout import namespace_to_json
from adapters.qdrant.server.keyword_vectors import KEYWORD_VECTORS
from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.namespace_collections_records import RECORD_KEY
from adapters.qdrant.server.tenants import QdrantServerBackend
from tests.support.qdrant_rest import collection_info
from tests.support.qdrant_rest import collections
from tests.support.qdrant_rest import completed
from tests.support.qdrant_rest import memory_vectors
from tests.support.qdrant_rest import ok
from tests.support.qdrant_server import URL
from tests.support.qdrant_server import record
from tests.support.records import DIM
from tests.support.records import unit

COLL = "/collections/memory-workspace~abc"
TOKENS = [unit(1), unit(0, 1)]
# PUT /collections/{name}/vectors/tokens, then PATCH /collections/{name}: the upgrade.
NEW_TOKENS = {
    "dense": {
        "size": DIM,
        "distance": "Dot",
        "multivector_config": {"comparator": "max_sim"},
        "datatype": "float16",
    }
}
PLACEMENT = {
    "vectors": {
        "tokens": {
            "hnsw_config": {"m": 0, "payload_m": 0},
            "quantization_config": {"scalar": {"type": "int8", "always_ram": False}},
            "on_disk": True,
        }
    }
}


async def started_shared(mock: respx.MockRouter, *, tokens: bool) -> QdrantServerBackend:
    backend = QdrantServerBackend(DIM, url=URL, tokens=tokens)
    await backend.start()
    return backend


async def started_collections(mock: respx.MockRouter, *names: str) -> QdrantCollectionsBackend:
    """The `collections` layout in rerank mode; its start lists the collections."""
    listing = mock.get("/collections").mock(return_value=collections(*names))
    backend = QdrantCollectionsBackend(DIM, url=URL, tokens=True)
    await backend.start()
    assert listing.called
    return backend


# PUT /collections/{name}/vectors/wordpieces: the sparse vector added beside them.
NEW_WORDPIECES = {"sparse": {"modifier": "idf"}}


def upgrade_routes(mock: respx.MockRouter, path: str) -> tuple[respx.Route, respx.Route]:
    """The token vectors' add and placement (the wordpieces' add: `wordpieces_route`)."""
    add = mock.put(f"{path}/vectors/tokens").mock(return_value=completed())
    place = mock.patch(path).mock(return_value=ok(True))
    wordpieces_route(mock, path)
    return add, place


def wordpieces_route(mock: respx.MockRouter, path: str) -> respx.Route:
    return mock.put(f"{path}/vectors/wordpieces").mock(return_value=completed())


def old_collection() -> httpx.Response:
    """A namespace collection made by the version before token vectors."""
    return collection_info(
        memory_vectors(DIM, token_vectors=False),
        ("created_us", "expires_us", "pinned", "kind"),
        keyword=["kind"],
        metadata={RECORD_KEY: namespace_to_json(record())},
        sparse=KEYWORD_VECTORS,
    )


def rerank_search(where: Any, limit: int) -> dict[str, Any]:
    """The request ranking.py promises for a rerank search, as Qdrant's Query API spells it:
    the fused stage (cosine of both candidate lists + 0.03 x BM25), its top 75 scored by
    MaxSim against the query's token vectors, the answer by fused + 4 x MaxSim / 2."""
    dense = {"query": pytest.approx(unit(1)), "filter": where, "limit": 100}
    keywords = {
        "query": {"indices": [3], "values": [0.5]},
        "using": "keywords",
        "filter": where,
        "limit": 100,
    }
    defaults = {"$score[0]": -1.0, "$score[1]": 0.0}
    fused = {
        "prefetch": [
            {"prefetch": [dense, keywords], "query": pytest.approx(unit(1)), "limit": 200},
            keywords,
        ],
        "query": {
            "formula": {"sum": ["$score[0]", {"mult": [0.03, "$score[1]"]}]},
            "defaults": defaults,
        },
        "limit": 75,
    }
    max_sim = {
        "prefetch": [fused],
        "query": [pytest.approx(unit(1)), pytest.approx(unit(0, 1))],
        "using": "tokens",
        "limit": 75,
    }
    return {
        "prefetch": [fused, max_sim],
        "query": {
            "formula": {"sum": ["$score[0]", {"mult": [2.0, "$score[1]"]}]},
            "defaults": defaults,
        },
        "limit": limit,
        "with_payload": True,
    }


def leaf_filter(search: dict[str, Any]) -> Any:
    return search["prefetch"][0]["prefetch"][1]["filter"]
