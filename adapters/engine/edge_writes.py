"""Writes to the embedded store: upserts, deletes, the expiry sweep, and vectors given in place.

A part of `QdrantEdgeBackend` (edge_backend.py): every write is counted (store.py) and answered
once on disk (log_sync.py); concurrent upserts share one engine call per shard (call_batcher.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import qdrant_edge as qe

from adapters.engine.call_batcher import CallBatcher
from adapters.engine.edge_reads import EdgeReads
from adapters.engine.engine import EDGE
from adapters.engine.engine import add_vectors
from adapters.engine.engine import fill_vectors
from adapters.engine.engine import point_vectors
from adapters.engine.integrity import engine_counts
from adapters.engine.store import EdgeStore
from adapters.engine.store import memory_point
from adapters.errors import BackendError
from adapters.errors import NamespaceGone
from adapters.qdrant import filters
from adapters.qdrant.wordpieces import FOUND_BY
from adapters.values import FillVector
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import SparseVector
from adapters.values import VectorKind
from adapters.walk import Page
from adapters.walk import by_place
from adapters.walk import walk

# One memory on its way into a shard: its vectors and its namespace's epoch.
PendingUpsert = tuple[MemoryRecord, MemoryVectors, str]


class EdgeWrites:
    """`upsert_memory`, `upsert_batch`, `delete_memory` and `delete_expired_memories`."""

    def __init__(self, store: EdgeStore, reads: EdgeReads) -> None:
        self._store = store
        self._reads = reads
        self._upserts: CallBatcher[PendingUpsert, None] = CallBatcher(self._write_upserts)

    async def drain(self) -> None:
        await self._upserts.drain()

    async def upsert_memory(self, memory: MemoryRecord, vectors: MemoryVectors) -> None:
        (failed,) = await self.upsert_batch([(memory, vectors)])
        if failed is not None:
            raise failed

    async def upsert_batch(
        self, batch: Sequence[tuple[MemoryRecord, MemoryVectors]]
    ) -> list[BackendError | None]:
        """The batch in one engine update with the upserts of the calls meanwhile, one sync
        (call_batcher.py); a namespace gone before or during the write fails its own only."""
        failed: list[BackendError | None] = [None] * len(batch)
        pending: list[PendingUpsert] = []
        written: dict[tuple[str, str], list[int]] = {}
        for n, (memory, vectors) in enumerate(batch):
            try:
                epoch = self._store.live_epoch(memory.namespace)
            except NamespaceGone as gone:
                failed[n] = gone
                continue
            pending.append((memory, vectors, epoch))
            written.setdefault((memory.namespace, epoch), []).append(n)
        if not pending:
            return failed
        self._store.admit()  # before the batch queues behind a stalled sync
        await self._upserts.submit_all(pending)
        await self._store.commit.durable()
        for (name, epoch), positions in written.items():
            try:
                await self._store.confirm_live(name, epoch)
            except NamespaceGone as gone:
                for n in positions:
                    failed[n] = gone
        return failed

    async def _write_upserts(self, items: list[PendingUpsert]) -> list[None]:
        async with self._store.writing():
            await self._store.calls.here(self._upsert_points, items)
        return [None] * len(items)

    def _upsert_points(self, items: list[PendingUpsert]) -> None:
        points = []
        for memory, vectors, epoch in items:
            keywords = self._keywords(memory, vectors)
            points.append(
                memory_point(memory, epoch, point_vectors(vectors.dense, keywords, vectors.tokens))
            )
        self._store.counted_upsert(points)

    def _keywords(self, memory: MemoryRecord, vectors: MemoryVectors) -> SparseVector | None:
        if vectors.keywords is None and vectors.make_keywords:
            return self._store.keywords.document(memory.content)
        return vectors.keywords

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
        async with self._store.writing():
            await self._store.calls.worker(self._uncount, live.epoch)
            await self._store.calls.here(delete, found)
        await self._store.commit.durable()
        return True

    def _uncount(self, epoch: str) -> None:
        self._store.admit()
        self._store.records.count_store.add({epoch: -1}, now=True)

    async def delete_expired_memories(self, now: datetime) -> int:
        expired = filters.expired(EDGE, now)

        def sweep() -> int:
            deleted = 0
            for shard in self._store.shards.open_shards():
                counts = engine_counts(shard, expired)
                if counts:
                    self._store.admit()
                    uncounted = {epoch: -n for epoch, n in counts.items()}
                    self._store.records.count_store.add(uncounted, now=True)
                    self._store.update(shard, qe.UpdateOperation.delete_points_by_filter(expired))
                    deleted += sum(counts.values())
            return deleted

        async with self._store.writing():
            return await self._store.calls.worker(sweep)


class EdgeVectorFill:
    """`VectorFill` of the embedded store: a walk over its shards (adapters/walk.py) for the
    memories lacking the vector their kind is found by (`wordpieces.FOUND_BY`), and a write
    of what is still missing."""

    def __init__(self, store: EdgeStore, dimension: int) -> None:
        self._store = store
        self._dimension = dimension  # the token vectors'

    async def prepare(self, kind: VectorKind, *, reset: bool = False) -> None:
        def prepare() -> None:
            for shard in self._store.shards.open_shards():
                add_vectors(shard, kind, self._dimension, reset=reset)

        await self._store.calls.worker(prepare)

    async def missing(self, kind: VectorKind, cursor: str | None, limit: int) -> Page[str]:
        async def page(place: str, after: str | None) -> Page[str]:
            return await self._store.calls.worker(self._page, kind, int(place), after, limit)

        return await walk([str(n) for n in range(len(self._store.shards.shards))], cursor, page)

    def _page(self, kind: VectorKind, index: int, after: str | None, limit: int) -> Page[str]:
        shard = self._store.shards.shards[index]
        if shard is None:  # not open (absent, damaged): nothing to fill
            return [], None
        offset = None if after is None else uuid.UUID(after)
        request = qe.ScrollRequest(
            offset=offset, limit=limit, filter=_lacking(kind), with_payload=["content"]
        )
        page, following = shard.scroll(request)
        found = [
            (str(point.id), content)
            for point in page
            if isinstance(content := (point.payload or {}).get("content"), str)
        ]
        return found, None if following is None else str(following)

    async def fill(self, kind: VectorKind, items: Sequence[tuple[str, FillVector]]) -> int:
        for place, found in by_place(items).items():
            named = [(point, fill_vectors(vector)) for point, vector in found]
            async with self._store.writing():
                await self._store.calls.worker(self._fill, kind, int(place), named)
        return len(items)

    def _fill(self, kind: VectorKind, index: int, items: list[tuple[str, dict[str, Any]]]) -> None:
        """One update for the page. A point deleted since it was listed makes the engine
        refuse the whole update: then once more without the gone (as a server's, in
        server/vector_fill.fill_page)."""
        shard = self._store.shards.shards[index]
        if shard is None:
            return
        unset = _lacking(kind)
        vectors = [qe.PointVectors(key, named) for key, named in items]
        try:
            self._store.update(shard, qe.UpdateOperation.update_vectors(vectors, condition=unset))
        except Exception:
            ids = [key for key, _ in items]
            found = shard.retrieve(ids, with_payload=False, with_vector=False)
            present = {str(point.id) for point in found}
            remaining = [vector for vector in vectors if str(vector.id) in present]
            if len(remaining) == len(vectors):
                raise
            if remaining:
                update = qe.UpdateOperation.update_vectors(remaining, condition=unset)
                self._store.update(shard, update)


def _lacking(kind: VectorKind) -> Any:
    return qe.Filter(must_not=[qe.HasVectorCondition(FOUND_BY[kind])])
