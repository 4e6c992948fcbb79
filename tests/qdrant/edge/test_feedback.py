"""Keyword feedback: the expansion, the store's IDF, and what it finds.

The expansion is pure arithmetic over keyword vectors; the IDF is the embedded
engine's own (a real shard); the ranking test runs the real embedded backend with
small synthetic dense vectors placed so that hybrid ranks the memory last, and real
keyword vectors from the plugin's encoder.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import qdrant_edge as qe

from adapters.engine import search_passes
from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.engine.engine import point_vectors
from adapters.engine.shards import open_shard
from adapters.keyword_encoder import KeywordEncoder
from adapters.qdrant.feedback import FEEDBACK_WEIGHT
from adapters.qdrant.feedback import expanded
from adapters.qdrant.feedback import term_weights
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import ScoredMemory
from adapters.values import SearchQuery
from adapters.values import SparseVector
from tests.support.backends import started
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import cosine
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit

KEYWORDS = KeywordEncoder()


def test_term_weights_sum_each_terms_document_weights() -> None:
    documents = [SparseVector((1, 2), (0.5, 1.0)), SparseVector((2, 3), (2.0, 0.25))]
    assert term_weights(documents) == {1: 0.5, 2: 3.0, 3: 0.25}
    assert term_weights([]) == {}


def test_the_heaviest_terms_join_the_query_relative_to_the_heaviest() -> None:
    query = SparseVector((7, 8), (1.0, 1.0))
    weighted = {1: 4.0, 2: 2.0, 3: 1.0, 8: 0.5, 9: 0.0}
    widened = expanded(query, weighted, terms=3)
    assert dict(zip(widened.indices, widened.values, strict=True)) == pytest.approx(
        {7: 1.0, 8: 1.0, 1: FEEDBACK_WEIGHT, 2: FEEDBACK_WEIGHT / 2, 3: FEEDBACK_WEIGHT / 4}
    )
    # All terms: a query term gains its share; a term of no weight never joins.
    widened = expanded(query, weighted)
    every = dict(zip(widened.indices, widened.values, strict=True))
    assert every[8] == pytest.approx(1.0 + FEEDBACK_WEIGHT / 8)
    assert 9 not in every
    assert expanded(query, {}) == query


def test_the_expansion_is_deterministic_and_breaks_ties_on_the_token_id() -> None:
    query = SparseVector((), ())
    weighted = {30: 1.0, 10: 1.0, 20: 1.0, 40: 0.5}
    assert expanded(query, weighted, terms=2).indices == (10, 20)
    assert expanded(query, dict(reversed(weighted.items())), terms=2) == expanded(
        query, weighted, terms=2
    )
    assert expanded(query, weighted, terms=20).indices == (10, 20, 30, 40)


def test_the_idf_weighted_weight_is_the_stores_own_idf(tmp_path: Path) -> None:
    """qdrant-edge exposes no IDF: a one-term query per term gives IDF x weight, summed
    over the lending memories; it must be Qdrant's BM25 IDF over the whole shard."""
    texts = [
        "the zorbel firmware crashed again",
        "zorbel support replaced the firmware",
        "a quiet weekend at the lake",
        "lunch with the firmware team",
        "the lake was cold",
    ]
    shard = open_shard(tmp_path / "shard", DIM)
    vectors = [KEYWORDS.document(text) for text in texts]
    points = [
        qe.Point(i + 1, point_vectors(unit(1, i), vector), {}) for i, vector in enumerate(vectors)
    ]
    shard.update(qe.UpdateOperation.upsert_points(points))
    found = search_passes.idf_weighted(shard, [1, 2])

    def idf(term: int) -> float:
        n = sum(term in vector.indices for vector in vectors)
        return math.log(1 + (len(texts) - n + 0.5) / (n + 0.5))

    summed = term_weights([vectors[0], vectors[1]])
    assert found == pytest.approx({term: idf(term) * weight for term, weight in summed.items()})
    shard.close()


# A search for a ticket. Five memories name it and a vendor, Zorbel; the target names
# Zorbel and the firmware but not the ticket: it shares no word with the question.
QUESTION = "ticket XJ-4471"
NAMED = [
    "ticket XJ-4471: the Zorbel router firmware crashed",
    "XJ-4471 is with Zorbel, firmware rollback planned",
    "ticket XJ-4471 reopened, the Zorbel firmware again",
    "XJ-4471 escalated to the Zorbel firmware team",
    "ticket XJ-4471 waits on Zorbel",
]
TARGET = "Zorbel shipped a firmware fix for the crashed routers"
DISTRACTORS = [
    "the office coffee machine is broken",
    "lunch on Friday is at the Thai place",
    "the quarterly review moved to Monday",
    "parking spots are assigned by seniority",
    "the new hire starts next week",
    "the printer on floor two is out of toner",
]
QUERY_VECTOR = unit(1)
# Cosine 0.51 to the question: what the dense ranking prefers after the named ones.
NEAR = unit(1, 1.7)
# Cosine 0.49: below every distractor, so hybrid ranks the target last.
TARGET_VECTOR = unit(1, 1.78)


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[QdrantEdgeBackend]:
    async with started(QdrantEdgeBackend(DIM, tmp_path)) as store:
        yield store


async def _write(store: QdrantEdgeBackend, content: str, vector: list[float]) -> None:
    written = memory("team:support", content=content)
    await store.upsert_memory(written, MemoryVectors(vector, KEYWORDS.document(content)))


async def test_feedback_finds_a_memory_sharing_words_with_the_top_results_only(
    backend: QdrantEdgeBackend,
) -> None:
    await backend.save_namespace(NamespaceRecord(name="team:support", kind="team", created_at=T0))
    for content in NAMED:
        await _write(backend, content, NEAR)
    for content in DISTRACTORS:
        await _write(backend, content, NEAR)
    await _write(backend, TARGET, TARGET_VECTOR)
    assert cosine(QUERY_VECTOR, TARGET_VECTOR) < cosine(QUERY_VECTOR, NEAR)
    assert not set(KEYWORDS.query(QUESTION).indices) & set(KEYWORDS.document(TARGET).indices)
    hybrid = SearchQuery(QUERY_VECTOR, KEYWORDS.query(QUESTION))
    widened = SearchQuery(QUERY_VECTOR, KEYWORDS.query(QUESTION), feedback=True)

    def contents(found: list[ScoredMemory]) -> list[str]:
        return [hit.memory.content for hit in found]

    by_hybrid = contents(await backend.query_memories(["team:support"], hybrid, everything(), 20))
    by_feedback = contents(
        await backend.query_memories(["team:support"], widened, everything(), 20)
    )
    assert set(by_hybrid[:5]) == set(NAMED) == set(by_feedback[:5])
    assert by_hybrid[-1] == TARGET  # no word of the question: its cosine alone, the lowest
    assert by_feedback[5] == TARGET  # Zorbel and firmware, lent by the named ones
