"""A Qdrant server reranks with weighed query tokens as the embedded store does.

The same memories (the real model's vectors, token vectors and wordpieces) written into the
embedded store and into qdrant-client's local mode (the shared layout), the same questions
asked of both as a weighed rerank without keyword feedback (which a server does not do),
in both server layouts:
both answer the same top 10 for nearly every question. They differ only where byte codes
and float16 round a near tie differently.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.keyword_encoder import KeywordEncoder
from adapters.qdrant.server.connection import QdrantConnection
from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.server_layouts import QdrantServerLayout
from adapters.qdrant.server.tenants import QdrantServerBackend
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import SearchQuery
from plugin.embedding.encoders import SentenceTransformerEncoder
from tests.support.records import T0
from tests.support.records import everything
from tests.support.records import memory

NS = "workspace:weighed"
NAMES = ["Caroline", "Melanie", "Jon", "Gina", "Tim", "Audrey", "Evan", "Sam"]
DOINGS = [
    "went to a pottery class",
    "adopted a puppy from the shelter",
    "ran a half marathon",
    "painted a sunset over the lake",
    "started learning the violin",
    "opened a small bakery",
    "visited her grandmother",
    "joined a hiking club",
    "fixed the kitchen sink",
    "read a book about the ocean",
    "planted tomatoes in the garden",
    "went camping with friends",
]
PLACES = ["in Tampa", "in the city", "near the beach", "at the studio", "downtown", "at home"]
DAYS = ["on Monday", "last weekend", "in May", "yesterday", "on her birthday", "in the spring"]
MEMORIES = 120
QUESTIONS = 30
AGREEING = 0.95


def contents(rng: random.Random) -> list[str]:
    return [
        f"{rng.choice(NAMES)}: I {rng.choice(DOINGS)} {rng.choice(PLACES)} {rng.choice(DAYS)}."
        for _ in range(MEMORIES)
    ]


def questions(rng: random.Random) -> list[str]:
    forms = ["What did {} do {}?", "Where did {} go {}?", "When did {} {}?"]
    return [
        rng.choice(forms).format(rng.choice(NAMES), rng.choice(DAYS + DOINGS))
        for _ in range(QUESTIONS)
    ]


@pytest.mark.parametrize("layout", [QdrantServerBackend, QdrantCollectionsBackend])
async def test_a_server_and_the_embedded_store_agree_on_the_top_ten(
    tmp_path: Path,
    encoder: SentenceTransformerEncoder,
    connection: QdrantConnection,
    layout: type[QdrantServerLayout],
) -> None:
    rng = random.Random(66)
    keywords = KeywordEncoder()
    texts = contents(rng)
    edge = QdrantEdgeBackend(encoder.dimension, tmp_path, token_dimension=encoder.token_dimension)
    server = layout(
        encoder.dimension,
        connection=connection,
        tokens=True,
        token_dimension=encoder.token_dimension,
    )
    await edge.start()
    await server.start()
    try:
        for store in (edge, server):
            await store.save_namespace(NamespaceRecord(NS, "workspace", T0))
        for text, embedded in zip(texts, encoder.embed(texts, tokens=True), strict=True):
            written = memory(NS, content=text)
            vectors = MemoryVectors(embedded.vector, keywords.document(text), embedded.tokens)
            await edge.upsert_memory(written, vectors)
            await server.upsert_memory(written, vectors)
        asked = questions(rng)
        same = 0
        for text, embedded in zip(asked, encoder.embed(asked, tokens=True), strict=True):
            query = SearchQuery(
                embedded.vector, keywords.query(text), embedded.tokens, weigh_tokens=True
            )
            by_edge = await edge.query_memories([NS], query, everything(), 10)
            by_server = await server.query_memories([NS], query, everything(), 10)
            same += {h.memory.id for h in by_edge} == {h.memory.id for h in by_server}
    finally:
        await edge.close()
        await server.close()
    assert same >= AGREEING * len(asked), f"{same} of {len(asked)} questions agree"
