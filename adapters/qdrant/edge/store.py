"""What the parts of the embedded backend share: its shards, records, disk guard and threads.

`QdrantEdgeBackend` (edge_backend.py) is a facade over parts that each hold one concern
(edge_namespaces.py, edge_reads.py, edge_writes.py); they are handed one `EdgeStore` rather
than reaching into the backend. Every write to a shard goes through `update`: behind the disk
guard, counted for the janitor's vacuum and marked for the group commit (log_sync.py).
`EngineCalls`: where a qdrant-edge call runs. The engine holds the GIL through its calls, so
in the engine worker a short call runs on the worker's event loop (`here`), queued behind one
in flight on a thread; what is long or waits on the disk runs on a thread (`worker`: opening,
SQLite commits, purges, upkeep, bulk transfer), the group commit's syncs on a thread of their
own (`syncing`), where a stalled disk holds up the writes waiting for it, never the loop.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any
from typing import Literal
from typing import NoReturn
from typing import TypeVar

import qdrant_edge as qe

from adapters.disk import DiskGuard
from adapters.errors import BackendUnavailable
from adapters.errors import NamespaceGone
from adapters.qdrant import filters
from adapters.qdrant.edge.engine import EDGE
from adapters.qdrant.edge.engine import fatal
from adapters.qdrant.edge.engine import translate
from adapters.qdrant.edge.log_sync import GroupCommit
from adapters.qdrant.edge.log_sync import LogSync
from adapters.qdrant.edge.record_store import RecordStore
from adapters.qdrant.edge.shards import ShardSet
from adapters.qdrant.edge.wordpiece_idf import WordpieceIdf
from adapters.qdrant.layout import FIELD_EPOCH
from adapters.qdrant.layout import memory_to_payload
from adapters.qdrant.layout import point_id
from adapters.values import Durability
from adapters.values import MemoryRecord

T = TypeVar("T")
# What the janitor did to a shard since its last write (upkeep.py).
Upkeep = Literal["flush", "vacuum"]
RECORDS_FILE = "namespaces.sqlite3"


class EdgeStore:
    """The state of one embedded store, shared by the backend's parts."""

    def __init__(
        self,
        root: Path,
        dimension: int,
        workers: int,
        headroom_bytes: int,
        durability: Durability = "sync",
        partitions: int = 1,
        token_dimension: int | None = None,
    ) -> None:
        self.root = root
        self.calls = EngineCalls(workers)
        synced = durability == "sync"
        self.records = RecordStore(root / RECORDS_FILE, synced=synced)
        self.disk = DiskGuard(root, headroom_bytes)
        self.shards = ShardSet(root, dimension, self.disk, partitions, token_dimension)
        self.log_sync = LogSync(self.records)
        self.commit = GroupCommit(self._sync, enabled=synced)
        self.changes = 0  # points replaced or deleted since the last vacuum
        # By id() of the shard: when it was first written since its last flush, and
        # since its last vacuum (on `calls.clock`).
        self._unsettled: dict[Upkeep, dict[int, float]] = {"flush": {}, "vacuum": {}}
        # By id() of the shard: its writes since it was opened (a reopen is due after many).
        self._writes: dict[int, int] = {}
        # Each shard's wordpieces' IDF as searches asked it, until its next write.
        self.idf = WordpieceIdf(self.generation)
        # By id() of the shard: every write it was ever given here, never reset (`generation`).
        self._generations: dict[int, int] = {}
        # Incarnations holding fewer memories than counted: searches answer 503, not a
        # partial list; writes go on, so that an import can restore them (integrity.py).
        self.short: frozenset[str] = frozenset()

    def update(self, shard: Any, operation: Any) -> None:
        self.disk.admit()
        self.log_sync.mark(self.shards.path_of(shard))  # before: a sync under way takes it
        try:
            shard.update(operation)
        finally:  # a failed write may have written part: settle it as well
            self.changes += 1
            self._writes[id(shard)] = self._writes.get(id(shard), 0) + 1
            self._generations[id(shard)] = self._generations.get(id(shard), 0) + 1
            now = self.calls.clock()
            for shards in self._unsettled.values():
                shards.setdefault(id(shard), now)

    async def _sync(self) -> None:
        pending = self.log_sync.take()
        if pending.shards or pending.counts:
            try:
                with self.commit.watch.timed():
                    await self.calls.syncing(self.log_sync.write, pending)
            except BaseException:
                self.log_sync.give_back(pending)  # the next sync tries it again
                raise

    def written_at(self, index: int, *, since: Upkeep) -> float | None:
        """When shard `index` was first written since its last `since`; None: not since."""
        shard = self.shards.shards[index]
        return None if shard is None else self._unsettled[since].get(id(shard))

    def settled(self, index: int, *, since: Upkeep) -> None:
        shard = self.shards.shards[index]
        if shard is not None:
            self._unsettled[since].pop(id(shard), None)

    def generation(self, shard: Any) -> int:
        """How many writes `shard` has been given: what it answers changes only with it."""
        return self._generations.get(id(shard), 0)

    def writes_since_open(self, index: int) -> int:
        shard = self.shards.shards[index]
        return 0 if shard is None else self._writes.get(id(shard), 0)

    def reopen(self, index: int) -> bool:
        """Load shard `index` again from its files (upkeep.py); whether it was.

        The reopen flushes it, and a vacuum still due stays due. Whatever the outcome,
        its writes count from zero again: a reopen that failed is not retried at once."""
        old = self.shards.shards[index]
        if old is None:
            return False
        vacuum_due = self._unsettled["vacuum"].get(id(old))
        self._writes.pop(id(old), None)  # tried: not again before as many writes more
        new = self.shards.reopen(index)
        if self.shards.shards[index] is old:  # left as it was (no room to map it again)
            return False
        for shards in self._unsettled.values():
            shards.pop(id(old), None)
        if new is None:  # damaged on loading again (logged, and served as at start)
            return False
        if vacuum_due is not None:
            self._unsettled["vacuum"][id(new)] = vacuum_due
        return True

    def guarded(self, func: Callable[..., T], *args: Any) -> T:
        """`func(*args)` once the disk guard allows a write."""
        self.disk.admit()
        return func(*args)

    async def purge(self, name: str, epoch: str) -> None:
        """Remove an incarnation's memories from disk, then forget the purge (two steps).

        The purge is forgotten only once the delete is synced, whatever the durability:
        a delete lost to a power cut with its purge forgotten would bring the namespace
        back, rebuilt from its memories (integrity.py). By name and epoch together: an
        epoch alone, copied into another namespace's damaged record, would purge that
        namespace too."""
        await self.calls.worker(self.delete_incarnation, name, epoch)
        await self.commit.durable(always=True)
        await self.calls.worker(self.records.purged, epoch)

    def live_epoch(self, name: str) -> str:
        """The incarnation a write to `name` goes to; `NamespaceGone` when there is none."""
        live = self.records.live.get(name)
        if live is None:
            raise NamespaceGone(f"namespace {name} not found")
        return live.epoch

    async def confirm_live(self, name: str, epoch: str) -> None:
        """Raise `NamespaceGone` if `name` is no longer the incarnation `epoch` after a write.

        The namespace was deleted (maybe re-created) while the write ran, and its purge may
        already have run: the write belongs to a dead incarnation. Purge again rather than
        leave an orphan no read can see."""
        current = self.records.live.get(name)
        if current is None or current.epoch != epoch:
            await self.purge(name, epoch)
            raise NamespaceGone(f"namespace {name} was deleted during the write")

    async def barrier(self) -> None:
        """Sync the log of every open shard, whatever the durability: before a store-wide
        fact that says the shards' writes are done (edge_writes.py, `write_store_meta`)."""
        for shard in self.shards.open_shards():
            self.log_sync.mark(self.shards.path_of(shard))
        await self.commit.durable(always=True)

    def delete_incarnation(self, name: str, epoch: str) -> None:
        where = filters.incarnation(EDGE, name, epoch)
        self.update(self.shards.of(name), qe.UpdateOperation.delete_points_by_filter(where))

    def counted_upsert(self, points: list[tuple[Any, str, str]]) -> None:
        """Upsert (one call per shard), then count the memories new to their incarnation:
        a count goes up only once the engine has them (record_store.py)."""
        by_shard: dict[int, list[tuple[Any, str, str]]] = {}
        for item in points:
            by_shard.setdefault(self.shards.index_of(item[1]), []).append(item)
        for items in by_shard.values():
            shard = self.shards.of(items[0][1])
            ids = list(dict.fromkeys(str(point.id) for point, _, _ in items))
            held = {
                str(found.id): found.payload.get(FIELD_EPOCH)
                for found in shard.retrieve(ids, with_payload=[FIELD_EPOCH], with_vector=False)
            }
            new = {str(p.id): epoch for p, _, epoch in items if held.get(str(p.id)) != epoch}
            self.update(shard, qe.UpdateOperation.upsert_points([p for p, _, _ in items]))
            self.records.count_store.add(Counter(new.values()))


