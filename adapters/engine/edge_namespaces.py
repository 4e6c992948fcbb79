"""Namespaces of the embedded store: their records, and the purge of a deleted one's memories.

A part of `QdrantEdgeBackend` (edge_backend.py); `LostRecords`: names whose records are lost while
their shard cannot open (docs/repair.md, "Records lost and a shard does not open").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from collections.abc import Sequence
from datetime import datetime

from adapters.engine.integrity import some
from adapters.engine.record_store import RecordStore
from adapters.engine.shards import ShardSet
from adapters.engine.store import EdgeStore
from adapters.errors import BackendError
from adapters.errors import StorageDamaged
from adapters.values import NamespaceRecord

log = logging.getLogger(__name__)


def unreadable(name: str) -> StorageDamaged:
    return StorageDamaged(
        f"namespace {name} is unreadable in the embedded store; an operator can repair"
        " or drop it (docs/repair.md#unreadable-namespace)",
        (name,),
    )


class EdgeNamespaces:
    """The namespace half of `VectorBackend`, and the purges a delete leaves behind."""

    def __init__(self, store: EdgeStore) -> None:
        self._store = store
        self.lost = LostRecords(store.records, store.shards)
        self._purging: set[asyncio.Task[None]] = set()

    async def drain(self) -> None:
        """Wait for the purges under way (at close)."""
        await asyncio.gather(*self._purging, return_exceptions=True)

    async def purge_pending(self) -> None:
        """Finish the purges a crash interrupted, except in shards that do not serve."""
        store = self._store
        for epoch, name in list(store.records.purges.items()):
            if store.shards.index_of(name) not in store.shards.unopened():  # else once it serves
                await store.purge(name, epoch)

    async def get_namespace(self, name: str) -> NamespaceRecord | None:
        found = self._store.records.live.get(name)
        if found is None and name in self._store.records.damaged:
            raise unreadable(name)
        if found is None and self.lost.covers(name):
            raise self.lost.refusal(name)
        return None if found is None else found.record

    async def get_namespaces(self, names: Sequence[str]) -> Mapping[str, NamespaceRecord]:
        """Raises `StorageDamaged` when none is live and some are unreadable (a 503, not
        an empty answer that looks like a namespace without memories)."""
        live, lost = self._store.records.live, self.lost
        found = {name: live[name].record for name in names if name in live}
        unknown = [name for name in names if lost.covers(name)]
        refused = lost.refusal(*unknown) if unknown else None  # counted for health either way
        if not found and (damaged := [n for n in names if n in self._store.records.damaged]):
            raise unreadable(", ".join(damaged))
        if not found and refused is not None:
            raise refused
        return found

    async def save_namespace(self, record: NamespaceRecord) -> None:
        if record.name in self._store.records.damaged:
            raise unreadable(record.name)
        if self.lost.covers(record.name):
            raise self.lost.refusal(record.name)
        await self._store.calls.worker(self._save, record)

    def _save(self, record: NamespaceRecord) -> None:
        self._store.admit()
        self._store.shards.of(record.name)  # raises as its first write would: damaged, full
        self._store.records.save(record)

    async def delete_namespace(self, name: str) -> bool:
        """Also drops a namespace whose record is unreadable (its memories go too)."""
        store = self._store
        if self.lost.covers(name):  # not a 404: it may exist, in the shard that cannot say
            raise self.lost.refusal(name)
        epoch = await store.calls.worker(store.guarded, store.records.bury, name)
        if epoch is None:
            return False
        purge = store.purge(name, epoch)
        task = asyncio.create_task(purge, name=f"purge {epoch}")
        self._purging.add(task)
        task.add_done_callback(self._purged)
        return True

    def _purged(self, task: asyncio.Task[None]) -> None:
        self._purging.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("namespace purge deferred to the janitor: %s", task.exception())

    async def list_namespaces(self) -> list[NamespaceRecord]:
        return [found.record for found in self._store.records.live.values()]

    async def expired_namespaces(self, now: datetime) -> list[NamespaceRecord]:
        # In memory: microseconds per thousand namespaces, no I/O.
        live = self._store.records.live
        return [f.record for f in live.values() if f.record.is_expired(now)]


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
