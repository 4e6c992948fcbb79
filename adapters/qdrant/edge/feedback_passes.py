"""Keyword feedback in the embedded store: the search in two passes, in one hop.

A search with `SearchQuery.feedback` (adapters/qdrant/feedback.py says what and why), per shard:
1. the fused plan over both pin sides (relevance decides whose words are lent, not pinning),
   answered with ids and scores only, by incarnation alone where lean_search.py applies; the
   best `feedback.FEEDBACK_DOCS` of all shards' lend their stored keyword vectors (read by id);
2. the store's own IDF of their terms, which qdrant-edge does not expose: per term, a one-term
   query restricted to the lenders scores each `IDF x weight`, and the sum is exactly the
   term's IDF-weighted weight across them, as the store scores it;
3. the search itself, with the widened keyword query (edge_reads.py and maxsim_rerank.py ask it).
See docs/backends.md, "Keyword feedback".
"""

from __future__ import annotations

import heapq
from dataclasses import replace
from typing import Any

import qdrant_edge as qe

from adapters.qdrant import feedback, filters, ranking
from adapters.qdrant.edge import lean_search
from adapters.qdrant.edge.engine import EDGE, EdgeRanking
from adapters.qdrant.layout import Scope
from adapters.values import MemoryFilter, SearchQuery, SparseVector

# The first pass: the fused plan, answered with ids and scores (and, asked by
# incarnation alone, with what lean_search.py checks).
FIRST_PASS = EdgeRanking(with_payload=False)
FIRST_PASS_CHECKED = EdgeRanking(with_payload=lean_search.CHECKED_FIELDS)


def widened(
    scoped: list[tuple[Any, Scope]], query: SearchQuery, memory_filter: MemoryFilter
) -> SearchQuery:
    """`query` with its keyword vector widened by the first pass's best memories' words
    (steps 1 and 2 above); the rerank (maxsim_rerank.py) asks its candidates with it."""
    dense, keywords = query.dense, query.keywords
    assert dense is not None  # SearchQuery admits feedback on a fused search only
    assert keywords is not None
    first = SearchQuery(dense, keywords)
    found: list[tuple[float, int, Any]] = []
    for n, (shard, scope) in enumerate(scoped):
        lenders = _lenders(shard, scope, first, memory_filter)
        found.extend((point.score, n, point) for point in lenders)
    lending: dict[int, list[Any]] = {}
    for _, n, point in heapq.nlargest(feedback.FEEDBACK_DOCS, found, key=lambda hit: hit[0]):
        lending.setdefault(n, []).append(point.id)
    weighted: dict[int, float] = {}
    for n, ids in lending.items():
        for term, weight in _idf_weighted(scoped[n][0], ids).items():
            weighted[term] = weighted.get(term, 0.0) + weight
    return replace(query, keywords=feedback.expanded(keywords, weighted))


def _lenders(shard: Any, scope: Scope, first: SearchQuery, memory_filter: MemoryFilter) -> Any:
    """One shard's first pass over both pin sides (or the one asked): by incarnation
    alone where lean_search.py applies, asked again with the full filter where that
    answered a memory the full filter would not admit."""
    if lean_search.applies(memory_filter):
        where = filters.any_side(EDGE, scope)
        (request,) = ranking.requests(FIRST_PASS_CHECKED, first, [where], feedback.FEEDBACK_DOCS)
        found = shard.query(request)
        if lean_search.admitted(found, scope, memory_filter):
            return found
    where = filters.memories(EDGE, memory_filter, scope)
    (request,) = ranking.requests(FIRST_PASS, first, [where], feedback.FEEDBACK_DOCS)
    return shard.query(request)


def _idf_weighted(shard: Any, ids: list[Any]) -> dict[int, float]:
    """Each keyword term of the memories `ids` (of one shard): IDF x weight, summed over
    them; nothing for a memory without a keyword vector yet (a store being upgraded)."""
    lent = [
        vector
        for point in shard.retrieve(ids, with_payload=False, with_vector=[ranking.KEYWORDS_VECTOR])
        if (vector := _keywords(point)) is not None
    ]
    terms = sorted(feedback.term_weights(lent))
    if not terms:
        return {}
    among = qe.Filter(must=[qe.HasIdCondition(set(ids))])
    requests = [
        qe.QueryRequest(
            limit=len(ids),
            query=qe.Query.Nearest(qe.SparseVector([term], [1.0]), using=ranking.KEYWORDS_VECTOR),
            filter=among,
        )
        for term in terms
    ]
    answers = shard.query_batch(qe.QueryBatchRequest(requests))
    return {
        term: sum(point.score for point in points)
        for term, points in zip(terms, answers, strict=True)
    }


def _keywords(point: Any) -> SparseVector | None:
    """A point's stored keyword vector, read with its vectors; None when it has none."""
    vectors = point.vector
    vector = vectors.get(ranking.KEYWORDS_VECTOR) if isinstance(vectors, dict) else None
    if vector is None:
        return None
    return SparseVector(tuple(vector.indices), tuple(vector.values))
