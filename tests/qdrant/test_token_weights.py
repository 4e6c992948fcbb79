"""The rerank's weights: each query token by its wordpiece's rarity (adapters/qdrant/wordpieces.py).

Real model, real embedded store. A reranked search's scores are checked against a reference
computed here from the token vectors the model gave and the store's fused scores: the fused
score plus 4 x MaxSim's mean, weighted by each query wordpiece's IDF over the memories written
(Qdrant's BM25 IDF, counted here from the tokenizer's ids), or plain where the query asks no
weights. A store whose token vectors predate wordpieces gains them from the fill.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as qe

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.engine.engine import idf_requests
from adapters.keyword_encoder import KeywordEncoder
from adapters.qdrant.ranking import RERANK_WEIGHT
from adapters.qdrant.wordpieces import WORDPIECES_VECTOR
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import PackedTokens
from adapters.values import SearchQuery
from plugin.embedding.embedding_tokens import Embedding
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.scheduling.work import Work
from plugin.upgrades import vector_fill
from tests.support.keyword_store import stored_vectors
from tests.support.records import T0
from tests.support.records import everything
from tests.support.records import memory

NAME = "workspace:weights"
CONTENTS = [
    "Caroline went to the pottery class on Tuesday",
    "Melanie said the weather was lovely at the beach",
    "What did you think of the new bakery downtown?",
    "I did not like the movie we saw last night",
    "Caroline adopted a puppy from the shelter in Tampa",
    "The team meeting moved to Thursday afternoon",
    "Did you finish the report for the finance review?",
    "We painted the kitchen a pale shade of green",
    "My sister is moving to Denver next spring",
    "The pottery wheel in the studio is broken again",
    "What time does the library close on weekends?",
    "I ran five miles along the river this morning",
    "Melanie started learning the violin last year",
    "The invoice was escalated to finance on Monday",
    "Did the plumber fix the leak under the sink?",
    "We booked a cabin by the lake for the holidays",
]
QUESTION = "What did Caroline make at the pottery class?"


def qdrant_idf(holders: int, total: int) -> float:
    """The engine's IDF modifier (BM25's): ln(1 + (N - n + 0.5) / (n + 0.5))."""
    return math.log(1 + (total - holders + 0.5) / (holders + 0.5))


def reference(
    fused: float, query: PackedTokens, memory_tokens: PackedTokens, weights: np.ndarray
) -> float:
    """The rerank's score: fused + RERANK_WEIGHT * sum_i p_i max_j q_i . d_j, p = weights/sum."""
    best = (query.array() @ memory_tokens.array().T).max(axis=1)
    return fused + RERANK_WEIGHT * float((weights / weights.sum()) @ best)


async def written(
    tmp_path: Path, encoder: SentenceTransformerEncoder, keywords: KeywordEncoder
) -> tuple[QdrantEdgeBackend, dict[str, PackedTokens]]:
    store = QdrantEdgeBackend(encoder.dimension, tmp_path, token_dimension=encoder.token_dimension)
    await store.start()
    await store.save_namespace(NamespaceRecord(NAME, "workspace", T0))
    tokens: dict[str, PackedTokens] = {}
    for content, embedded in zip(CONTENTS, encoder.embed(CONTENTS, tokens=True), strict=True):
        record = memory(NAME, content=content)
        assert isinstance(embedded.tokens, PackedTokens)
        tokens[record.id] = embedded.tokens
        vectors = MemoryVectors(embedded.vector, keywords.document(content), embedded.tokens)
        await store.upsert_memory(record, vectors)
    return store, tokens


