"""What the parts of the embedded backend share: its shards, records, disk guard and threads.

The parts (edge_namespaces.py, edge_reads.py, edge_writes.py) are handed one `EdgeStore`; every
write to a shard goes through `update`: the disk guard, upkeep and the group commit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any
from typing import TypeVar

import qdrant_edge as qe

from adapters.disk import DiskGuard
from adapters.engine.call_threads import EngineCalls
from adapters.engine.engine import EDGE
from adapters.engine.log_sync import GroupCommit
from adapters.engine.log_sync import LogSync
from adapters.engine.record_store import RecordStore
from adapters.engine.search_passes import WordpieceIdf
from adapters.engine.shard_writes import ShardWrites
from adapters.engine.shards import ShardSet
from adapters.errors import NamespaceGone
from adapters.keyword_encoder import KeywordEncoder
from adapters.qdrant import filters
from adapters.qdrant.layout import FIELD_EPOCH
from adapters.qdrant.layout import memory_to_payload
from adapters.qdrant.layout import point_id
from adapters.store_files import RECORDS_FILE
from adapters.values import Durability
from adapters.values import MemoryRecord

T = TypeVar("T")
# A sync that has waited longer than this share of the writes' deadline means the disk has
# stalled: a write let in then could not be answered in time, and might stop the engine.
STALLED_SHARE = 1 / 3


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
        write_deadline_s: float = 1.5,
    ) -> None:
        self.root = root
        self.calls = EngineCalls(workers)
        synced = durability == "sync"
        self.records = RecordStore(root / RECORDS_FILE, synced=synced)
        self.disk = DiskGuard(root, headroom_bytes)
        self.shards = ShardSet(root, dimension, self.disk, partitions, token_dimension)
        self.log_sync = LogSync(self.records)
        self.commit = GroupCommit(
            self._sync,
            enabled=synced,
            stalled_after_s=write_deadline_s * STALLED_SHARE,
            gate=self.admit,
        )
        # What upkeep keeps of each shard's writes (upkeep.py), on `calls.clock`.
        self.writes = ShardWrites(lambda: self.calls.clock())
        # Each shard's wordpieces' IDF as searches asked it, until its next write.
        self.idf = WordpieceIdf(self.writes.generation)
        self.keywords = KeywordEncoder()  # where the server asks the store to make them
        # Incarnations holding fewer memories than counted: searches answer 503, not a
        # partial list; writes go on, so that an import can restore them (integrity.py).
        self.short: frozenset[str] = frozenset()

    def admit(self) -> None:
        """The write gate: raise unless a write may go to the disk now: room on the volume
        (the disk guard), and the disk answering its syncs (`SyncWatch.admit`). Asked before
        a write queues, while it waits for a sync, and at each engine update."""
        self.disk.admit()
        self.commit.watch.admit()

    def writing(self) -> AbstractAsyncContextManager[None]:
        """Around a write to the engine: between syncs (`GroupCommit.writing`)."""
        return self.commit.writing()

    def update(self, shard: Any, operation: Any) -> None:
        self.admit()
        self.log_sync.mark(self.shards.path_of(shard))  # before: a sync under way takes it
        try:
            shard.update(operation)
        finally:  # a failed write may have written part: settle it as well
            self.writes.wrote(shard)

    async def _sync(self) -> None:
        pending = self.log_sync.take()
        if pending.shards or pending.counts:
            try:
                with self.commit.watch.timed():
                    await self.calls.syncing(self.log_sync.write_logs, pending)
            except BaseException:
                self.log_sync.give_back(pending)  # the next sync tries it again
                raise
            if pending.counts:  # on the sync thread, once the writes are answered
                self.calls.behind_sync(self.log_sync.write_counts, pending.counts)

    def guarded(self, func: Callable[..., T], *args: Any) -> T:
        """`func(*args)` once a write may go to the disk (`admit`)."""
        self.admit()
        return func(*args)

    async def purge(self, name: str, epoch: str) -> None:
        """Remove an incarnation's memories from disk, then, once the delete is synced whatever
        the durability, forget the purge: a delete lost to a power cut with its purge forgotten
        would bring the namespace back, rebuilt from its memories (integrity.py). By name and
        epoch: an epoch copied into another namespace's damaged record would purge that too."""
        async with self.writing():
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
        """Raise `NamespaceGone` if `name` is no longer the incarnation `epoch` after a write:
        deleted (maybe re-created) while the write ran, its purge maybe done. Purge again rather
        than leave an orphan no read can see."""
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
        for shard, items in self.shards.grouped(points, lambda point: point[1]):
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
