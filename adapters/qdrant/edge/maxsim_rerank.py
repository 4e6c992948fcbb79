"""The rerank in the embedded store: MaxSim over the fused candidates, asked by id.

A Qdrant server answers it in one request (ranking.py's plan), each shard reranking its own top
RERANK_DEPTH. On the embedded store a request costs no round trip, so here, in one hop:
1. (with keyword feedback) the widened keyword query (feedback_passes.py);
2. per shard asked and per pin side, the fused plan at the rerank's depth, ids and scores only;
3. per pin side, the best RERANK_DEPTH of all shards' candidates: the search's depth, not a shard's;
4. per shard holding some, one request scoring them by MaxSim, restricted to their ids;
5. the rerank's score (`ranking.reranked`: the same formula and weight) and, per pin side, the
   best `limit`, payloads read by id. For one namespace this ranks as the one-request plan does.
See docs/backends.md, "Reranking by token vectors".
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, replace
from typing import Any

import qdrant_edge as qe

from adapters.merge import pin_sides
from adapters.qdrant import filters, ranking
from adapters.qdrant.edge import feedback_passes
from adapters.qdrant.edge.engine import EDGE, EdgeRanking
from adapters.qdrant.layout import Scope
from adapters.values import MemoryFilter, SearchQuery, TokenVectors

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


def search(
    scoped: list[tuple[Any, Scope]], query: SearchQuery, memory_filter: MemoryFilter, limit: int
) -> list[RerankedPoint]:
    """The best `limit` per pin side (pinned first) across the shards, reranked by MaxSim."""
    tokens = query.tokens
    assert tokens  # the reads call this for a query with token vectors only
    if query.feedback:
        query = feedback_passes.widened(scoped, query, memory_filter)
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
    max_sim = _max_sim(scoped, tokens, [key for side in candidates for key, _ in side])
    best = [ranking.reranked(side, max_sim, len(tokens), limit) for side in candidates]
    payloads = _payloads(scoped, [key for side in best for key, _ in side])
    return [
        RerankedPoint(key[1], payloads[key], score)
        for side in best
        for key, score in side
        if key in payloads  # forgotten between the requests: not answered
    ]


def _max_sim(
    scoped: list[tuple[Any, Scope]], tokens: TokenVectors, keys: list[Key]
) -> dict[Key, float]:
    """Each candidate's MaxSim against `tokens`, one request per shard holding some;
    none for a memory without token vectors (a store being upgraded)."""
    scores: dict[Key, float] = {}
    query = CANDIDATES.token_query(tokens)  # converted once, whatever the shards
    for n, ids in _by_shard(keys).items():
        request = qe.QueryRequest(
            limit=len(ids),
            query=query,
            filter=qe.Filter(must=[qe.HasIdCondition(set(ids))]),
            with_payload=False,
        )
        scores.update(((n, point.id), point.score) for point in scoped[n][0].query(request))
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
