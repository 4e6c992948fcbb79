"""The embedded backend: Qdrant's own engine in-process (qdrant-edge), on disk.

The zero-config default. Layout under `data_dir`:

    store/memories/           one EdgeShard holding every memory of every namespace
    store/namespaces.sqlite3  namespace records and pending purges (edge_records.py)

Why one shard: a real installation has thousands of namespaces. One shard per
namespace (the old layout) meant thousands of open shards, each with a search
thread, so only 64 stayed open and every request beyond them closed one and
opened another (commits fell from 123/s to 7/s at 1000 namespaces). Here a
namespace is a tenant partition: every memory carries its namespace in `ns`, a
keyword payload field indexed with `is_tenant=true`, and every read, count and
delete filters on it (adapters/qdrant/layout.py, filters.py).

Isolation and deletes: each namespace incarnation has an epoch, carried by its
memories and required by every read, so a deleted namespace vanishes with its
memories the moment its record is buried, and one re-created under the same
name starts empty. The memories are then removed by a filtered delete in the
background; `maintain()` finishes any purge a crash interrupted.

Search is exact (`indexing_threshold=0`): qdrant-edge builds HNSW inside
`optimize()` holding the GIL, freezing the server (0.77 s for 10k real
embeddings); exact search over the tenant index costs time in proportion to the
namespaces searched, not the store (benchmarks/README.md). Each point also holds
a keyword vector (named sparse vector, IDF from the shard); a search ranks by
either or both, fused in one query (adapters/qdrant/ranking.py).

Durability: qdrant-edge appends every update to its write-ahead log before
`update()` returns, and records are SQLite transactions, so an acknowledged
write survives `kill -9` (tests/test_durability.py). qdrant-edge keeps the GIL
through every call, so the short calls of the request path (lookups by id, the
batched upserts, searches, single deletes) run on the event loop and the rest on
a small thread pool (edge_calls.py). One plugin process per data directory.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import qdrant_edge as qe

from adapters.base import (
    MemoryFilter,
    MemoryRecord,
    NamespaceRecord,
    ScoredMemory,
    SearchMode,
    SearchQuery,
    SparseVector,
    StoreCondition,
    StoredMemory,
    VectorBackend,
)
from adapters.errors import BackendUnavailable, NamespaceGone, StorageDamaged
from adapters.merge import pin_sides
from adapters.qdrant import filters, ranking
from adapters.qdrant.edge_batch import CallBatcher
from adapters.qdrant.edge_bulk import EdgeBulkTransfer
from adapters.qdrant.edge_calls import EngineCalls
from adapters.qdrant.edge_disk import DEFAULT_HEADROOM_BYTES, DiskGuard, allocated_bytes
from adapters.qdrant.edge_keywords import EdgeKeywordIndex
from adapters.qdrant.edge_legacy import LEGACY_DIR, migrate_legacy_layout
from adapters.qdrant.edge_records import LiveNamespace, RecordStore
from adapters.qdrant.edge_shard import (
    DENSE_VECTOR,
    EDGE,
    EDGE_RANKING,
    dense_vector,
    edge_config,
    fatal,
    open_shard,
    parsed_memory,
    point_vectors,
)
from adapters.qdrant.layout import (
    FIELD_CREATED_US,
    FIELD_EPOCH,
    Scope,
    memory_to_payload,
    point_id,
)

__all__ = ["EDGE", "QdrantEdgeBackend", "edge_config", "open_shard"]

log = logging.getLogger(__name__)

T = TypeVar("T")
# One memory on its way into the shard: its vectors and its namespace's epoch.
PendingUpsert = tuple[MemoryRecord, Sequence[float], SparseVector | None, str]
STORE_DIR = "store"
SHARD_DIR = "memories"
RECORDS_FILE = "namespaces.sqlite3"
# Vacuum once this many points were replaced or deleted since the last time.
OPTIMIZE_AFTER_CHANGES = 20_000


class QdrantEdgeBackend(EdgeBulkTransfer, EdgeKeywordIndex, VectorBackend):
    """Every namespace as a tenant partition of one qdrant-edge shard."""

    name = "qdrant-edge"

    def __init__(
        self,
        dimension: int,
        data_dir: Path,
        *,
        workers: int = 4,
        disk_headroom_bytes: int = DEFAULT_HEADROOM_BYTES,
    ) -> None:
        super().__init__(dimension)
        self._data_dir = Path(data_dir)
        self._root = self._data_dir / STORE_DIR
        self._calls = EngineCalls(workers)
        self._records = RecordStore(self._root / RECORDS_FILE)
        self._disk = DiskGuard(self._root, disk_headroom_bytes)
        self._shard: Any = None
        # Why the shard could not be opened at start (memory calls answer 503), or None.
        self._shard_problem: str | None = None
        self._upserts: CallBatcher[PendingUpsert, None] = CallBatcher(self._write_upserts)
        self._lookups: CallBatcher[tuple[LiveNamespace, str], Any] = CallBatcher(self._find)
        self._purging: set[asyncio.Task[None]] = set()
        self._changes = 0

    @property
    def search_modes(self) -> frozenset[SearchMode]:
        return ranking.QDRANT_SEARCH_MODES

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        self._calls.start()
        await self._calls.worker(self._open)

    def _open(self) -> None:
        self._root.mkdir(parents=True, exist_ok=True)
        self._records.open()
        try:
            self._shard = open_shard(self._root / SHARD_DIR, self.dimension)
        except BaseException as error:
            if fatal(error):
                raise
            # Serve what can be served (namespace records) and say why memories cannot.
            log.error("the memory store could not be opened: %s", error)
            self._shard_problem = (
                "the embedded memory store could not be opened at start (damaged files);"
                " see the plugin log and the README's 'Repairing the embedded store'"
            )
            return
        legacy = self._data_dir / LEGACY_DIR
        if legacy.is_dir():
            migrate_legacy_layout(legacy, self._shard, self._records)

    async def close(self) -> None:
        if not self._calls.started:
            return
        await self._upserts.drain()
        await self._lookups.drain()
        await asyncio.gather(*self._purging, return_exceptions=True)
        await self._calls.worker(self._close)
        self._calls.stop()

    def _close(self) -> None:
        if self._shard is not None:
            self._shard.flush()
            self._shard.close()
            self._shard = None
        self._records.close()

    async def maintain(self) -> None:
        for epoch in list(self._records.purges):
            await self._calls.worker(self._purge, epoch)
        await self._calls.worker(self._tidy)

    def _tidy(self) -> None:
        shard = self._shard_or_fail()
        if self._changes >= OPTIMIZE_AFTER_CHANGES:
            # Vacuuming rewrites the segment: only with room for a second copy.
            self._disk.check(extra_bytes=allocated_bytes(self._root / SHARD_DIR))
            self._changes = 0
            shard.optimize()
        shard.flush()

    async def ping(self) -> None:
        await self._calls.worker(self._check_writable)

    def _check_writable(self) -> None:
        if not os.access(self._root, os.W_OK | os.X_OK):
            raise BackendUnavailable("the data directory is not writable")
        if self._shard_problem is not None:
            raise BackendUnavailable(self._shard_problem)
        self._disk.refresh()

    def condition(self) -> StoreCondition:
        problems = (self._disk.problem,) if self._disk.problem else ()
        return StoreCondition(tuple(sorted(self._records.damaged)), problems)

    def _shard_or_fail(self) -> Any:
        if self._shard is None:  # the whole store is down, not one namespace
            raise BackendUnavailable(self._shard_problem or "embedded store is not open")
        return self._shard

    def _unreadable(self, name: str) -> StorageDamaged:
        return StorageDamaged(
            f"namespace {name} is unreadable in the embedded store; an operator can repair"
            " or drop it (README, 'Repairing the embedded store')",
            (name,),
        )

    # -- namespaces ------------------------------------------------------------------

    async def get_namespace(self, name: str) -> NamespaceRecord | None:
        found = self._records.live.get(name)
        if found is None and name in self._records.damaged:
            raise self._unreadable(name)
        return None if found is None else found.record

    async def get_namespaces(self, names: Sequence[str]) -> Mapping[str, NamespaceRecord]:
        live = self._records.live
        return {name: live[name].record for name in names if name in live}

    async def save_namespace(self, record: NamespaceRecord) -> None:
        if record.name in self._records.damaged:
            raise self._unreadable(record.name)
        await self._calls.worker(self._guarded, self._records.save, record)

    def _guarded(self, func: Callable[..., T], *args: Any) -> T:
        self._disk.check()
        return func(*args)

    async def delete_namespace(self, name: str) -> bool:
        """Also drops a namespace whose record is unreadable (its memories go too)."""
        epoch = await self._calls.worker(self._guarded, self._records.bury, name)
        if epoch is None:
            return False
        task = asyncio.create_task(self._calls.worker(self._purge, epoch), name=f"purge {epoch}")
        self._purging.add(task)
        task.add_done_callback(self._purged)
        return True

    def _purged(self, task: asyncio.Task[None]) -> None:
        self._purging.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("namespace purge deferred to the janitor: %s", task.exception())

    def _purge(self, epoch: str) -> None:
        """Remove an incarnation's memories from disk, then forget the purge (two steps)."""
        self._delete_incarnation(epoch)
        self._records.purged(epoch)

    def _delete_incarnation(self, epoch: str) -> None:
        self._update(
            qe.UpdateOperation.delete_points_by_filter(filters.incarnations(EDGE, [epoch]))
        )

    async def list_namespaces(self) -> list[NamespaceRecord]:
        return [found.record for found in self._records.live.values()]

    async def expired_namespaces(self, now: datetime) -> list[NamespaceRecord]:
        # In memory: microseconds per thousand namespaces, no I/O.
        return [f.record for f in self._records.live.values() if f.record.is_expired(now)]

    # -- memories --------------------------------------------------------------------

    def _scope(self, namespaces: Sequence[str]) -> Scope:
        live = self._records.live
        found = [(name, live[name].epoch) for name in dict.fromkeys(namespaces) if name in live]
        return Scope(tuple(n for n, _ in found), tuple(e for _, e in found))

    def _retrieve(self, live: LiveNamespace, memory_id: str) -> Any | None:
        """The point of `memory_id` in that incarnation of its namespace, or None."""
        return self._retrieve_many([(live, memory_id)])[0]

    async def _find(self, items: list[tuple[LiveNamespace, str]]) -> list[Any]:
        return await self._calls.here(self._retrieve_many, items)

    def _retrieve_many(self, items: list[tuple[LiveNamespace, str]]) -> list[Any]:
        """`_retrieve` for many (namespace incarnation, id) pairs in one engine call."""
        ids = [point_id(live.record.name, memory_id) for live, memory_id in items]
        found = self._shard_or_fail().retrieve(
            list(dict.fromkeys(ids)), with_payload=True, with_vector=[DENSE_VECTOR]
        )
        by_id = {str(point.id): point for point in found}
        points = [by_id.get(wanted) for wanted in ids]
        return [
            point if point is not None and point.payload.get(FIELD_EPOCH) == live.epoch else None
            for point, (live, _) in zip(points, items, strict=True)
        ]

    async def get_memory(self, namespace: str, memory_id: str) -> MemoryRecord | None:
        found = await self.get_stored_memory(namespace, memory_id)
        return None if found is None else found[0]

    async def get_stored_memory(self, namespace: str, memory_id: str) -> StoredMemory | None:
        """One lookup (batched with concurrent ones): the payload and the dense vector."""
        live = self._records.live.get(namespace)
        if live is None:
            return None
        point = await self._lookups.submit((live, memory_id))
        if point is None:
            return None
        memory = parsed_memory(point)
        if memory is None:
            raise StorageDamaged(f"memory {memory_id} in {namespace} is unreadable", (namespace,))
        return memory, dense_vector(point)

    async def upsert_memory(
        self, memory: MemoryRecord, vector: Sequence[float], keywords: SparseVector | None = None
    ) -> None:
        live = self._records.live.get(memory.namespace)
        if live is None:
            raise NamespaceGone(f"namespace {memory.namespace} not found")
        await self._upserts.submit((memory, vector, keywords, live.epoch))
        current = self._records.live.get(memory.namespace)
        if current is None or current.epoch != live.epoch:
            # The namespace was deleted (maybe re-created) while we wrote, and its purge
            # may already have run: the write belongs to a dead incarnation. Purge again
            # rather than leave an orphan no read can see.
            await self._calls.worker(self._purge, live.epoch)
            raise NamespaceGone(f"namespace {memory.namespace} was deleted during the write")

    async def _write_upserts(self, items: list[PendingUpsert]) -> list[None]:
        await self._calls.here(self._upsert_points, items)
        return [None] * len(items)

    def _upsert_points(self, items: list[PendingUpsert]) -> None:
        points = [
            qe.Point(
                point_id(memory.namespace, memory.id),
                point_vectors(vector, keywords),
                memory_to_payload(memory, epoch),
            )
            for memory, vector, keywords, epoch in items
        ]
        self._update(qe.UpdateOperation.upsert_points(points))

    def _update(self, operation: Any) -> None:
        """Every write to the shard goes through here, behind the disk guard."""
        shard = self._shard_or_fail()
        self._disk.check()
        shard.update(operation)
        self._changes += 1

    def _batch(self, requests: list[Any]) -> list[Any]:
        return [
            point
            for side in self._shard_or_fail().query_batch(qe.QueryBatchRequest(requests))
            for point in side
        ]

    async def query_memories(
        self,
        namespaces: Sequence[str],
        query: SearchQuery,
        memory_filter: MemoryFilter,
        limit: int,
    ) -> list[ScoredMemory]:
        scope = self._scope(namespaces)
        if not scope:
            return []
        wheres = [filters.memories(EDGE, side, scope) for side in pin_sides(memory_filter)]
        requests = ranking.requests(EDGE_RANKING, query, wheres, limit)
        points = await self._calls.here(self._batch, requests)
        return [
            ScoredMemory(memory, p.score)
            for p in points
            if (memory := parsed_memory(p)) is not None
        ][:limit]

    async def list_memories(
        self, namespaces: Sequence[str], memory_filter: MemoryFilter, limit: int
    ) -> list[MemoryRecord]:
        scope = self._scope(namespaces)
        if not scope:
            return []
        newest_first = qe.OrderBy(FIELD_CREATED_US, direction=qe.Direction.Desc)
        requests = [
            qe.QueryRequest(
                limit=limit,
                query=newest_first,
                filter=filters.memories(EDGE, side, scope),
                with_payload=True,
            )
            for side in pin_sides(memory_filter)
        ]
        points = await self._calls.here(self._batch, requests)
        return [memory for p in points if (memory := parsed_memory(p)) is not None][:limit]

    async def delete_memory(self, namespace: str, memory_id: str) -> bool:
        live = self._records.live.get(namespace)
        if live is None:
            return False

        def delete() -> bool:
            point = self._retrieve(live, memory_id)
            if point is None:
                return False
            self._update(qe.UpdateOperation.delete_points([point.id]))
            return True

        return await self._calls.here(delete)

    async def delete_expired_memories(self, now: datetime) -> int:
        expired = filters.expired(EDGE, now)

        def sweep() -> int:
            shard = self._shard_or_fail()
            count: int = shard.count(qe.CountRequest(filter=expired, exact=True))
            if count:
                self._update(qe.UpdateOperation.delete_points_by_filter(expired))
            return count

        return await self._calls.worker(sweep)
