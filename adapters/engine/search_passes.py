"""A search in the embedded store, per shard asked and in one engine turn (edge_reads.py).

The fused plan (`fused_search`, `lean_search`), keyword feedback's pass (`widened`), the rerank
(`reranked_search`). See docs/backends.md, "Keyword feedback" and "Reranking by token vectors".
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import replace
from typing import Any

import qdrant_edge as qe

from adapters.engine.engine import EDGE
from adapters.engine.engine import EDGE_RANKING
from adapters.engine.engine import EdgeRanking
from adapters.engine.engine import coded_token_query
from adapters.engine.wordpiece_idf import WordpieceIdf
from adapters.merge import pin_sides
from adapters.qdrant import feedback
from adapters.qdrant import filters
from adapters.qdrant import ranking
from adapters.qdrant import token_codes
from adapters.qdrant import wordpieces
from adapters.qdrant.layout import FIELD_EXPIRES_US
from adapters.qdrant.layout import FIELD_NAMESPACE
from adapters.qdrant.layout import FIELD_PINNED
from adapters.qdrant.layout import Scope
from adapters.times import to_micros
from adapters.values import MemoryFilter
from adapters.values import SearchQuery
from adapters.values import SparseVector
from adapters.values import TokenVectors


def asked(asks: list[tuple[Any, list[Any]]]) -> list[list[Any]]:
    """Each shard's requests in one engine call; per shard, its points in order."""
    return [
        [point for side in shard.query_batch(qe.QueryBatchRequest(requests)) for point in side]
        for shard, requests in asks
    ]


def fused_search(
    scoped: list[tuple[Any, Scope]], query: SearchQuery, memory_filter: MemoryFilter, limit: int
) -> list[list[Any]]:
    """Each shard's points for `query`, per pin side, pinned first: in one engine
    turn, with keyword feedback's first pass widening the query before it."""
    if query.feedback:
        query = widened(scoped, query, memory_filter)
    if lean_applies(memory_filter):
        return lean_search(scoped, query, memory_filter, limit)
    asks = [(shard, full_filter_requests(query, memory_filter, s, limit)) for shard, s in scoped]
    return asked(asks)


def full_filter_requests(
    query: SearchQuery, memory_filter: MemoryFilter, scope: Scope, limit: int
) -> list[Any]:
    """One shard's requests for `query`, one per pin side, each with its full filter."""
    wheres = [filters.memories(EDGE, side, scope) for side in pin_sides(memory_filter)]
    return ranking.requests(EDGE_RANKING, query, wheres, limit)


# What an answer asked with `filters.any_side` and ids only must carry to be checked.
CHECKED_FIELDS = [FIELD_NAMESPACE, FIELD_EXPIRES_US, FIELD_PINNED]


def lean_applies(memory_filter: MemoryFilter) -> bool:
    """Both pin sides and every kind: what the platform's searches ask."""
    return memory_filter.pinned is None and memory_filter.kinds is None


def _lean_wheres(memory_filter: MemoryFilter, scope: Scope) -> list[Any]:
    """The filters of a search's two requests: the pinned side's, then either side's."""
    pinned_side, _ = pin_sides(memory_filter)
    return [filters.memories(EDGE, pinned_side, scope), filters.any_side(EDGE, scope)]


def unpinned(
    either: list[Any], scope: Scope, memory_filter: MemoryFilter, exact: Callable[[Any], list[Any]]
) -> list[Any]:
    """The unpinned side from `either` (asked with `any_side`), or `exact(its full filter)`
    where `either` holds a memory the full filter would not admit."""
    if admitted(either, scope, memory_filter):
        return [point for point in either if not point.payload.get(FIELD_PINNED)]
    _, unpinned_side = pin_sides(memory_filter)
    return exact(filters.memories(EDGE, unpinned_side, scope))


def admitted(points: list[Any], scope: Scope, memory_filter: MemoryFilter) -> bool:
    """Whether the full filter of either pin side admits every one of `points`."""
    names, now_us = frozenset(scope.names), to_micros(memory_filter.now)
    return all(_admitted(point.payload, names, now_us) for point in points)


def lean_search(
    scoped: list[tuple[Any, Scope]], query: SearchQuery, memory_filter: MemoryFilter, limit: int
) -> list[list[Any]]:
    """Per shard, its points for `query`: the pinned side's, then the unpinned side's.

    The unpinned side is every memory of the incarnations asked for (an incarnation token
    is unique to one namespace) at the same limit, less the pinned: with P < `limit`
    pinned, the `limit` - P best unpinned are among those. Caveat: the fused plan's
    candidate lists (`ranking.CANDIDATES`) may hold pinned or expired memories, so an
    unpinned memory at a list's edge can drop out."""
    answers = []
    for shard, scope in scoped:
        requests = ranking.requests(EDGE_RANKING, query, _lean_wheres(memory_filter, scope), limit)
        pinned, either = shard.query_batch(qe.QueryBatchRequest(requests))

        def exact(where: Any, shard: Any = shard) -> list[Any]:
            (request,) = ranking.requests(EDGE_RANKING, query, [where], limit)
            found: list[Any] = shard.query(request)
            return found

        answers.append([*pinned, *unpinned(either, scope, memory_filter, exact)])
    return answers


def _admitted(payload: dict[str, Any], names: frozenset[str], now_us: int) -> bool:
    expires_us = payload.get(FIELD_EXPIRES_US)
    unexpired = expires_us is None or expires_us > now_us
    return unexpired and payload.get(FIELD_NAMESPACE) in names


# The first pass: the fused plan, answered with ids and scores (and, asked by
# incarnation alone, with what `lean_search` checks).
FIRST_PASS = EdgeRanking(with_payload=False)
FIRST_PASS_CHECKED = EdgeRanking(with_payload=CHECKED_FIELDS)


