"""A Qdrant server store of the version before token vectors, upgraded in place.

Both layouts in qdrant-client's local mode: collections as the previous version made
them (the embedding unnamed, the keyword vector, no `tokens`), memories written by it.
A start in another mode leaves them so; a start in rerank mode gives each collection
the multivector, searches meanwhile rank as hybrid did (MaxSim 0), and the background
fill (plugin/upgrades/vector_fill.py) gives every memory its token vectors.
"""

from __future__ import annotations

import numpy as np
import pytest
from qdrant_client.http import models

from adapters.keyword_encoder import KeywordEncoder
from adapters.qdrant.names import collection_name
from adapters.qdrant.ranking import RERANK_WEIGHT
from adapters.qdrant.server.connection import QdrantConnection
from adapters.qdrant.server.keyword_vectors import KEYWORD_VECTORS
from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.server_layouts import QdrantServerLayout
from adapters.qdrant.server.tenants import QdrantServerBackend
from adapters.qdrant.server.token_vectors import has_token_vector
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import PackedTokens
from adapters.values import SearchQuery
from plugin.embedding.embedding_tokens import Embedding
from plugin.scheduling.work import Work
from plugin.upgrades import vector_fill
from tests.support.qdrant_local import client
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit

NS = "workspace:old"
KEYWORDS = KeywordEncoder()
QUESTION = "router ticket"
QUERY_TOKENS = [unit(1), unit(0, 1)]


async def old_collection(connection: QdrantConnection, name: str) -> None:
    """A memory collection as the version before token vectors created it."""
    dense = models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    raw = await client(connection)
    await raw.create_collection(name, vectors_config=dense, sparse_vectors_config=KEYWORD_VECTORS)


async def embed(text: str, work: Work) -> Embedding:
    """The model as the fill sees it: a sentence vector carrying its token vectors, each
    with its wordpiece's id."""
    rows = QUERY_TOKENS if "router" in text else [unit(0, 0, 1)]
    ids = np.arange(len(rows)) + (100 if "router" in text else 200)
    return Embedding(unit(1, 1), PackedTokens(np.array(rows, dtype=np.float32), ids))


def query(tokens: list[list[float]] | None = None) -> SearchQuery:
    return SearchQuery(unit(1), KEYWORDS.query(QUESTION), tokens)


@pytest.mark.parametrize("layout", [QdrantServerBackend, QdrantCollectionsBackend])
async def test_a_store_of_the_version_before_gains_token_vectors_in_rerank_mode(
    connection: QdrantConnection, layout: type[QdrantServerLayout]
) -> None:
    shared = layout is QdrantServerBackend
    name = "memory-memories" if shared else collection_name(NS)
    await old_collection(connection, name)
    before = layout(DIM, connection=connection)  # the previous version's writes
    await before.start()
    await before.save_namespace(NamespaceRecord(name=NS, kind="workspace", created_at=T0))
    written = [memory(NS, content=text) for text in ("the router ticket", "a weekly note")]
    for item in written:
        await before.upsert_memory(item, MemoryVectors(unit(1, 1), KEYWORDS.document(item.content)))
    raw = await client(connection)
    assert not has_token_vector(await raw.get_collection(name))

    rerank = layout(DIM, connection=connection, tokens=True)
    await rerank.start()
    assert has_token_vector(await raw.get_collection(name))
    hybrid = await rerank.query_memories([NS], query(), everything(), 10)
    meanwhile = await rerank.query_memories([NS], query(QUERY_TOKENS), everything(), 10)
    assert meanwhile == hybrid  # MaxSim 0 for every memory without token vectors

    maker = vector_fill.tokens(embed)
    filled = await vector_fill.fill_store(rerank, maker)
    assert filled is not None
    assert filled.indexed == len(written)
    again = await vector_fill.fill_store(rerank, maker)
    assert again == vector_fill.Filled(0, complete=True)  # the progress is stored
    after = {
        h.memory.id: h.score
        for h in await rerank.query_memories([NS], query(QUERY_TOKENS), everything(), 10)
    }
    fused = {h.memory.id: h.score for h in hybrid}
    assert after[written[0].id] - fused[written[0].id] == pytest.approx(RERANK_WEIGHT, abs=0.02)
    assert after[written[1].id] == pytest.approx(fused[written[1].id], abs=0.02)
