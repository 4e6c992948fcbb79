"""The embedded store's `transfer` part (adapters/parts.py): export and import.

`EdgeTransfer` reads a namespace out a page at a time, so a long export never holds the engine for
long, and writes an import's memories in one update a batch, counted and synced as any write.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import qdrant_edge as qe

from adapters.engine.engine import DENSE_VECTOR
from adapters.engine.engine import EDGE
from adapters.engine.engine import dense_vector
from adapters.engine.engine import parsed_memory
from adapters.engine.engine import point_vectors
from adapters.engine.store import EdgeStore
from adapters.engine.store import memory_point
from adapters.qdrant import filters
from adapters.qdrant.layout import FIELD_POSITION
from adapters.qdrant.layout import Scope
from adapters.qdrant.layout import point_id
from adapters.values import MemoryFilter
from adapters.values import SparseVector
from adapters.values import StoredMemory
from adapters.values import with_keywords


class EdgeTransfer:
    """`iter_memories` and `upsert_memories`, for export and import."""

    def __init__(self, store: EdgeStore) -> None:
        self._store = store

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
        dense = [DENSE_VECTOR] if with_vectors else False  # not the token vectors
        offset: Any = None
        while True:
            request = qe.ScrollRequest(
                offset=offset, limit=page_size, filter=wanted, with_payload=True, with_vector=dense
            )
            shard = self._store.shards.of(namespace)
            page, offset = await self._store.calls.worker(shard.scroll, request)
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

    async def upsert_memories(
        self, memories: Sequence[StoredMemory], keywords: Sequence[SparseVector] | None = None
    ) -> int:
        """One shard update for the whole batch: an import writes thousands a second where
        one update per memory manages a few hundred. Same epoch rules as `upsert_memory`."""
        epochs: dict[str, str] = {}
        points: list[tuple[Any, str, str]] = []
        for (memory, vector), memory_keywords in with_keywords(memories, keywords):
            epoch = epochs[memory.namespace] = self._store.live_epoch(memory.namespace)
            points.append(memory_point(memory, epoch, point_vectors(vector, memory_keywords)))
        if not points:
            return 0
        async with self._store.writing():
            await self._store.calls.worker(self._store.counted_upsert, points)
        await self._store.commit.durable()
        for name, epoch in epochs.items():
            await self._store.confirm_live(name, epoch)
        return len(points)

    async def place_memories(self, namespace: str, places: Sequence[tuple[str, int]]) -> int:
        """One engine update per memory, all in one worker call, synced as any write."""
        if not places or namespace not in self._store.records.live:
            return len(places)
        async with self._store.writing():
            await self._store.calls.worker(self._place, namespace, places)
        await self._store.commit.durable()
        return len(places)

    def _place(self, namespace: str, places: Sequence[tuple[str, int]]) -> None:
        shard = self._store.shards.of(namespace)
        ids = {point_id(namespace, memory_id): place for memory_id, place in places}
        held = shard.retrieve(list(ids), with_payload=False, with_vector=False)
        for point in held:  # setting a payload on a missing point fails the update
            found = str(point.id)
            operation = qe.UpdateOperation.set_payload([found], {FIELD_POSITION: ids[found]})
            self._store.update(shard, operation)