@pytest.mark.parametrize("weigh", [True, False], ids=["idf", "uniform"])
async def test_a_rerank_scores_by_the_idf_weighted_mean_of_maxsim(
    tmp_path: Path, encoder: SentenceTransformerEncoder, weigh: bool
) -> None:
    keywords = KeywordEncoder()
    store, tokens = await written(tmp_path, encoder, keywords)
    try:
        asked = encoder.embed([QUESTION], tokens=True)[0]
        assert isinstance(asked.tokens, PackedTokens)
        assert asked.tokens.ids is not None
        hybrid = SearchQuery(asked.vector, keywords.query(QUESTION))
        fused = {
            hit.memory.id: hit.score
            for hit in await store.query_memories([NAME], hybrid, everything(), len(CONTENTS))
        }
        asked_keywords = keywords.query(QUESTION)
        query = SearchQuery(asked.vector, asked_keywords, asked.tokens, weigh_tokens=weigh)
        found = await store.query_memories([NAME], query, everything(), 5)
    finally:
        await store.close()
    held = [rows.ids for rows in tokens.values() if rows.ids is not None]
    holders = Counter(int(i) for ids in held for i in set(ids.tolist()))
    ids = asked.tokens.ids.tolist()
    idf = {i: qdrant_idf(holders[i], len(CONTENTS)) for i in ids if holders[i]}
    rarest = max(idf.values())  # a wordpiece no memory holds weighs as the rarest held
    weights = np.array([idf.get(i, rarest) if weigh else 1.0 for i in ids])
    expected = {
        key: reference(score or 0.0, asked.tokens, tokens[key], weights)
        for key, score in fused.items()
    }
    ranked = sorted(expected, key=lambda key: expected[key], reverse=True)[:5]
    assert [hit.memory.id for hit in found] == ranked
    for hit in found:  # the store's codes are bytes: close to the float reference
        assert hit.score == pytest.approx(expected[hit.memory.id], abs=0.02)
    if weigh:  # the weights matter here: plain means would miss the scores checked above
        plain = np.ones(len(ids))
        uniform = {k: reference(fused[k] or 0.0, asked.tokens, tokens[k], plain) for k in fused}
        assert max(abs(uniform[hit.memory.id] - (hit.score or 0.0)) for hit in found) > 0.1


async def test_token_vectors_without_wordpieces_are_given_both_by_the_fill(
    tmp_path: Path, encoder: SentenceTransformerEncoder
) -> None:
    keywords = KeywordEncoder()
    store = QdrantEdgeBackend(encoder.dimension, tmp_path, token_dimension=encoder.token_dimension)
    await store.start()
    try:
        await store.save_namespace(NamespaceRecord(NAME, "workspace", T0))
        for content, embedded in zip(CONTENTS, encoder.embed(CONTENTS, tokens=True), strict=True):
            assert isinstance(embedded.tokens, PackedTokens)
            bare = PackedTokens(embedded.tokens.array())  # as a version before wordpieces
            vectors = MemoryVectors(embedded.vector, keywords.document(content), bare)
            await store.upsert_memory(memory(NAME, content=content), vectors)
        assert all(rows is None for _, rows in stored_vectors(store, WORDPIECES_VECTOR).values())

        async def embed(text: str, work: Work) -> Embedding:
            return encoder.embed([text], tokens=True)[0]

        async def bare_embed(text: str, work: Work) -> Embedding:
            found = encoder.embed([text], tokens=True)[0]
            assert isinstance(found.tokens, PackedTokens)
            return Embedding(found.vector, PackedTokens(found.tokens.array()))

        fill, tokens, done = vector_fill.fill_store, vector_fill.tokens, vector_fill.Filled
        # an encoder that says no ids leaves the frequencies incomplete: no weights
        assert await fill(store, tokens(bare_embed)) == done(len(CONTENTS), complete=False)
        assert await fill(store, tokens(embed)) == done(len(CONTENTS), complete=True)
        pieces = stored_vectors(store, WORDPIECES_VECTOR)
        for content, rows in pieces.values():
            embedded = encoder.embed([content], tokens=True)[0]
            assert isinstance(embedded.tokens, PackedTokens)
            assert embedded.tokens.ids is not None
            assert rows is not None
            assert sorted(rows.indices) == sorted(set(embedded.tokens.ids.tolist()))
        assert await fill(store, tokens(embed)) == done(0, complete=True)
    finally:
        await store.close()


async def test_the_idf_kept_between_writes_is_what_the_engine_answers_now(
    tmp_path: Path, encoder: SentenceTransformerEncoder
) -> None:
    keywords = KeywordEncoder()
    store, tokens = await written(tmp_path, encoder, keywords)
    try:
        shard = store.store.shards.of(NAME)
        ids = sorted({int(i) for rows in tokens.values() if rows.ids is not None for i in rows.ids})

        def answered_now() -> dict[int, float]:
            found = shard.query_batch(qe.QueryBatchRequest(idf_requests(ids)))
            by_id = zip(ids, found, strict=True)
            return {piece: points[0].score for piece, points in by_id if points}

        before = store.store.idf.of(shard, ids)
        assert before == answered_now()
        assert len(before) == len(ids)  # every id asked is some memory's
        extra = CONTENTS[0] + " and the beach"
        embedded = encoder.embed([extra], tokens=True)[0]
        vectors = MemoryVectors(embedded.vector, keywords.document(extra), embedded.tokens)
        await store.upsert_memory(memory(NAME, content=extra), vectors)
        after = store.store.idf.of(shard, ids)
        assert after == answered_now()
        assert after != before  # one memory more: every wordpiece's IDF moved
    finally:
        await store.close()
