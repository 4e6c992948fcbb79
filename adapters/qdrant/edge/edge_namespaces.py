"""Namespaces of the embedded store: their records, and the purge of a deleted one's memories.

A part of `QdrantEdgeBackend` (edge_backend.py), beside its reads (edge_reads.py) and
writes (edge_writes.py), over the shared `EdgeStore` (store.py). Each namespace incarnation
has an epoch, carried by its memories and required by every read, so a deleted
namespace vanishes with its memories the moment its record is buried, and one
re-created under the same name starts empty. The memories are then removed by a
filtered delete in the background; the janitor (`purge_pending`) finishes any
purge a crash interrupted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from collections.abc import Sequence
from datetime import datetime

from adapters.errors import StorageDamaged
from adapters.qdrant.edge.store import EdgeStore
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
        self._purging: set[asyncio.Task[None]] = set()

    async def drain(self) -> None:
        """Wait for the purges under way (at close)."""
        await asyncio.gather(*self._purging, return_exceptions=True)

    async def purge_pending(self) -> None:
        """Finish the purges a crash interrupted, except in shards that do not serve."""
        store = self._store
        for epoch, name in list(store.records.purges.items()):
            index = store.shards.index_of(name)
            if index in store.shards.damaged or index in store.shards.waiting_for_room:
                continue  # purged once its shard serves again; the rest goes on
            await store.purge(name, epoch)

    async def get_namespace(self, name: str) -> NamespaceRecord | None:
        found = self._store.records.live.get(name)
        if found is None and name in self._store.records.damaged:
            raise unreadable(name)
        if found is None and self._store.lost.covers(name):
            raise self._store.lost.refusal(name)
        return None if found is None else found.record

    async def get_namespaces(self, names: Sequence[str]) -> Mapping[str, NamespaceRecord]:
        """Raises `StorageDamaged` when none is live and some are unreadable (a 503, not
        an empty answer that looks like a namespace without memories)."""
        live, lost = self._store.records.live, self._store.lost
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
        if self._store.lost.covers(record.name):
            raise self._store.lost.refusal(record.name)
        await self._store.calls.worker(self._save, record)

    def _save(self, record: NamespaceRecord) -> None:
        self._store.disk.check()
        self._store.shards.of(record.name)  # raises as its first write would: damaged, full
        self._store.records.save(record)

    async def delete_namespace(self, name: str) -> bool:
        """Also drops a namespace whose record is unreadable (its memories go too)."""
        store = self._store
        if store.lost.covers(name):  # not a 404: it may exist, in the shard that cannot say
            raise store.lost.refusal(name)
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
