"""`VectorBackend` on a Qdrant server in the shared (multitenant) layout.

Every memory lives in `<prefix>memories`, keyed by its namespace, as Qdrant advises for many
tenants; records and purges in `<prefix>namespaces`. See docs/backends.md, "Qdrant server".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Sequence
from functools import cached_property
from typing import TypeVar

from qdrant_client import AsyncQdrantClient
from qdrant_client.http import models

from adapters.base import AnsweredBy
from adapters.errors import BackendError
from adapters.errors import NamespaceGone
from adapters.qdrant import filters
from adapters.qdrant import layout
from adapters.qdrant.server.client_requests import DENSE
from adapters.qdrant.server.client_requests import DIALECT
from adapters.qdrant.server.client_requests import Query
from adapters.qdrant.server.keyword_vectors import PointVectors
from adapters.qdrant.server.server_layouts import QdrantServerLayout
from adapters.qdrant.server.server_layouts import Sides
from adapters.qdrant.server.server_layouts import start_step
from adapters.qdrant.server.tenant_collections import TenantCollections
from adapters.qdrant.server.tenant_collections import owner
from adapters.qdrant.server.tenant_namespaces import TenantNamespaces
from adapters.qdrant.server.tenant_namespaces import TenantStoreMeta
from adapters.qdrant.server.tenant_namespaces import epoch_of
from adapters.qdrant.server.tenant_namespaces import purge_id
from adapters.qdrant.server.vector_fill import ServerVectorFill
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord

log = logging.getLogger(__name__)
T = TypeVar("T")


class QdrantServerBackend(QdrantServerLayout):
    """Memories of every namespace in one Qdrant collection, partitioned by tenant; a point's
    payload names its namespace and incarnation (epoch), and only the current one is read."""

    name = "qdrant"

    @cached_property
    def _collections(self) -> TenantCollections:
        return TenantCollections(self)

    @cached_property
    def records(self) -> TenantNamespaces:
        """The namespace calls' part (tenant_namespaces.py)."""
        return TenantNamespaces(self._collections)

    @property
    def _memories(self) -> str:
        return self._collections.memories

    # -- the optional parts (adapters/parts.py) --------------------------------------

    @cached_property
    def store_meta(self) -> TenantStoreMeta:
        """Points of their own in the records collection (tenant_namespaces.py)."""
        return TenantStoreMeta(self.records)

    @cached_property
    def vector_fill(self) -> ServerVectorFill:
        return ServerVectorFill(self._call, self._listed, self.token_dimension)

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Contact Qdrant if it answers; only a store it cannot serve fails the boot."""
        await start_step(self.prepare, log, "qdrant not ready at start, retrying on first use: %s")

    async def prepare(self, *, allow_namespace_collections: bool = False) -> None:
        """Create or check both collections, once per process. The migration allows
        collections of the per-namespace layout meanwhile; everyone else refuses them."""
        await self._collections.prepare(allow_namespace_collections=allow_namespace_collections)

    async def maintain(self) -> None:
        """Finish namespace deletes whose memories were not purged (a crash, an outage)."""
        async for dead in self.records.dead():
            if dead:
                await self._purge(list(dead.values()), list(dead))

    async def ping(self) -> None:
        await self._collections.ready()
        await self.connection.ping()

    # -- namespaces (their records: tenant_namespaces.py) ----------------------------

    get_namespace = AnsweredBy("records")
    get_namespaces = AnsweredBy("records")
    save_namespace = AnsweredBy("records")
    list_namespaces = AnsweredBy("records")
    expired_namespaces = AnsweredBy("records")

    async def delete_namespace(self, name: str) -> bool:
        epoch = await self.records.bury(name)
        if epoch is None:
            return False
        try:
            await self._purge([epoch], [purge_id(epoch)])
        except BackendError as exc:  # the namespace is gone already; maintain() finishes
            log.warning("namespace %s deleted, its memories are purged later: %s", name, exc)
        return True

    async def _purge(self, epochs: list[str], purge_ids: list[models.ExtendedPointId]) -> None:
        """Delete the memories of dead incarnations, then their purge points."""
        dead = models.FilterSelector(filter=filters.incarnations(DIALECT, epochs))
        await self._call(lambda c: c.delete(self._memories, dead, wait=True))
        await self.records.forget(purge_ids)

    # -- the layout (server_layouts.py) ----------------------------------------------

    async def _call(self, op: Callable[[AsyncQdrantClient], Awaitable[T]]) -> T:
        return await self._collections.call(op)

    def _collection(self, namespace: str) -> str:
        return self._memories

    def _point_id(self, namespace: str, memory_id: str) -> str:
        return layout.point_id(namespace, memory_id)

    async def _listed(self) -> list[str]:
        return [self._memories]

    async def _live_place(self, namespace: str) -> tuple[str, layout.Scope] | None:
        epoch = epoch_of(await self.records.live([namespace]), namespace)
        return None if epoch is None else (self._memories, layout.Scope((namespace,), (epoch,)))

    def _memory(self, namespace: str, point: models.Record | models.ScoredPoint) -> MemoryRecord:
        return layout.memory_from_shared(point.payload or {})  # the payload names its namespace

    async def _point(self, namespace: str, memory_id: str) -> models.Record | None:
        """The memory's point if it belongs to the namespace's current incarnation."""
        ids: list[models.ExtendedPointId] = [layout.point_id(namespace, memory_id)]
        live, points = await asyncio.gather(
            self.records.live([namespace]),
            self._call(lambda c: c.retrieve(self._memories, ids, with_vectors=[DENSE])),
        )
        current = (namespace, epoch_of(live, namespace))
        found = [p for p in points if owner(p) == current]
        return found[0] if found else None

    async def _sides(
        self, namespaces: Sequence[str], memory_filter: MemoryFilter, limit: int, query: Query
    ) -> Sides:
        """One query_batch_points request over the live `namespaces`."""
        live = await self.records.live(namespaces)
        if not live or limit <= 0:
            return []
        scope = layout.Scope(tuple(live), tuple(epoch for _, epoch in live.values()))
        sides = await self._asked(self._memories, memory_filter, limit, query, scope)
        return [("", side) for side in sides]

    async def _write_points(self, points: Sequence[tuple[MemoryRecord, PointVectors]]) -> int:
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
            writes = list(written.values())
            await self._call(lambda c: c.upsert(self._memories, writes, wait=True))
        return len(written)
