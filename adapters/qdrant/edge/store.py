"""What the parts of the embedded backend share: its shards, records, disk guard and threads.

`QdrantEdgeBackend` (edge_backend.py) is a facade over parts that each hold one concern
(edge_reads.py, edge_writes.py, missing_vectors.py, edge_namespaces.py); they are handed one
`EdgeStore` rather than reaching into the backend. Every write to a shard goes through
`update`: behind the disk guard, counted for the janitor's vacuum and marked for the group
commit (log_sync.py); under `sync` durability a write path awaits `commit.durable()` to answer.

`LostRecords`: namespaces whose record was lost while their shard could not be opened, so it
cannot say which names it holds. Until it opens, a name hashing to it with no record answers
503 and health is `degraded` (not 404, nor served empty); once it opens, the records of what it
holds are rebuilt. See docs/repair.md, "Records lost and a shard does not open".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from typing import Literal
from typing import TypeVar

import qdrant_edge as qe

from adapters.errors import BackendError
from adapters.errors import StorageDamaged
from adapters.qdrant import filters
from adapters.qdrant.edge.disk import DiskGuard
from adapters.qdrant.edge.engine import EDGE
from adapters.qdrant.edge.engine_calls import EngineCalls
from adapters.qdrant.edge.integrity import some
from adapters.qdrant.edge.log_sync import GroupCommit
from adapters.qdrant.edge.log_sync import LogSync
from adapters.qdrant.edge.record_store import RecordStore
from adapters.qdrant.edge.shards import ShardSet
from adapters.values import Durability

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
    ) -> None:
        self.root = root
        self.calls = EngineCalls(workers)
        synced = durability == "sync"
        self.records = RecordStore(root / RECORDS_FILE, synced=synced)
        self.disk = DiskGuard(root, headroom_bytes)
        self.shards = ShardSet(root, dimension, self.disk, partitions)
        self.log_sync = LogSync(self.records)
        self.commit = GroupCommit(self._sync, enabled=synced)
        self.lost = LostRecords(self.records, self.shards)
        self.changes = 0  # points replaced or deleted since the last vacuum
        # By id() of the shard: when it was first written since its last flush, and
        # since its last vacuum (on `calls.clock`).
        self._unsettled: dict[Upkeep, dict[int, float]] = {"flush": {}, "vacuum": {}}
        # By id() of the shard: its writes since it was opened (a reopen is due after many).
        self._writes: dict[int, int] = {}
        # Incarnations holding fewer memories than counted: searches answer 503, not a
        # partial list; writes go on, so that an import can restore them (integrity.py).
        self.short: frozenset[str] = frozenset()

    def update(self, shard: Any, operation: Any) -> None:
        self.disk.check()
        self.log_sync.mark(self.shards.path_of(shard))  # before: a sync under way takes it
        try:
            shard.update(operation)
        finally:  # a failed write may have written part: settle it as well
            self.changes += 1
            self._writes[id(shard)] = self._writes.get(id(shard), 0) + 1
            now = self.calls.clock()
            for shards in self._unsettled.values():
                shards.setdefault(id(shard), now)

    async def _sync(self) -> None:
        pending = self.log_sync.take()
        if pending.shards or pending.counts:
            try:
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
        self.disk.check()
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

    async def barrier(self) -> None:
        """Sync the log of every open shard, whatever the durability: before a store-wide
        fact that says the shards' writes are done (edge_writes.py, `write_store_meta`)."""
        for shard in self.shards.open_shards():
            self.log_sync.mark(self.shards.path_of(shard))
        await self.commit.durable(always=True)

    def delete_incarnation(self, name: str, epoch: str) -> None:
        where = filters.incarnation(EDGE, name, epoch)
        self.update(self.shards.of(name), qe.UpdateOperation.delete_points_by_filter(where))


REPAIR = "docs/repair.md#records-lost-and-a-shard-does-not-open"


class LostRecords:
    """Which shards' namespaces are unknown, and the answer for a name in one of them."""

    def __init__(self, records: RecordStore, shards: ShardSet) -> None:
        self._records = records
        self._shards = shards
        self.asked: set[str] = set()  # names refused so far, for health's count

    def settle(self) -> None:
        """At start, once the shards opened and the open ones' records were rebuilt."""
        lost = set(self._records.lost_shards)
        if self._records.started_empty:
            lost |= self._shards.unopened()
        # Open now (their records rebuilt), or moved aside by an operator: known again.
        self._records.set_lost_shards(lost & self._shards.unopened())

    def opened(self, indexes: list[int]) -> None:
        """These shards serve again (their records rebuilt): their names are known."""
        self._records.set_lost_shards(self._records.lost_shards - set(indexes))

    def covers(self, name: str) -> bool:
        """`name` has no record, and its shard cannot say whether it exists."""
        records = self._records
        if not records.lost_shards or name in records.live or name in records.damaged:
            return False
        return self._shards.index_of(name) in records.lost_shards

    def refusal(self, *names: str) -> BackendError:
        """What a request for `names` gets while they are `covers`ed: a 503 naming them."""
        self.asked.update(names)
        waiting = self._shards.waiting_for_room.get(self._shards.index_of(names[0]))
        why = waiting or "its part of the embedded store could not be opened (damaged files)"
        return StorageDamaged(
            f"namespace {', '.join(names)} is unknown for now: its record was lost and {why};"
            f" see {REPAIR}",
            names,
        )

    def problems(self) -> tuple[str, ...]:
        """What health says while shards are unknown, and while rebuilt records are unconfirmed."""
        found = []
        if lost := sorted(self._records.lost_shards):
            shards = ", ".join(f"{i:02d}" for i in lost)
            found.append(
                f"namespace records lost while memory shard(s) {shards} could not be opened:"
                f" their namespaces answer 503 until the shard opens ({len(self.asked)} asked"
                f" for so far); see {REPAIR}"
            )
        if rebuilt := sorted(self._records.rebuilt):
            found.append(
                f"{len(rebuilt)} namespace record(s) rebuilt from their memories and not yet"
                f" confirmed (memories lost at the same time would not show): {some(rebuilt)};"
                " see docs/repair.md#lost-or-damaged-namespace-records"
            )
        return tuple(found)
