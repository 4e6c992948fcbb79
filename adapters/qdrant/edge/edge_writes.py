"""Writes of memories to the embedded store: upserts counted, deletes, the expiry sweep.

A part of `QdrantEdgeBackend` (edge_backend.py), over the shared `EdgeStore` (store.py); a
delete finds its memory through the reads (edge_reads.py). Every write counts: a memory new to
its namespace's incarnation is counted after the engine has it, one deleted is uncounted before
the engine deletes it (record_store.py), so the integrity check (integrity.py) can tell a
crash's harmless drift from a loss. Concurrent upserts are batched into one engine call per
shard (log_sync.py, `CallBatcher`); each write returns once it is on disk (the group
commit, log_sync.py; a no-op under `async`). A write whose namespace is deleted meanwhile is
purged and raises `NamespaceGone`. `EdgeTransfer` and `EdgeStoreMeta` are the `transfer` and
`store_meta` parts (adapters/parts.py) that `QdrantEdgeBackend` hands out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from collections.abc import Mapping
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import qdrant_edge as qe

from adapters.errors import NamespaceGone
from adapters.qdrant import filters
from adapters.qdrant.edge.edge_reads import EdgeReads
from adapters.qdrant.edge.engine import DENSE_VECTOR
from adapters.qdrant.edge.engine import EDGE
from adapters.qdrant.edge.engine import dense_vector
from adapters.qdrant.edge.engine import parsed_memory
from adapters.qdrant.edge.engine import point_vectors
from adapters.qdrant.edge.integrity import engine_counts
from adapters.qdrant.edge.log_sync import CallBatcher
from adapters.qdrant.edge.store import EdgeStore
from adapters.qdrant.layout import FIELD_EPOCH
from adapters.qdrant.layout import Scope
from adapters.qdrant.layout import memory_to_payload
from adapters.qdrant.layout import point_id
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import SparseVector
from adapters.values import StoredMemory
from adapters.values import with_keywords

# One memory on its way into a shard: its vectors and its namespace's epoch.
PendingUpsert = tuple[MemoryRecord, MemoryVectors, str]


class EdgeWrites:
    """`upsert_memory`, `delete_memory`, `delete_expired_memories` and the counted upsert."""

    def __init__(self, store: EdgeStore, reads: EdgeReads) -> None:
        self._store = store
        self._reads = reads
        self._upserts: CallBatcher[PendingUpsert, None] = CallBatcher(self._write_upserts)

    async def drain(self) -> None:
        await self._upserts.drain()

    async def upsert_memory(self, memory: MemoryRecord, vectors: MemoryVectors) -> None:
        live = self._store.records.live.get(memory.namespace)
        if live is None:
            raise NamespaceGone(f"namespace {memory.namespace} not found")
        await self._upserts.submit((memory, vectors, live.epoch))
        await self._store.commit.durable()
        current = self._store.records.live.get(memory.namespace)
        if current is None or current.epoch != live.epoch:
            # The namespace was deleted (maybe re-created) while we wrote, and its purge
            # may already have run: the write belongs to a dead incarnation. Purge again
            # rather than leave an orphan no read can see.
            await self._store.purge(memory.namespace, live.epoch)
            raise NamespaceGone(f"namespace {memory.namespace} was deleted during the write")

    async def _write_upserts(self, items: list[PendingUpsert]) -> list[None]:
        await self._store.calls.here(self._upsert_points, items)
        return [None] * len(items)

    def _upsert_points(self, items: list[PendingUpsert]) -> None:
        points = [
            (
                qe.Point(
                    point_id(memory.namespace, memory.id),
                    point_vectors(vectors.dense, vectors.keywords, vectors.tokens),
                    memory_to_payload(memory, epoch),
                ),
                memory.namespace,
                epoch,
            )
            for memory, vectors, epoch in items
        ]
        self.counted_upsert(points)

    def counted_upsert(self, points: list[tuple[Any, str, str]]) -> None:
        """Upsert (one call per shard), then count the memories new to their incarnation:
        a count goes up only once the engine has them (record_store.py)."""
        by_shard: dict[int, list[tuple[Any, str, str]]] = {}
        for item in points:
            by_shard.setdefault(self._store.shards.index_of(item[1]), []).append(item)
        for items in by_shard.values():
            shard = self._store.shards.of(items[0][1])
            ids = list(dict.fromkeys(str(point.id) for point, _, _ in items))
            held = {
                str(found.id): found.payload.get(FIELD_EPOCH)
                for found in shard.retrieve(ids, with_payload=[FIELD_EPOCH], with_vector=False)
            }
            new = {str(p.id): epoch for p, _, epoch in items if held.get(str(p.id)) != epoch}
            self._store.update(shard, qe.UpdateOperation.upsert_points([p for p, _, _ in items]))
            self._store.records.count(Counter(new.values()))

    async def delete_memory(self, namespace: str, memory_id: str) -> bool:
        live = self._store.records.live.get(namespace)
        if live is None:
            return False

        def find() -> Any | None:
            point = self._reads.retrieve(live, memory_id)
            return None if point is None else point.id

        def delete(found: Any) -> None:
            shard = self._store.shards.of(namespace)
            self._store.update(shard, qe.UpdateOperation.delete_points([found]))

        found = await self._store.calls.here(find)
        if found is None:
            return False
        # The count down on disk before the engine deletes (record_store.py).
        await self._store.calls.worker(self._uncount, live.epoch)
        await self._store.calls.here(delete, found)
        await self._store.commit.durable()
        return True

    def _uncount(self, epoch: str) -> None:
        self._store.disk.check()
        self._store.records.count_now({epoch: -1})

    async def delete_expired_memories(self, now: datetime) -> int:
        expired = filters.expired(EDGE, now)

        def sweep() -> int:
            deleted = 0
            for shard in self._store.shards.open_shards():
                counts = engine_counts(shard, expired)
                if counts:
                    self._store.disk.check()
                    self._store.records.count_now({epoch: -n for epoch, n in counts.items()})
                    self._store.update(shard, qe.UpdateOperation.delete_points_by_filter(expired))
                    deleted += sum(counts.values())
            return deleted

        return await self._store.calls.worker(sweep)


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
