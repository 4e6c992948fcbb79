"""The shared layout's transfer (adapters/parts.py `BulkTransfer`).

`QdrantServerBackend` (tenants.py) hands it out and writes single memories through it, on the one
memories collection, for a namespace's current incarnation only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from qdrant_client.http import models

from adapters.errors import NamespaceGone
from adapters.qdrant import filters
from adapters.qdrant import layout
from adapters.qdrant.server.client_requests import DIALECT
from adapters.qdrant.server.connection_owner import ServerTransfer
from adapters.qdrant.server.connection_owner import set_places
from adapters.qdrant.server.keyword_vectors import PointVectors
from adapters.qdrant.server.tenant_collections import TenantCollections
from adapters.qdrant.server.tenant_collections import stored_vector
from adapters.qdrant.server.tenant_namespaces import TenantNamespaces
from adapters.qdrant.server.tenant_namespaces import epoch_of
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import StoredMemory


@dataclass(frozen=True, slots=True)
class TenantTransfer(ServerTransfer):
    """`iter_memories` by scrolling a tenant partition; `upsert_memories` in one request."""

    collections: TenantCollections
    records: TenantNamespaces

    async def iter_memories(
        self, namespace: str, now: datetime, *, page_size: int = 256, with_vectors: bool = True
    ) -> AsyncIterator[list[StoredMemory]]:
        """Scroll the tenant partition of the namespace's current epoch, a page per request."""
        live = await self.records.live([namespace])
        epoch = epoch_of(live, namespace)
        if epoch is None:
            return
        scope = layout.Scope((namespace,), (epoch,))
        wanted = filters.memories(DIALECT, MemoryFilter(now=now), scope)
        collections = self.collections
        pages = collections.connection.pages(
            collections.memories,
            wanted,
            with_vectors=with_vectors,
            size=page_size,
            call=collections.call,
        )
        async for points in pages:
            found = [
                (
                    layout.memory_from_shared(p.payload or {}),
                    stored_vector(p) if with_vectors else [],
                )
                for p in points
            ]
            if found:
                yield found

    async def place_memories(self, namespace: str, places: Sequence[tuple[str, int]]) -> int:
        """One request: each point of the namespace (its id holds the name) given its place."""
        points = [(layout.point_id(namespace, memory_id), place) for memory_id, place in places]
        await set_places(self.collections.call, self.collections.memories, points)
        return len(places)

    async def write_points(self, points: Sequence[tuple[MemoryRecord, PointVectors]]) -> int:
        """Every memory of the current epochs in one request."""
        live = await self.records.live([memory.namespace for memory, _ in points])
        written: dict[str, models.PointStruct] = {}
        for memory, vectors in points:
            epoch = epoch_of(live, memory.namespace)
            if epoch is None:
                raise NamespaceGone(f"namespace {memory.namespace} not found")
            point_id = layout.point_id(memory.namespace, memory.id)
            payload = layout.memory_to_payload(memory, epoch)
            written[point_id] = models.PointStruct(id=point_id, vector=vectors, payload=payload)
        if written:
            writes, collection = list(written.values()), self.collections.memories
            await self.collections.call(lambda c: c.upsert(collection, writes, wait=True))
        return len(written)
