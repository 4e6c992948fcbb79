"""Reads of the embedded store: lookups by id, searches and listings across shards.

A part of `QdrantEdgeBackend` (edge_backend.py): a read asks each shard concerned once and merges
the answers; one touching a damaged shard raises `StorageDamaged`, and the service reads around it.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from dataclasses import replace
from typing import Any
from typing import TypeVar

import qdrant_edge as qe

from adapters.engine import search_passes
from adapters.engine.call_batcher import CallBatcher
from adapters.engine.engine import DENSE_VECTOR
from adapters.engine.engine import EDGE
from adapters.engine.engine import dense_vector
from adapters.engine.engine import parsed_memory
from adapters.engine.record_store import LiveNamespace
from adapters.engine.store import EdgeStore
from adapters.errors import StorageDamaged
from adapters.merge import merge_listed
from adapters.merge import merge_scored
from adapters.merge import pin_sides
from adapters.qdrant import filters
from adapters.qdrant.layout import FIELD_CREATED_US
from adapters.qdrant.layout import FIELD_EPOCH
from adapters.qdrant.layout import Scope
from adapters.qdrant.layout import point_id
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import ScoredMemory
from adapters.values import SearchQuery
from adapters.values import StoredMemory

T = TypeVar("T")


class EdgeReads:
    """`query_memories`, `list_memories` and the batched lookups by id."""

    def __init__(self, store: EdgeStore) -> None:
        self._store = store
        self._lookups: CallBatcher[tuple[LiveNamespace, str], Any] = CallBatcher(
            lambda items: store.calls.here(self._retrieve_many, items)
        )

    async def get_stored_memory(self, namespace: str, memory_id: str) -> StoredMemory | None:
        """One lookup (batched with concurrent ones): the payload and the dense vector."""
        live = self._store.records.live.get(namespace)
        if live is None:
            return None
        point = await self._lookups.submit((live, memory_id))
        if point is None:
            return None
        memory = parsed_memory(point)
        if memory is None:
            raise StorageDamaged(f"memory {memory_id} in {namespace} is unreadable", (namespace,))
        return memory, dense_vector(point)

    async def drain(self) -> None:
        await self._lookups.drain()

    def _scopes(self, namespaces: Sequence[str]) -> list[tuple[Any, Scope]]:
        """The live namespaces asked for, grouped by shard: (shard, their scope) each."""
        live = self._store.records.live
        if short := [n for n in namespaces if n in live and live[n].epoch in self._store.short]:
            raise StorageDamaged(
                f"namespace {', '.join(short)} holds fewer memories than recorded (lost from the"
                " store's files); see docs/repair.md#memories-lost-from-the-stores-files",
                tuple(short),
            )
        asked = [name for name in dict.fromkeys(namespaces) if name in live]
        return [
            (shard, Scope(tuple(names), tuple(live[name].epoch for name in names)))
            for shard, names in self._store.shards.grouped(asked, str)
        ]

    def retrieve(self, live: LiveNamespace, memory_id: str) -> Any | None:
        """The point of `memory_id` in that incarnation of its namespace, or None."""
        return self._retrieve_many([(live, memory_id)])[0]

    def _retrieve_many(self, items: list[tuple[LiveNamespace, str]]) -> list[Any]:
        """`retrieve` for many (namespace incarnation, id) pairs: one call per shard."""
        ids = [point_id(live.record.name, memory_id) for live, memory_id in items]
        names = {key: live.record.name for key, (live, _) in zip(ids, items, strict=True)}
        by_id: dict[str, Any] = {}
        for shard, keys in self._store.shards.grouped(names, names.__getitem__):
            found = shard.retrieve(keys, with_payload=True, with_vector=[DENSE_VECTOR])
            by_id.update((str(point.id), point) for point in found)
        points = [by_id.get(key) for key in ids]
        return [
            point if point is not None and point.payload.get(FIELD_EPOCH) == live.epoch else None
            for point, (live, _) in zip(points, items, strict=True)
        ]

    async def query_memories(
        self, namespaces: Sequence[str], query: SearchQuery, memory_filter: MemoryFilter, limit: int
    ) -> list[ScoredMemory]:
        scoped = self._scopes(namespaces)
        if not scoped:
            return []
        if query.keywords is None and query.text is not None:  # the store makes them
            query = replace(query, keywords=self._store.keywords.query(query.text))
        calls, idf = self._store.calls, self._store.idf
        if query.tokens:  # MaxSim asked by id; equal scores ordered as across shards
            ranked = await calls.here(
                search_passes.reranked_search, scoped, query, memory_filter, limit, idf
            )
            return merge_scored([_scored(ranked)], limit)
        answers = await calls.here(search_passes.fused_search, scoped, query, memory_filter, limit)
        return _merged([_scored(points) for points in answers], limit, merge_scored)

    async def list_memories(
        self, namespaces: Sequence[str], memory_filter: MemoryFilter, limit: int
    ) -> list[MemoryRecord]:
        newest_first = qe.OrderBy(FIELD_CREATED_US, direction=qe.Direction.Desc)
        asks = []
        for shard, scope in self._scopes(namespaces):
            wheres = [filters.memories(EDGE, side, scope) for side in pin_sides(memory_filter)]
            requests = [
                qe.QueryRequest(limit=limit, query=newest_first, filter=where, with_payload=True)
                for where in wheres
            ]
            asks.append((shard, requests))
        answers = await self._store.calls.here(search_passes.asked, asks) if asks else []
        parts = [[m for p in points if (m := parsed_memory(p)) is not None] for points in answers]
        return _merged(parts, limit, merge_listed)


def _scored(points: Iterable[Any]) -> list[ScoredMemory]:
    return [ScoredMemory(m, p.score) for p in points if (m := parsed_memory(p)) is not None]


def _merged(
    parts: list[list[T]], limit: int, merge: Callable[[list[list[T]], int], list[T]]
) -> list[T]:
    """The parts of an answer as one: a single shard's as it ordered them, several merged."""
    return parts[0][:limit] if len(parts) == 1 else merge(parts, limit)
