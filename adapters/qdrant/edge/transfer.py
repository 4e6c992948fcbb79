"""Bulk transfer and store metadata for the embedded store (`adapters.parts`).

Parts that `QdrantEdgeBackend` (backend.py) hands out as `transfer` and
`store_meta`; they work through the shared `EdgeStore` (store.py) and the
counted upsert of `EdgeWrites` (writes.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import qdrant_edge as qe

from adapters.errors import NamespaceGone
from adapters.qdrant import filters
from adapters.qdrant.edge.engine import (
    DENSE_VECTOR,
    EDGE,
    dense_vector,
    parsed_memory,
    point_vectors,
)
from adapters.qdrant.edge.store import EdgeStore
from adapters.qdrant.edge.writes import EdgeWrites
from adapters.qdrant.layout import Scope, memory_to_payload, point_id
from adapters.values import MemoryFilter, SparseVector, StoredMemory, with_keywords


class EdgeTransfer:
    """`iter_memories` and `upsert_memories`, for export and import."""

    def __init__(self, store: EdgeStore, writes: EdgeWrites) -> None:
        self._store = store
        self._writes = writes

    async def iter_memories(
        self, namespace: str, now: datetime, *, page_size: int = 256, with_vectors: bool = True
    ) -> AsyncIterator[list[StoredMemory]]:
        """Scroll the namespace's incarnation, one page per worker-thread call, so a long
        export never holds a worker (or the event loop) for more than a page. Stops when
        the namespace is deleted meanwhile: its memories vanish, as for every read."""
        live = self._store.records.live.get(namespace)
        if live is None:
            return
        scope = Scope((namespace,), (live.epoch,))
        wanted = filters.memories(EDGE, MemoryFilter(now=now), scope)
        offset: Any = None
        while True:
            page, offset = await self._store.calls.worker(
                self._scroll, namespace, wanted, offset, page_size, with_vectors
            )
            current = self._store.records.live.get(namespace)
            if current is None or current.epoch != live.epoch:
                return
            found = [
                (memory, dense_vector(point) if with_vectors else [])
                for point in page
                if (memory := parsed_memory(point)) is not None
            ]
            if found:
                yield found
            if offset is None:
                return

    def _scroll(
        self, namespace: str, wanted: Any, offset: Any, limit: int, with_vectors: bool
    ) -> tuple[list[Any], Any]:
        request = qe.ScrollRequest(
            offset=offset,
            limit=limit,
            filter=wanted,
            with_payload=True,
            with_vector=[DENSE_VECTOR] if with_vectors else False,  # not the token vectors
        )
        page, next_offset = self._store.shards.of(namespace).scroll(request)
        return list(page), next_offset

    async def upsert_memories(
        self, memories: Sequence[StoredMemory], keywords: Sequence[SparseVector] | None = None
    ) -> int:
        """One shard update for the whole batch: an import writes thousands a second where
        one update per memory manages a few hundred. Same epoch rules as `upsert_memory`."""
        epochs: dict[str, str] = {}
        points: list[tuple[Any, str, str]] = []
        for (memory, vector), memory_keywords in with_keywords(memories, keywords):
            live = self._store.records.live.get(memory.namespace)
            if live is None:
                raise NamespaceGone(f"namespace {memory.namespace} not found")
            epochs[memory.namespace] = live.epoch
            payload = memory_to_payload(memory, live.epoch)
            vectors = point_vectors(vector, memory_keywords)
            point = qe.Point(point_id(memory.namespace, memory.id), vectors, payload)
            points.append((point, memory.namespace, live.epoch))
        if not points:
            return 0
        await self._store.calls.worker(self._writes.counted_upsert, points)
        await self._store.commit.durable()
        for name, epoch in epochs.items():
            current = self._store.records.live.get(name)
            if current is None or current.epoch != epoch:
                # As in upsert_memory: the write belongs to a dead incarnation.
                await self._store.purge(name, epoch)
                raise NamespaceGone(f"namespace {name} was deleted during the write")
        return len(points)


class EdgeStoreMeta:
    """Store-wide facts (the embedding fingerprint), in the records' SQLite file."""

    def __init__(self, store: EdgeStore) -> None:
        self._store = store

    async def read_store_meta(self) -> Mapping[str, str]:
        return await self._store.calls.worker(self._store.records.meta)

    async def write_store_meta(self, key: str, value: str) -> None:
        """After the shards' writes so far are synced: a fact such as "keyword index
        complete" must not be on disk ahead of the writes it speaks of."""
        await self._store.barrier()
        await self._store.calls.worker(
            self._store.guarded, self._store.records.set_meta, key, value
        )
