"""Searches and listings over several namespaces, for a store that answers one at a time.

One query per live namespace and pin side, sent at once; each holds its true `limit` best (epoch
and overlay applied), so their merge (`adapters.merge`) is exact. Pinecone has no ordered scan: a
listing narrows its queries by `created_us`, round by round, until a sample holds the true newest
(docs/backends.md, "Pinecone", "Listing without a query").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Sequence
from functools import partial
from typing import TypeVar

from pinecone.models.vectors.vector import ScoredVector

from adapters.merge import merge_listed
from adapters.merge import merge_scored
from adapters.merge import pin_sides
from adapters.pinecone import vector_metadata
from adapters.pinecone.index_connection import Shared
from adapters.pinecone.keywords import KEYWORD_WEIGHT
from adapters.pinecone.keywords import sparse_values
from adapters.pinecone.reserved_records import NamespaceRecords
from adapters.times import to_micros
from adapters.values import JsonObject
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import ScoredMemory
from adapters.values import SearchQuery

QUERY_TOP_K_WITH_METADATA = 1000
MAX_ROUNDS = 6
R = TypeVar("R")


class MemoryReads:
    """`query_memories` and `list_memories` of `PineconeBackend` (backend.py)."""

    def __init__(self, shared: Shared, records: NamespaceRecords) -> None:
        self._shared = shared
        self._records = records

    async def query_memories(
        self, namespaces: Sequence[str], query: SearchQuery, memory_filter: MemoryFilter, limit: int
    ) -> list[ScoredMemory]:
        """Pinned first, best first (a hybrid query scores as keywords.py says)."""
        one = partial(self._query_one, query=query, limit=limit)
        return merge_scored(await self._each(namespaces, memory_filter, limit, one), limit)

    async def list_memories(
        self, namespaces: Sequence[str], memory_filter: MemoryFilter, limit: int
    ) -> list[MemoryRecord]:
        """Pinned first, newest first."""
        one = partial(self._list_one, limit=limit)
        return merge_listed(await self._each(namespaces, memory_filter, limit, one), limit)

    async def _each(
        self,
        namespaces: Sequence[str],
        memory_filter: MemoryFilter,
        limit: int,
        one: Callable[[str, str, MemoryFilter], Awaitable[list[R]]],
    ) -> list[list[R]]:
        """`one` for each live namespace (one fetch for their epochs) and pin side, at once."""
        states = await self._records.states(namespaces)
        if limit <= 0:
            return []
        sides = pin_sides(memory_filter)
        return await asyncio.gather(
            *(one(name, epoch, side) for name, (_, epoch) in states.items() for side in sides)
        )

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
        async def scan(flt: JsonObject) -> list[MemoryRecord]:
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
        self, namespace: str, flt: JsonObject, operation: str, *, with_metadata: bool
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


def _newest_first(memories: list[MemoryRecord]) -> list[MemoryRecord]:
    return sorted(memories, key=lambda m: (m.created_at, m.id), reverse=True)


async def newest_memories(
    scan: Callable[[JsonObject], Awaitable[list[MemoryRecord]]],
    base_filter: JsonObject,
    want: int,
    scan_size: int,
) -> list[MemoryRecord]:
    """The `want` newest memories matching `base_filter`, newest first."""
    found = _newest_first(await scan(base_filter))
    cutoff: int | None = None
    for _ in range(MAX_ROUNDS):
        if len(found) < scan_size:
            break
        next_cutoff = to_micros(found[want - 1].created_at)
        if next_cutoff == cutoff:
            break
        cutoff = next_cutoff
        found = _newest_first(await scan(vector_metadata.newer_than(base_filter, cutoff)))
    return found[:want]
