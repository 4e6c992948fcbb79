"""What the embedded store answers when every request carries its full filter.

Why: the store's own plans (edge/search_passes.py: the filter by incarnation alone,
the rerank's steps) must answer what the plain plan answers, one request per
pin side with the full filter, as a Qdrant server is asked; the tests of both
compare against it.
"""

from __future__ import annotations

from typing import Any

from adapters.engine import search_passes
from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.engine.engine import parsed_memory
from adapters.engine.search_passes import full_filter_requests
from adapters.merge import merge_scored
from adapters.qdrant.layout import Scope
from adapters.values import MemoryFilter
from adapters.values import ScoredMemory
from adapters.values import SearchQuery


async def full_filter_answer(
    backend: QdrantEdgeBackend,
    names: list[str],
    asked: SearchQuery,
    memory_filter: MemoryFilter,
    limit: int,
) -> list[ScoredMemory]:
    """What each shard's pin sides answer with the full filters (a rerank asked reranks
    each shard's own top in the same request), merged as the reads merge."""
    store = backend.store
    live = store.records.live
    by_shard: dict[int, list[str]] = {}  # the live names asked for, grouped as reads group them
    for name in dict.fromkeys(names):
        if name in live:
            by_shard.setdefault(store.shards.index_of(name), []).append(name)
    asks: list[tuple[Any, list[Any]]] = []
    for index, held in by_shard.items():
        scope = Scope(tuple(held), tuple(live[name].epoch for name in held))
        requests = full_filter_requests(asked, memory_filter, scope, limit)
        asks.append((store.shards.shards[index], requests))
    parts = await store.calls.here(search_passes.asked, asks)
    hits = [[ScoredMemory(m, p.score) for p in part if (m := parsed_memory(p))] for part in parts]
    return hits[0][:limit] if len(hits) == 1 else merge_scored(hits, limit)