def widened(
    scoped: list[tuple[Any, Scope]], query: SearchQuery, memory_filter: MemoryFilter
) -> SearchQuery:
    """`query` with its keyword vector widened by the first pass's best memories' words,
    each term weighted by the store's own IDF; `reranked_search` asks its candidates with it."""
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
        for term, weight in idf_weighted(scoped[n][0], ids).items():
            weighted[term] = weighted.get(term, 0.0) + weight
    return replace(query, keywords=feedback.expanded(keywords, weighted))


def _lenders(shard: Any, scope: Scope, first: SearchQuery, memory_filter: MemoryFilter) -> Any:
    """One shard's first pass over both pin sides (or the one asked): by incarnation
    alone where `lean_search` applies, asked again with the full filter where that
    answered a memory the full filter would not admit."""
    if lean_applies(memory_filter):
        where = filters.any_side(EDGE, scope)
        (request,) = ranking.requests(FIRST_PASS_CHECKED, first, [where], feedback.FEEDBACK_DOCS)
        found = shard.query(request)
        if admitted(found, scope, memory_filter):
            return found
    where = filters.memories(EDGE, memory_filter, scope)
    (request,) = ranking.requests(FIRST_PASS, first, [where], feedback.FEEDBACK_DOCS)
    return shard.query(request)


def idf_weighted(shard: Any, ids: list[Any]) -> dict[int, float]:
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


# The candidates: the fused plan, answered with ids and scores.
CANDIDATES = EdgeRanking(with_payload=False)
# A candidate: the index of its shard among those asked, and its point id there.
Key = tuple[int, Any]


@dataclass(frozen=True, slots=True)
class RerankedPoint:
    """A memory's point as a search answers it: its id, payload and reranked score."""

    id: Any
    payload: dict[str, Any]
    score: float


def reranked_search(
    scoped: list[tuple[Any, Scope]],
    query: SearchQuery,
    memory_filter: MemoryFilter,
    limit: int,
    idf: WordpieceIdf,
) -> list[RerankedPoint]:
    """The best `limit` per pin side (pinned first) across the shards, reranked by MaxSim
    (the query's tokens weighed by `idf` where it asks)."""
    tokens = query.tokens
    assert tokens  # the reads call this for a query with token vectors only
    if query.feedback:
        query = widened(scoped, query, memory_filter)
    fused = replace(query, tokens=None, feedback=False)
    depth = max(limit, ranking.RERANK_DEPTH)
    sides = pin_sides(memory_filter)
    found: list[list[tuple[Key, float]]] = [[] for _ in sides]
    for n, (shard, scope) in enumerate(scoped):
        wheres = [filters.memories(EDGE, side, scope) for side in sides]
        answers = shard.query_batch(
            qe.QueryBatchRequest(ranking.requests(CANDIDATES, fused, wheres, depth))
        )
        for side, points in zip(found, answers, strict=True):
            side.extend(((n, point.id), point.score) for point in points)
    # the fused ranking's best `depth` across the shards, as one shard's would be
    candidates = [heapq.nlargest(depth, side, key=lambda pair: pair[1]) for side in found]
    asked = _weighed(scoped, tokens, idf) if query.weigh_tokens else wordpieces.uniform(tokens)
    max_sim = _max_sim(scoped, asked.tokens, [key for side in candidates for key, _ in side])
    best = [ranking.reranked(side, max_sim, asked.mass, limit) for side in candidates]
    payloads = _payloads(scoped, [key for side in best for key, _ in side])
    return [
        RerankedPoint(key[1], payloads[key], score)
        for side in best
        for key, score in side
        if key in payloads  # forgotten between the requests: not answered
    ]


def _weighed(
    scoped: list[tuple[Any, Scope]], tokens: TokenVectors, idf: WordpieceIdf
) -> wordpieces.Weighed:
    """`tokens` weighed by their wordpieces' IDF, averaged over the shards asked."""
    ids = wordpieces.query_ids(tokens)
    if not ids:
        return wordpieces.uniform(tokens)
    answers = [idf.of(shard, ids) for shard, _ in scoped]
    return wordpieces.weighed(tokens, wordpieces.averaged(answers))


def _max_sim(
    scoped: list[tuple[Any, Scope]], tokens: TokenVectors, keys: list[Key]
) -> dict[Key, float]:
    """Each candidate's MaxSim against `tokens`, one request per shard holding some;
    none for a memory without token vectors (a store being upgraded)."""
    scores: dict[Key, float] = {}
    coded = token_codes.encoded_query(tokens)  # once, whatever the shards
    query = coded_token_query(coded)
    for n, ids in _by_shard(keys).items():
        request = qe.QueryRequest(
            limit=len(ids),
            query=query,
            filter=qe.Filter(must=[qe.HasIdCondition(set(ids))]),
            with_payload=False,
        )
        scores.update(
            ((n, point.id), coded.max_sim(point.score)) for point in scoped[n][0].query(request)
        )
    return scores


def _payloads(scoped: list[tuple[Any, Scope]], keys: list[Key]) -> dict[Key, dict[str, Any]]:
    payloads: dict[Key, dict[str, Any]] = {}
    for n, ids in _by_shard(keys).items():
        points = scoped[n][0].retrieve(ids, with_payload=True, with_vector=False)
        payloads.update(((n, point.id), point.payload) for point in points)
    return payloads


def _by_shard(keys: list[Key]) -> dict[int, list[Any]]:
    """Point ids by the shard (its index in `scoped`) holding them, each once."""
    ids: dict[int, dict[Any, None]] = {}
    for n, point in keys:
        ids.setdefault(n, {})[point] = None
    return {n: list(found) for n, found in ids.items()}
