"""How big the embedded store is, for the metrics (adapters/parts.py, `StoreSizes`).

Namespaces and memories come from the records and the counts the store keeps
anyway (namespace_records.py), so the figure costs no engine call; bytes are
what the store's files occupy and what the volume has left. Measured on a worker
thread: a walk of the store's few hundred files.
"""

from __future__ import annotations

import os

from adapters.qdrant.edge.disk import allocated_bytes
from adapters.qdrant.edge.store import EdgeStore
from adapters.values import StoreSize


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
