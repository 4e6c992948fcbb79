"""A search in the embedded store, per shard asked and in one engine turn (edge_reads.py).

The fused plan (`fused_search`, `lean_search`), keyword feedback's pass (`widened`), the rerank
(`reranked_search`). See docs/backends.md, "Keyword feedback" and "Reranking by token vectors".
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from typing import Any

import qdrant_edge as qe

from adapters.engine.engine import EDGE
from adapters.engine.engine import EDGE_RANKING
from adapters.engine.engine import EdgeRanking
from adapters.engine.engine import among
from adapters.engine.engine import coded_token_query
from adapters.engine.engine import idf_requests
from adapters.keyword_encoder import plain
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
    query: SearchQuery,
    memory_filter: MemoryFilter,
    scope: Scope,
    limit: int,
    spelling: EdgeRanking = EDGE_RANKING,
) -> list[Any]:
    """One shard's requests for `query`, one per pin side, each with its full filter."""
    wheres = [filters.memories(EDGE, side, scope) for side in pin_sides(memory_filter)]
    return ranking.requests(spelling, query, wheres, limit)


def lean_applies(memory_filter: MemoryFilter) -> bool:
    """Both pin sides and every kind: what the platform's searches ask."""
    return memory_filter.pinned is None and memory_filter.kinds is None


def admitted(points: list[Any], scope: Scope, memory_filter: MemoryFilter) -> bool:
    """Whether the full filter of either pin side admits every one of `points`."""
    names, now_us = frozenset(scope.names), to_micros(memory_filter.now)
    return all(
        point.payload.get(FIELD_NAMESPACE) in names
        and ((expires_us := point.payload.get(FIELD_EXPIRES_US)) is None or expires_us > now_us)
        for point in points
    )


def lean_search(
    scoped: list[tuple[Any, Scope]], query: SearchQuery, memory_filter: MemoryFilter, limit: int
) -> list[list[Any]]:
    """Per shard, its points for `query`: the pinned side's, then the unpinned side's, asked
    as every memory of the incarnations asked for (a token unique to one namespace) less the
    pinned: with P < `limit` pinned, the `limit` - P best unpinned are among those. Asked
    again with its full filter where that answered a memory the filter would not admit.
    Caveat: the fused plan's candidate lists (`ranking.CANDIDATES`) may hold pinned or
    expired memories, so an unpinned memory at a list's edge can drop out."""
    pinned_side, unpinned_side = pin_sides(memory_filter)
    answers = []
    for shard, scope in scoped:
        wheres = [filters.memories(EDGE, pinned_side, scope), filters.any_side(EDGE, scope)]
        requests = ranking.requests(EDGE_RANKING, query, wheres, limit)
        pinned, either = shard.query_batch(qe.QueryBatchRequest(requests))
        if admitted(either, scope, memory_filter):
            rest = [point for point in either if not point.payload.get(FIELD_PINNED)]
        else:
            where = filters.memories(EDGE, unpinned_side, scope)
            rest = shard.query(ranking.requests(EDGE_RANKING, query, [where], limit)[0])
        answers.append([*pinned, *rest])
    return answers


# Answered with ids and scores: keyword feedback's first pass, the rerank's candidates;
# and with what `admitted` checks, the first pass asked by incarnation alone.
IDS_ONLY = EdgeRanking(with_payload=False)
CHECKED = EdgeRanking(with_payload=[FIELD_NAMESPACE, FIELD_EXPIRES_US, FIELD_PINNED])


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
        (request,) = ranking.requests(CHECKED, first, [where], feedback.FEEDBACK_DOCS)
        found = shard.query(request)
        if admitted(found, scope, memory_filter):
            return found
    where = filters.memories(EDGE, memory_filter, scope)
    (request,) = ranking.requests(IDS_ONLY, first, [where], feedback.FEEDBACK_DOCS)
    return shard.query(request)


def idf_weighted(shard: Any, ids: list[Any]) -> dict[int, float]:
    """Each keyword term of the memories `ids` (of one shard): IDF x weight, summed over
    them; nothing for a memory without a keyword vector yet (a store being upgraded)."""
    held = shard.retrieve(ids, with_payload=False, with_vector=[ranking.KEYWORDS_VECTOR])
    lent = [
        plain(vector)
        for point in held
        if isinstance(point.vector, dict)
        and (vector := point.vector.get(ranking.KEYWORDS_VECTOR)) is not None
    ]
    terms = sorted(feedback.term_weights(lent))
    if not terms:
        return {}
    requests = idf_requests(terms, ranking.KEYWORDS_VECTOR, len(ids), among(ids))
    answers = shard.query_batch(qe.QueryBatchRequest(requests))
    return {
        term: sum(point.score for point in points)
        for term, points in zip(terms, answers, strict=True)
    }


# Each shard's IDF of the wordpieces searches ask, kept until the shard is next written: its
# answers cannot change between two writes, so the weights stay exactly the engine's (see
# docs/backends.md, "Weighing query tokens by rarity").
@dataclass
class _Known:
    shard: Any  # the shard object itself: a reopened shard may reuse a closed one's id()
    generation: int
    idf: dict[int, float | None] = field(default_factory=dict)  # None: no memory holds it


class WordpieceIdf:
    """`of(shard, ids)`: the IDF of each of `ids` some memory of `shard` holds."""

    def __init__(self, generation: Callable[[Any], int]) -> None:
        self._generation = generation
        self._known: dict[int, _Known] = {}

    def of(self, shard: Any, ids: Sequence[int]) -> dict[int, float]:
        generation = self._generation(shard)
        known = self._known.get(id(shard))
        if known is None or known.shard is not shard or known.generation != generation:
            known = self._known[id(shard)] = _Known(shard, generation)
        asked = [piece for piece in ids if piece not in known.idf]
        if asked:
            found = shard.query_batch(qe.QueryBatchRequest(idf_requests(asked)))
            for piece, points in zip(asked, found, strict=True):
                known.idf[piece] = points[0].score if points else None
        return {piece: idf for piece in ids if (idf := known.idf[piece]) is not None}


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
    found: list[list[tuple[Key, float]]] = [[] for _ in pin_sides(memory_filter)]
    for n, (shard, scope) in enumerate(scoped):
        requests = full_filter_requests(fused, memory_filter, scope, depth, IDS_ONLY)
        answers = shard.query_batch(qe.QueryBatchRequest(requests))
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
        ask = qe.QueryRequest(limit=len(ids), query=query, filter=among(ids), with_payload=False)
        found = scoped[n][0].query(ask)
        scores.update(((n, point.id), coded.max_sim(point.score)) for point in found)
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