def memory_point(memory: MemoryRecord, epoch: str, vectors: Any) -> tuple[Any, str, str]:
    """`memory` as `counted_upsert` takes it: its point in incarnation `epoch` with
    `vectors` (engine.py, `point_vectors`), its namespace and that epoch."""
    payload = memory_to_payload(memory, epoch)
    point = qe.Point(point_id(memory.namespace, memory.id), vectors, payload)
    return point, memory.namespace, epoch


class EngineCalls:
    """A small thread pool, and the rule for when to skip it."""

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._executor: ThreadPoolExecutor | None = None
        self._syncer: ThreadPoolExecutor | None = None
        self._in_workers = 0  # calls submitted to the pool and not yet returned
        self._in_flight = 0  # calls not marked background, running or queued
        self.clock: Callable[[], float] = time.monotonic
        self._last_active = self.clock()

    @property
    def started(self) -> bool:
        return self._executor is not None

    def start(self) -> None:
        self._executor = ThreadPoolExecutor(self._workers, thread_name_prefix="qdrant-edge")
        self._syncer = ThreadPoolExecutor(1, thread_name_prefix="qdrant-edge-sync")

    def stop(self) -> None:
        for executor in (self._executor, self._syncer):
            if executor is not None:
                executor.shutdown(wait=True)
        self._executor = self._syncer = None

    def idle_for(self) -> float:
        """Seconds since the last call not marked background ended (0 while one runs)."""
        return 0.0 if self._in_flight else max(0.0, self.clock() - self._last_active)

    def alone(self) -> bool:
        """No call in flight, on a thread or on the loop."""
        return not self._in_workers and not self._in_flight

    async def worker(self, func: Callable[..., T], *args: Any, background: bool = False) -> T:
        """`func(*args)` on a worker thread; `background`: the janitor's, not a request's."""
        if self._executor is None:
            raise BackendUnavailable("embedded store is not open")
        loop = asyncio.get_running_loop()
        self._in_workers += 1
        self._in_flight += not background
        try:
            return await loop.run_in_executor(self._executor, partial(func, *args))
        except BaseException as error:  # a Rust panic is a BaseException
            _raise_translated(error)
        finally:
            self._in_workers -= 1
            if not background:
                self._in_flight -= 1
                self._last_active = self.clock()

    async def syncing(self, func: Callable[..., T], *args: Any) -> T:
        """`func(*args)` on the sync thread; a request's work (it counts as in flight)."""
        if self._syncer is None:
            raise BackendUnavailable("embedded store is not open")
        self._in_flight += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._syncer, partial(func, *args)
            )
        except BaseException as error:
            _raise_translated(error)
        finally:
            self._in_flight -= 1
            self._last_active = self.clock()

    async def here(self, func: Callable[..., T], *args: Any) -> T:
        """`func(*args)` on the event loop when no thread's call is in flight, else `worker`."""
        if self._executor is None:
            raise BackendUnavailable("embedded store is not open")
        if self._in_workers:
            return await self.worker(func, *args)
        self._in_flight += 1
        try:
            return func(*args)
        except BaseException as error:
            _raise_translated(error)
        finally:
            self._in_flight -= 1
            self._last_active = self.clock()


def _raise_translated(error: BaseException) -> NoReturn:
    """Raise what callers expect for a failed call; a fatal error (cancellation) as is."""
    translated = error if fatal(error) else translate(error)
    if translated is error:
        raise error
    raise translated from error
