"""`VectorBackend` on a Qdrant server in the shared (multitenant) layout.

Every memory lives in `<prefix>memories`, keyed by its namespace, as Qdrant advises for many
tenants; records and purges in `<prefix>namespaces`. See docs/backends.md, "Qdrant server".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from functools import cached_property
from typing import Unpack

from qdrant_client.http import models

from adapters.base import AnsweredBy
from adapters.errors import BackendError
from adapters.qdrant import filters
from adapters.qdrant import layout
from adapters.qdrant.server import token_vectors
from adapters.qdrant.server.client_requests import DENSE
from adapters.qdrant.server.client_requests import DIALECT
from adapters.qdrant.server.client_requests import Query
from adapters.qdrant.server.client_requests import side_requests
from adapters.qdrant.server.connection_owner import ServerOptions
from adapters.qdrant.server.connection_owner import start_step
from adapters.qdrant.server.server_layouts import QdrantServerLayout
from adapters.qdrant.server.server_layouts import Sides
from adapters.qdrant.server.tenant_collections import TenantCollections
from adapters.qdrant.server.tenant_collections import owner
from adapters.qdrant.server.tenant_collections import stored_vector
from adapters.qdrant.server.tenant_namespaces import TenantNamespaces
from adapters.qdrant.server.tenant_namespaces import TenantStoreMeta
from adapters.qdrant.server.tenant_namespaces import epoch_of
from adapters.qdrant.server.tenant_namespaces import purge_id
from adapters.qdrant.server.tenant_parts import TenantTransfer
from adapters.qdrant.server.vector_fill import ServerVectorFill
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import SearchQuery
from adapters.values import StoredMemory

log = logging.getLogger(__name__)


class QdrantServerBackend(QdrantServerLayout):
    """Memories of every namespace in one Qdrant collection, partitioned by tenant."""

    name = "qdrant"

    def __init__(self, dimension: int, **options: Unpack[ServerOptions]) -> None:
        super().__init__(dimension, **options)
        self._collections = TenantCollections(self._server)
        self._memories = self._collections.memories
        self.records = TenantNamespaces(self._collections)  # the namespace calls' part

    # -- the optional parts (adapters/parts.py) --------------------------------------

    @cached_property
    def store_meta(self) -> TenantStoreMeta:
        """Points of their own in the records collection (tenant_namespaces.py)."""
        return TenantStoreMeta(self.records)

    @cached_property
    def transfer(self) -> TenantTransfer:
        return TenantTransfer(self._collections, self.records)

    @cached_property
    def vector_fill(self) -> ServerVectorFill:
        collections = self._collections
        return ServerVectorFill(collections.call, collections.listed, collections.token_dimension)

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
        await self._ready()
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

    # -- memories --------------------------------------------------------------------

    async def get_stored_memory(self, namespace: str, memory_id: str) -> StoredMemory | None:
        point = await self._visible_point(namespace, memory_id)
        if point is None:
            return None
        return layout.memory_from_shared(point.payload or {}), stored_vector(point)

    async def delete_memory(self, namespace: str, memory_id: str) -> bool:
        point = await self._visible_point(namespace, memory_id)
        if point is None:
            return False
        selector = models.PointIdsList(points=[point.id])
        await self._collections.call(lambda c: c.delete(self._memories, selector, wait=True))
        return True

    async def delete_expired_memories(self, now: datetime) -> int:
        expired = filters.expired(DIALECT, now)
        found = await self._collections.call(lambda c: c.count(self._memories, expired, exact=True))
        if found.count == 0:
            return 0
        selector = models.FilterSelector(filter=expired)
        await self._collections.call(lambda c: c.delete(self._memories, selector, wait=True))
        return found.count

    # -- internals -------------------------------------------------------------------

    async def _ready(self) -> None:
        await self._collections.ready()

    async def _purge(self, epochs: list[str], purge_ids: list[models.ExtendedPointId]) -> None:
        """Delete the memories of dead incarnations, then their purge points."""
        dead = models.FilterSelector(filter=filters.incarnations(DIALECT, epochs))
        await self._collections.call(lambda c: c.delete(self._memories, dead, wait=True))
        await self.records.forget(purge_ids)

    async def _visible_point(self, namespace: str, memory_id: str) -> models.Record | None:
        """The memory's point if it belongs to the namespace's current incarnation."""
        ids: list[models.ExtendedPointId] = [layout.point_id(namespace, memory_id)]
        live, points = await asyncio.gather(
            self.records.live([namespace]),
            self._collections.call(lambda c: c.retrieve(self._memories, ids, with_vectors=[DENSE])),
        )
        current = (namespace, epoch_of(live, namespace))
        found = [p for p in points if owner(p) == current]
        return found[0] if found else None

    def _memory(self, namespace: str, point: models.ScoredPoint) -> MemoryRecord:
        return layout.memory_from_shared(point.payload or {})  # the payload names its namespace

    async def _sides(
        self, namespaces: Sequence[str], memory_filter: MemoryFilter, limit: int, query: Query
    ) -> Sides:
        """One query_batch_points request over the live `namespaces`."""
        live = await self.records.live(namespaces)
        if not live or limit <= 0:
            return []
        scope = layout.Scope(tuple(live), tuple(epoch for _, epoch in live.values()))
        mass = None
        if isinstance(query, SearchQuery):
            call, memories = self._collections.call, self._memories
            query, mass = await token_vectors.weighed_query(call, memories, query)
        requests = side_requests(memory_filter, limit, query, scope, mass)
        responses = await self._collections.call(
            lambda c: c.query_batch_points(self._memories, requests)
        )
        return [("", response.points) for response in responses]
