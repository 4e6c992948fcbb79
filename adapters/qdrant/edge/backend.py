"""The embedded backend: Qdrant's own engine in-process (qdrant-edge), on disk.

The zero-config default. Layout under `data_dir`:

    store/memories/           one EdgeShard holding every memory of every namespace
    store/namespaces.sqlite3  namespace records and pending purges (namespace_records.py)

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
a small thread pool (dispatch.py). One plugin process per data directory.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import qdrant_edge as qe

from adapters.base import (
    MemoryRecord,
    NamespaceRecord,
    SearchMode,
    StoreCondition,
    StoredMemory,
    VectorBackend,
)
from adapters.errors import BackendUnavailable, StorageDamaged
from adapters.qdrant import filters, ranking
from adapters.qdrant.edge import integrity
from adapters.qdrant.edge.batching import CallBatcher
from adapters.qdrant.edge.disk import DEFAULT_HEADROOM_BYTES, DiskGuard, allocated_bytes
from adapters.qdrant.edge.dispatch import EngineCalls
from adapters.qdrant.edge.engine import (
    EDGE,
    dense_vector,
    edge_config,
    open_shard,
    parsed_memory,
)
from adapters.qdrant.edge.integrity import IntegrityReport, some
from adapters.qdrant.edge.keyword_index import EdgeKeywordIndex
from adapters.qdrant.edge.legacy_layout import LEGACY_DIR, migrate_legacy_layout
from adapters.qdrant.edge.namespace_records import LiveNamespace, RecordStore
from adapters.qdrant.edge.reads import EdgeReads
from adapters.qdrant.edge.shards import ShardSet
from adapters.qdrant.edge.transfer import EdgeBulkTransfer
from adapters.qdrant.edge.writes import EdgeWrites, PendingUpsert

__all__ = ["EDGE", "QdrantEdgeBackend", "edge_config", "open_shard"]

log = logging.getLogger(__name__)

T = TypeVar("T")
STORE_DIR = "store"
SHARD_DIR = "memories"
RECORDS_FILE = "namespaces.sqlite3"
# Vacuum once this many points were replaced or deleted since the last time.
OPTIMIZE_AFTER_CHANGES = 20_000
# How often the janitor compares the records with the engine (integrity.py).
VERIFY_EVERY_S = 600.0


class QdrantEdgeBackend(EdgeReads, EdgeWrites, EdgeBulkTransfer, EdgeKeywordIndex, VectorBackend):
    """Every namespace as a tenant partition of one of a few qdrant-edge shards."""

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
        self._shards = ShardSet(self._root, dimension, self._disk)
        self._upserts: CallBatcher[PendingUpsert, None] = CallBatcher(self._write_upserts)
        self._lookups: CallBatcher[tuple[LiveNamespace, str], Any] = CallBatcher(self._find)
        self._purging: set[asyncio.Task[None]] = set()
        self._changes = 0
        self.integrity = IntegrityReport()
        self._verified_at = float("-inf")

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
        self._shards.open()
        legacy = self._data_dir / LEGACY_DIR
        if legacy.is_dir():
            migrate_legacy_layout(legacy, self._shards.of, self._records)
        self._verify(at_start=True)

    def _verify(self, *, at_start: bool = False) -> IntegrityReport:
        self.integrity = integrity.check(self._shards, self._records, at_start=at_start)
        self._verified_at = time.monotonic()
        return self.integrity

    async def verify(self) -> tuple[str, ...]:
        """Compare the namespace records with the memories the engine holds (verify-store)."""
        report = await self._calls.worker(self._verify)  # a facet per shard: not on the loop
        unreadable = self.condition().unreadable_namespaces
        found = (f"{len(unreadable)} namespace(s) unreadable: {some(unreadable)}",)
        return (found if unreadable else ()) + report.problems()

    async def close(self) -> None:
        if not self._calls.started:
            return
        await self._upserts.drain()
        await self._lookups.drain()
        await asyncio.gather(*self._purging, return_exceptions=True)
        await self._calls.worker(self._close)
        self._calls.stop()

    def _close(self) -> None:
        self._shards.close()
        self._records.close()

    async def maintain(self) -> None:
        for epoch, name in list(self._records.purges.items()):
            index = self._shards.index_of(name)
            if index in self._shards.damaged or index in self._shards.waiting_for_room:
                continue  # purged once its shard serves again; the rest goes on
            await self._calls.worker(self._purge, name, epoch)
        await self._calls.worker(self._tidy)
        if time.monotonic() - self._verified_at >= VERIFY_EVERY_S:
            await self.verify()

    def _tidy(self) -> None:
        vacuum = self._changes >= OPTIMIZE_AFTER_CHANGES
        for path, shard in zip(self._shards.paths, self._shards.shards, strict=True):
            if shard is None:
                continue
            if vacuum:  # rewrites the segment: only with room for a second copy
                self._disk.check(extra_bytes=allocated_bytes(path))
                shard.optimize()
            shard.flush()
        if vacuum:
            self._changes = 0

    async def ping(self) -> None:
        await self._calls.worker(self._check_writable)

    def _check_writable(self) -> None:
        if not os.access(self._root, os.W_OK | os.X_OK):
            raise BackendUnavailable("the data directory is not writable")
        if self._shards.waiting_for_room:
            self._shards.retry_waiting()  # meanwhile health is 200 `degraded`: the disk
        if self._shards.all_down:
            raise BackendUnavailable(
                "the embedded memory store could not be opened at start (damaged files);"
                " see the plugin log and docs/repair.md#a-shard-does-not-open"
            )
        self._disk.refresh()

    def condition(self) -> StoreCondition:
        full = next(iter(self._shards.waiting_for_room.values()), None) or self._disk.problem
        problems = ((full,) if full else ()) + self.integrity.problems()
        unreadable = set(self._records.damaged) | set(self._shards.down(self._records.live))
        return StoreCondition(tuple(sorted(unreadable)), problems)

    def _unreadable(self, name: str) -> StorageDamaged:
        return StorageDamaged(
            f"namespace {name} is unreadable in the embedded store; an operator can repair"
            " or drop it (docs/repair.md#unreadable-namespace)",
            (name,),
        )

    # -- namespaces ------------------------------------------------------------------

    async def get_namespace(self, name: str) -> NamespaceRecord | None:
        found = self._records.live.get(name)
        if found is None and name in self._records.damaged:
            raise self._unreadable(name)
        return None if found is None else found.record

    async def get_namespaces(self, names: Sequence[str]) -> Mapping[str, NamespaceRecord]:
        """Raises `StorageDamaged` when none is live and some are unreadable (a 503, not
        an empty answer that looks like a namespace without memories)."""
        live = self._records.live
        found = {name: live[name].record for name in names if name in live}
        if not found and (damaged := [n for n in names if n in self._records.damaged]):
            raise self._unreadable(", ".join(damaged))
        return found

    async def save_namespace(self, record: NamespaceRecord) -> None:
        if record.name in self._records.damaged:
            raise self._unreadable(record.name)
        await self._calls.worker(self._save, record)

    def _save(self, record: NamespaceRecord) -> None:
        self._disk.check()
        self._shards.of(record.name)  # its shard exists (is created) before its first write
        self._records.save(record)

    def _guarded(self, func: Callable[..., T], *args: Any) -> T:
        self._disk.check()
        return func(*args)

    async def delete_namespace(self, name: str) -> bool:
        """Also drops a namespace whose record is unreadable (its memories go too)."""
        epoch = await self._calls.worker(self._guarded, self._records.bury, name)
        if epoch is None:
            return False
        purge = self._calls.worker(self._purge, name, epoch)
        task = asyncio.create_task(purge, name=f"purge {epoch}")
        self._purging.add(task)
        task.add_done_callback(self._purged)
        return True

    def _purged(self, task: asyncio.Task[None]) -> None:
        self._purging.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("namespace purge deferred to the janitor: %s", task.exception())

    def _purge(self, name: str, epoch: str) -> None:
        """Remove an incarnation's memories from disk, then forget the purge (two steps).

        By name and epoch together: an epoch alone, copied into another namespace's
        damaged record, would purge that namespace too."""
        self._delete_incarnation(name, epoch)
        self._records.purged(epoch)

    def _delete_incarnation(self, name: str, epoch: str) -> None:
        where = filters.incarnation(EDGE, name, epoch)
        self._update(self._shards.of(name), qe.UpdateOperation.delete_points_by_filter(where))

    async def list_namespaces(self) -> list[NamespaceRecord]:
        return [found.record for found in self._records.live.values()]

    async def expired_namespaces(self, now: datetime) -> list[NamespaceRecord]:
        # In memory: microseconds per thousand namespaces, no I/O.
        return [f.record for f in self._records.live.values() if f.record.is_expired(now)]

    # -- memories --------------------------------------------------------------------

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

    def _update(self, shard: Any, operation: Any) -> None:
        """Every write to a shard goes through here, behind the disk guard."""
        self._disk.check()
        shard.update(operation)
        self._changes += 1
