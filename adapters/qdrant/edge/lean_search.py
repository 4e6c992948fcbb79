"""A plain search's unpinned side, filtered by one condition and checked afterwards.

qdrant-edge checks all but one filter condition point by point, slowly over a namespace just
written. So a search with no kinds asked (edge/edge_reads.py) asks per shard the pinned side
with its full filter, and every memory of the incarnations asked for (`filters.any_side`: an
incarnation token is unique to one namespace) at the same limit, dropping the pinned
ones: with P < `limit` pinned, the `limit` - P best unpinned are among those. If the full
filter would not admit one of them (expired, another namespace), the shard is asked again with
it in the same engine turn. Caveat: the fused plan's candidate lists (`ranking.CANDIDATES`)
may hold pinned or expired memories, so an unpinned memory at a list's edge can drop out.
Keyword feedback's passes (edge/feedback_passes.py) are asked this way; the rerank's
candidates (edge/maxsim_rerank.py) keep the full filter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import qdrant_edge as qe

from adapters.merge import pin_sides
from adapters.qdrant import filters, ranking
from adapters.qdrant.edge.engine import EDGE, EDGE_RANKING
from adapters.qdrant.layout import FIELD_EXPIRES_US, FIELD_NAMESPACE, FIELD_PINNED, Scope
from adapters.times import to_micros
from adapters.values import MemoryFilter, SearchQuery

# What an answer asked with `filters.any_side` and ids only must carry to be checked.
CHECKED_FIELDS = [FIELD_NAMESPACE, FIELD_EXPIRES_US, FIELD_PINNED]


def applies(memory_filter: MemoryFilter) -> bool:
    """Both pin sides and every kind: what the platform's searches ask."""
    return memory_filter.pinned is None and memory_filter.kinds is None


def wheres(memory_filter: MemoryFilter, scope: Scope) -> list[Any]:
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


def search(
    scoped: list[tuple[Any, Scope]], query: SearchQuery, memory_filter: MemoryFilter, limit: int
) -> list[list[Any]]:
    """Per shard, its points for `query`: the pinned side's, then the unpinned side's."""
    answers = []
    for shard, scope in scoped:
        requests = ranking.requests(EDGE_RANKING, query, wheres(memory_filter, scope), limit)
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
