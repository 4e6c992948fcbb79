"""Searches and listings over several namespaces, for a store that answers one at a time.

One query per namespace and pin side, sent at once; each holds its true `limit` best (epoch and
overlay applied), so their merge (`adapters.merge`) is exact.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Mapping
from functools import partial
from typing import Any
from typing import TypeVar

from pinecone.models.vectors.vector import ScoredVector

from adapters.merge import merge_listed
from adapters.merge import merge_scored
from adapters.merge import pin_sides
from adapters.pinecone import vector_metadata
from adapters.pinecone.keywords import KEYWORD_WEIGHT
from adapters.pinecone.keywords import sparse_values
from adapters.pinecone.listing import newest_memories
from adapters.pinecone.shared import Shared
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import ScoredMemory
from adapters.values import SearchQuery

QUERY_TOP_K_WITH_METADATA = 1000
R = TypeVar("R")

# A live namespace's name and its epoch.
Epochs = Mapping[str, str]


class MemoryReads:
    def __init__(self, shared: Shared) -> None:
        self._shared = shared

    async def query(
        self, epochs: Epochs, query: SearchQuery, memory_filter: MemoryFilter, limit: int
    ) -> list[ScoredMemory]:
        """Up to `limit` memories of these namespaces: pinned first, best first (a hybrid
        query scores as adapters/pinecone/keywords.py says)."""
        one = partial(self._query_one, query=query, limit=limit)
        return merge_scored(await _each(epochs, memory_filter, limit, one), limit)

    async def listing(
        self, epochs: Epochs, memory_filter: MemoryFilter, limit: int
    ) -> list[MemoryRecord]:
        """Up to `limit` memories of these namespaces: pinned first, newest first."""
        one = partial(self._list_one, limit=limit)
        return merge_listed(await _each(epochs, memory_filter, limit, one), limit)

    async def _query_one(
        self,
        namespace: str,
        epoch: str,
        memory_filter: MemoryFilter,
        *,
        query: SearchQuery,
        limit: int,
    ) -> list[ScoredMemory]:
        if query.dense is None:
            raise ValueError("a Pinecone query needs the dense vector")
        vector = [float(x) for x in query.dense]
        keywords = sparse_values(query.keywords, KEYWORD_WEIGHT)
        top_k = min(limit + len(self._shared.overlay.ids_in(namespace)), QUERY_TOP_K_WITH_METADATA)
        found = await self._shared.call(
            "query",
            lambda i, t: i.query(
                top_k=top_k,
                vector=vector,
                sparse_vector=keywords,
                namespace=self._shared.pinecone_namespace(namespace),
                filter=vector_metadata.memory_filter(epoch, memory_filter),
                include_metadata=True,
                timeout=t,
            ),
        )
        hits = [
            ScoredMemory(
                vector_metadata.memory_from_metadata(m.id, namespace, m.metadata or {}), m.score
            )
            for m in found.matches
        ]
        return self._shared.overlay.merge_query(namespace, epoch, query, memory_filter, hits, limit)

    async def _list_one(
        self, namespace: str, epoch: str, memory_filter: MemoryFilter, *, limit: int
    ) -> list[MemoryRecord]:
        async def scan(flt: dict[str, Any]) -> list[MemoryRecord]:
            matches = await self.unranked(namespace, flt, "list memories", with_metadata=True)
            return [
                vector_metadata.memory_from_metadata(m.id, namespace, m.metadata or {})
                for m in matches
            ]

        want = min(limit + len(self._shared.overlay.ids_in(namespace)), QUERY_TOP_K_WITH_METADATA)
        base = vector_metadata.memory_filter(epoch, memory_filter)
        listed = await newest_memories(scan, base, want, QUERY_TOP_K_WITH_METADATA)
        return self._shared.overlay.merge_listing(namespace, epoch, memory_filter, listed, limit)

    async def unranked(
        self, namespace: str, flt: dict[str, Any], operation: str, *, with_metadata: bool
    ) -> list[ScoredVector]:
        """Up to 1000 memories matching `flt`, in no useful order (a query by a fixed vector)."""
        found = await self._shared.call(
            operation,
            lambda i, t: i.query(
                top_k=QUERY_TOP_K_WITH_METADATA,
                vector=self._shared.unit_vector,
                namespace=self._shared.pinecone_namespace(namespace),
                filter=flt,
                include_metadata=with_metadata,
                timeout=t,
            ),
        )
        return list(found.matches)


async def _each(
    epochs: Epochs,
    memory_filter: MemoryFilter,
    limit: int,
    one: Callable[[str, str, MemoryFilter], Awaitable[list[R]]],
) -> list[list[R]]:
    """`one` for each namespace and pin side, all sent at once."""
    if limit <= 0:
        return []
    sides = pin_sides(memory_filter)
    return await asyncio.gather(*(one(n, e, side) for n, e in epochs.items() for side in sides))
