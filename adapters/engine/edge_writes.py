"""Writes to the embedded store: upserts, deletes, the expiry sweep, and vectors given in place.

A part of `QdrantEdgeBackend` (edge_backend.py): every write is counted (store.py) and answered
once on disk (log_sync.py); concurrent upserts share one engine call per shard (call_batcher.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from typing import TypeVar

import qdrant_edge as qe

from adapters.engine.call_batcher import CallBatcher
from adapters.engine.edge_reads import EdgeReads
from adapters.engine.engine import EDGE
from adapters.engine.engine import add_keyword_vector
from adapters.engine.engine import add_token_vector
from adapters.engine.engine import drop_keyword_vector
from adapters.engine.engine import point_vectors
from adapters.engine.engine import sparse
from adapters.engine.engine import token_vectors
from adapters.engine.integrity import engine_counts
from adapters.engine.store import EdgeStore
from adapters.engine.store import memory_point
from adapters.errors import BackendError
from adapters.errors import NamespaceGone
from adapters.qdrant import filters
from adapters.qdrant.ranking import KEYWORDS_VECTOR
from adapters.qdrant.wordpieces import WORDPIECES_VECTOR
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import SparseVector
from adapters.values import TokenVectors

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
        self._store.unstalled()
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
        points = [
            memory_point(
                memory, epoch, point_vectors(vectors.dense, vectors.keywords, vectors.tokens)
            )
            for memory, vectors, epoch in items
        ]
        self._store.counted_upsert(points)

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


V = TypeVar("V")


class MissingVectors:
    """The memories of the store without the vector `name`."""

    def __init__(self, store: EdgeStore, name: str) -> None:
        self._store = store
        self._name = name
        self._missing = qe.Filter(must_not=[qe.HasVectorCondition(name)])

    async def page(
        self, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        """Up to `limit` of them as (key, content), and the cursor of the next page."""
        index, _, after = (cursor or "0:").partition(":")
        return await self._store.calls.worker(self._page, int(index), after or None, limit)

    def _page(
        self, index: int, after: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        shards = self._store.shards.shards
        while index < len(shards) and shards[index] is None:
            index, after = index + 1, None  # not open (absent, damaged): nothing to fill
        if index >= len(shards):
            return [], None
        offset = None if after is None else uuid.UUID(after)
        request = qe.ScrollRequest(
            offset=offset, limit=limit, filter=self._missing, with_payload=["content"]
        )
        shard = shards[index]
        assert shard is not None  # skipped above
        page, following = shard.scroll(request)
        found = [
            (f"{index}/{point.id}", content)
            for point in page
            if isinstance(content := (point.payload or {}).get("content"), str)
        ]
        if following is not None:
            return found, f"{index}:{following}"
        return found, f"{index + 1}:" if index + 1 < len(shards) else None

    async def fill(
        self, items: Sequence[tuple[str, V]], stored: Callable[[V], dict[str, Any]]
    ) -> int:
        """Give each keyed memory its vector (`stored` spells it, and any stored beside it,
        for the engine), unless it has one by now; how many were asked for."""
        by_shard: dict[int, list[tuple[str, Any]]] = {}
        for key, vector in items:
            shard_index, _, point = key.partition("/")
            by_shard.setdefault(int(shard_index), []).append((point, stored(vector)))
        for index, found in by_shard.items():
            async with self._store.writing():
                await self._store.calls.worker(self._fill, index, found)
        return len(items)

    def _fill(self, index: int, items: list[tuple[str, dict[str, Any]]]) -> None:
        """One update for the page. A point deleted since it was listed makes the engine
        refuse the whole update: then once more without the gone (as a server's, in
        server/keyword_vectors.index_page)."""
        shard = self._store.shards.shards[index]
        if shard is None:
            return
        vectors = [qe.PointVectors(key, named) for key, named in items]
        try:
            self._store.update(
                shard, qe.UpdateOperation.update_vectors(vectors, condition=self._missing)
            )
        except Exception:
            ids = [key for key, _ in items]
            found = shard.retrieve(ids, with_payload=False, with_vector=False)
            present = {str(point.id) for point in found}
            remaining = [vector for vector in vectors if str(vector.id) in present]
            if len(remaining) == len(vectors):
                raise
            if remaining:
                self._store.update(
                    shard, qe.UpdateOperation.update_vectors(remaining, condition=self._missing)
                )


class EdgeKeywordIndex:
    """`prepare_keywords`, `unindexed_memories` and `index_keywords` for the embedded store
    (the walk and the conditional write: `MissingVectors`)."""

    def __init__(self, store: EdgeStore) -> None:
        self._store = store
        self._missing = MissingVectors(store, KEYWORDS_VECTOR)

    async def prepare_keywords(self, *, reset: bool = False) -> None:
        await self._store.calls.worker(self._prepare_keywords, reset)

    def _prepare_keywords(self, reset: bool) -> None:
        for shard in self._store.shards.open_shards():
            if reset:
                drop_keyword_vector(shard)
            else:
                add_keyword_vector(shard)

    async def unindexed_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        return await self._missing.page(cursor, limit)

    async def index_keywords(self, items: Sequence[tuple[str, SparseVector]]) -> int:
        return await self._missing.fill(items, lambda vector: {KEYWORDS_VECTOR: sparse(vector)})


class EdgeTokenIndex:
    """`prepare_tokens`, `untokenized_memories` and `index_tokens` for the embedded store
    (the walk and the conditional write: `MissingVectors`). A memory is found by its missing
    wordpieces, which are written with its token codes, so a store whose codes predate
    wordpieces gains both (adapters/qdrant/wordpieces.py)."""

    def __init__(self, store: EdgeStore, dimension: int) -> None:
        self._store = store
        self._dimension = dimension
        self._missing = MissingVectors(store, WORDPIECES_VECTOR)

    async def prepare_tokens(self) -> None:
        def prepare() -> None:
            for shard in self._store.shards.open_shards():
                add_token_vector(shard, self._dimension)

        await self._store.calls.worker(prepare)

    async def untokenized_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        return await self._missing.page(cursor, limit)

    async def index_tokens(self, items: Sequence[tuple[str, TokenVectors]]) -> int:
        return await self._missing.fill(items, token_vectors)
