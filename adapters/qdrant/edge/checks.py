"""The embedded store's self-checks and its size, parts of `QdrantEdgeBackend` (edge_backend.py).

`EdgeChecks` keeps together, over the shared `EdgeStore`, what integrity.py finds (records
against the engine) and what `LostRecords` (store.py) knows (shards whose names are unknown):
the last report, which incarnations are short of memories (reads of them answer 503,
edge_reads.py), what health says, and the operator's `verify-store --accept`. All methods
block; the backend runs them on its worker threads.

`EdgeStoreSize`: how big the embedded store is, for the metrics (adapters/parts.py,
`StoreSizes`). Namespaces and memories come from the records and the counts the store keeps
anyway (record_store.py), so no engine call; bytes are what the store's files occupy and what
the volume has left, from a walk of the store's files on a worker thread.
"""

from __future__ import annotations

import os
import time

from adapters.qdrant.edge import integrity
from adapters.qdrant.edge.disk import allocated_bytes
from adapters.qdrant.edge.integrity import IntegrityReport, some
from adapters.qdrant.edge.store import EdgeStore
from adapters.values import StoreSize


class EdgeChecks:
    """The last integrity report and what follows from it."""

    def __init__(self, store: EdgeStore) -> None:
        self._store = store
        self.report = IntegrityReport()
        self.verified_at = float("-inf")

    def run(self, *, at_start: bool = False) -> IntegrityReport:
        store = self._store
        unreadable = self.report.unreadable
        self.report = integrity.check(store.shards, store.records, at_start=at_start)
        if not at_start:  # rebuilt at start and unreadable then: still, unless dropped since
            self.report.unreadable = [n for n in unreadable if n in store.records.live]
        store.short = frozenset(s.epoch for s in self.report.shortfalls)
        self.verified_at = time.monotonic()
        return self.report

    def opened_late(self, indexes: list[int]) -> None:
        """Shards a full volume kept closed opened: rebuild the records they hold."""
        store = self._store
        found = integrity.rebuild(store.shards, store.records, indexes)
        self.report.unreadable += found.unreadable
        store.lost.opened(indexes)
        self.run()  # and compare their namespaces' counts, left out at start

    def problems(self) -> tuple[str, ...]:
        return self.report.problems() + self._store.lost.problems()

    def unreadable(self) -> set[str]:
        """Names that answer 503 for want of data: unknown ones asked for, rebuilt unreadable."""
        store = self._store
        found = {name for name in store.lost.asked if store.lost.covers(name)}
        return found | {name for name in self.report.unreadable if name in store.records.live}

    def verify(self, unreadable: tuple[str, ...]) -> tuple[str, ...]:
        """verify-store's lines: a check now, with the names that answer 503 anyway."""
        self.run()
        found = (f"{len(unreadable)} namespace(s) unreadable: {some(unreadable)}",)
        return (found if unreadable else ()) + self.problems()

    def accept(self) -> list[str]:
        """An operator vouches for the store as it is (verify-store --accept): rebuilt
        records are confirmed, and short counts set to what the engine holds (after an
        import restored what it could, or to accept the loss). The names concerned."""
        self.run()
        records = self._store.records
        records.set_counts({s.epoch: s.found for s in self.report.shortfalls})
        names = records.accept_rebuilt() + [s.name for s in self.report.shortfalls]
        self.run()
        return sorted(set(names))


class EdgeStoreSize:
    """The `store_size` part of `QdrantEdgeBackend`."""

    def __init__(self, store: EdgeStore) -> None:
        self._store = store

    async def measure(self) -> StoreSize:
        return await self._store.calls.worker(self._measure, background=True)

    def _measure(self) -> StoreSize:
        namespaces, memories = self._store.records.sizes()
        root = self._store.root
        volume = os.statvfs(root)
        return StoreSize(
            namespaces, memories, allocated_bytes(root), volume.f_bavail * volume.f_frsize
        )
