"""`VectorBackend` on a Qdrant server, one collection per namespace (`collections` layout).

For operators who want hard isolation and have few namespaces; the default is the shared layout
(tenants.py), into which `migrate-layout` copies this one. See docs/backends.md, "Qdrant server".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from functools import cached_property
from functools import partial
from typing import Unpack

from qdrant_client.http import models

from adapters.base import AnsweredBy
from adapters.errors import BackendError
from adapters.qdrant import filters
from adapters.qdrant.server import token_vectors
from adapters.qdrant.server.client_requests import DENSE
from adapters.qdrant.server.client_requests import DIALECT
from adapters.qdrant.server.client_requests import Query
from adapters.qdrant.server.client_requests import side_requests
from adapters.qdrant.server.connection import NO_VECTOR
from adapters.qdrant.server.connection_owner import ServerOptions
from adapters.qdrant.server.connection_owner import start_step
from adapters.qdrant.server.namespace_collections_records import CollectionNamespaces
from adapters.qdrant.server.namespace_collections_records import CollectionStoreMeta
from adapters.qdrant.server.namespace_collections_transfer import CollectionsTransfer
from adapters.qdrant.server.namespace_collections_transfer import memory_of
from adapters.qdrant.server.namespace_collections_transfer import point_id_of
from adapters.qdrant.server.namespace_collections_transfer import stored_of
from adapters.qdrant.server.server_layouts import QdrantServerLayout
from adapters.qdrant.server.server_layouts import Sides
from adapters.qdrant.server.vector_fill import ServerVectorFill
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import SearchQuery
from adapters.values import StoredMemory
from adapters.values import VectorKind

log = logging.getLogger(__name__)


class QdrantCollectionsBackend(QdrantServerLayout):
    """Memories in a Qdrant server (or qdrant-client local mode), one collection per namespace."""

    name = "qdrant-collections"

    def __init__(self, dimension: int, **options: Unpack[ServerOptions]) -> None:
        super().__init__(dimension, **options)
        # the namespace collections and their records: the namespace calls' part
        self.records = CollectionNamespaces(self._server)

    # -- the optional parts (adapters/parts.py) --------------------------------------

    @cached_property
    def store_meta(self) -> CollectionStoreMeta:
        return CollectionStoreMeta(self.records)

    @cached_property
    def vector_fill(self) -> ServerVectorFill:
        found = self.records
        return ServerVectorFill(found.call, found.namespace_collections, found.token_dimension)

    @cached_property
    def transfer(self) -> CollectionsTransfer:
        return CollectionsTransfer(self.records)

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Build the client; in rerank mode give older collections their token vectors
        (token_vectors.py). The plugin boots while Qdrant is down: only a store it
        cannot serve fails the boot."""
        self.connection.open()
        if not self.keep_tokens:
            return
        # Qdrant down: the fill prepares them again once Qdrant answers
        outage = "qdrant not ready at start, token vectors added later: %s"
        await start_step(partial(self.vector_fill.prepare, VectorKind.TOKENS), log, outage)

    async def ping(self) -> None:
        await self.connection.ping()

    # -- namespaces (namespace_collections_records.py) -------------------------------

    get_namespace = AnsweredBy("records")
    save_namespace = AnsweredBy("records")
    delete_namespace = AnsweredBy("records")
    list_namespaces = AnsweredBy("records")

    # -- memories --------------------------------------------------------------------

    async def _retrieve(self, namespace: str, memory_id: str) -> models.Record | None:
        point_id = point_id_of(memory_id)
        if point_id is None:
            return None
        collection = self.records.collection(namespace)
        none: list[models.Record] = []
        found = await self.records.read(
            lambda c: c.retrieve(collection, [point_id], with_vectors=[DENSE]), none
        )
        return found[0] if found else None

    async def get_memory(self, namespace: str, memory_id: str) -> MemoryRecord | None:
        point = await self._retrieve(namespace, memory_id)
        return None if point is None else memory_of(namespace, point)

    async def get_stored_memory(self, namespace: str, memory_id: str) -> StoredMemory | None:
        point = await self._retrieve(namespace, memory_id)
        return None if point is None else stored_of(namespace, point)

    def _memory(self, namespace: str, point: models.ScoredPoint) -> MemoryRecord:
        return memory_of(namespace, point)

    async def _asked(
        self,
        namespace: str,
        memory_filter: MemoryFilter,
        limit: int,
        query: Query,
    ) -> list[list[models.ScoredPoint]]:
        """Each pin side's best `limit` in one namespace: one query_batch_points request."""
        collection = self.records.collection(namespace)
        mass = None
        if isinstance(query, SearchQuery):
            query, mass = await token_vectors.weighed_query(self.records.call, collection, query)
        requests = side_requests(memory_filter, limit, query, mass=mass)
        none: list[models.QueryResponse] = []
        try:
            responses = await self.records.read(
                lambda c: c.query_batch_points(collection, requests), none
            )
        except BackendError as exc:
            if not isinstance(query, SearchQuery) or not query.tokens or NO_VECTOR not in str(exc):
                raise
            # No token vectors here yet (made by an older replica meanwhile): MaxSim is 0
            # for every memory, which ranks and scores as the fused stage alone.
            return await self._asked(namespace, memory_filter, limit, replace(query, tokens=None))
        return [response.points for response in responses]

    async def _sides(
        self, namespaces: Sequence[str], memory_filter: MemoryFilter, limit: int, query: Query
    ) -> Sides:
        """Each namespace asked on its own: with keywords, BM25's IDF is each collection's
        own, so scores of two namespaces compare only roughly."""
        if limit <= 0:
            return []
        wanted = list(dict.fromkeys(namespaces))
        found = await asyncio.gather(
            *(self._asked(name, memory_filter, limit, query) for name in wanted)
        )
        return [(name, side) for name, sides in zip(wanted, found, strict=True) for side in sides]

    async def delete_memory(self, namespace: str, memory_id: str) -> bool:
        point = await self._retrieve(namespace, memory_id)
        if point is None:
            return False
        collection, selector = (
            self.records.collection(namespace),
            models.PointIdsList(points=[point.id]),
        )
        deleted = await self.records.read(lambda c: c.delete(collection, selector, wait=True), None)
        return deleted is not None

    async def delete_expired_memories(self, now: datetime) -> int:
        """One count and delete per namespace collection: this layout's cost."""
        expired = filters.expired(DIALECT, now)
        swept = [
            await self._sweep(name, expired) for name in await self.records.namespace_collections()
        ]
        return sum(swept)

    async def _sweep(self, collection: str, expired: models.Filter) -> int:
        found = await self.records.read(
            lambda c: c.count(collection, expired, exact=True), models.CountResult(count=0)
        )
        if found.count == 0:
            return 0
        selector = models.FilterSelector(filter=expired)
        deleted = await self.records.read(lambda c: c.delete(collection, selector, wait=True), None)
        return 0 if deleted is None else found.count
