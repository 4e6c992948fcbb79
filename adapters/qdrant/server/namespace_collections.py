"""`VectorBackend` on a Qdrant server, one collection per namespace (`collections` layout).

For operators who want hard isolation and have few namespaces; the default is the shared layout
(tenants.py), into which `migrate-layout` copies this one. See docs/backends.md, "Qdrant server".
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Sequence
from functools import cached_property
from functools import partial
from typing import TypeVar

from qdrant_client import AsyncQdrantClient
from qdrant_client.http import models

from adapters.base import AnsweredBy
from adapters.errors import BackendError
from adapters.errors import BackendRejected
from adapters.errors import NamespaceGone
from adapters.qdrant import layout
from adapters.qdrant.ranking import TOKENS_VECTOR
from adapters.qdrant.server import token_vectors
from adapters.qdrant.server.client_requests import Query
from adapters.qdrant.server.connection import NO_VECTOR
from adapters.qdrant.server.connection import CollectionMissing
from adapters.qdrant.server.keyword_vectors import PointVectors
from adapters.qdrant.server.namespace_collections_records import CollectionNamespaces
from adapters.qdrant.server.namespace_collections_records import CollectionStoreMeta
from adapters.qdrant.server.server_layouts import QdrantServerLayout
from adapters.qdrant.server.server_layouts import Sides
from adapters.qdrant.server.server_layouts import start_step
from adapters.qdrant.server.vector_fill import ServerVectorFill
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import VectorKind

log = logging.getLogger(__name__)
T = TypeVar("T")


class QdrantCollectionsBackend(QdrantServerLayout):
    """Memories in a Qdrant server (or qdrant-client local mode), one collection per namespace,
    each point's id its memory's (a UUID)."""

    name = "qdrant-collections"

    @cached_property
    def records(self) -> CollectionNamespaces:
        """The namespace collections and their records: the namespace calls' part."""
        return CollectionNamespaces(self)

    # -- the optional parts (adapters/parts.py) --------------------------------------

    @cached_property
    def store_meta(self) -> CollectionStoreMeta:
        return CollectionStoreMeta(self.records)

    @cached_property
    def vector_fill(self) -> ServerVectorFill:
        return ServerVectorFill(self._call, self._listed, self.token_dimension)

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

    # -- the layout (server_layouts.py) ----------------------------------------------

    async def _call(self, op: Callable[[AsyncQdrantClient], Awaitable[T]]) -> T:
        return await self.connection.call(op)

    def _collection(self, namespace: str) -> str:
        return self.records.collection(namespace)

    def _point_id(self, namespace: str, memory_id: str) -> str | None:
        """Canonical UUID text, or None: a server answers 400 to a non-UUID id."""
        try:
            return str(uuid.UUID(memory_id))
        except ValueError:
            return None

    async def _listed(self) -> list[str]:
        return await self.records.namespace_collections()

    async def _live_place(self, namespace: str) -> tuple[str, None] | None:
        if await self.records.get_namespace(namespace) is None:
            return None
        return self._collection(namespace), None

    def _memory(self, namespace: str, point: models.Record | models.ScoredPoint) -> MemoryRecord:
        return layout.memory_from_payload(str(point.id), namespace, point.payload or {})

    async def _sides(
        self, namespaces: Sequence[str], memory_filter: MemoryFilter, limit: int, query: Query
    ) -> Sides:
        """Each namespace asked on its own: with keywords, BM25's IDF is each collection's
        own, so scores of two namespaces compare only roughly."""
        if limit <= 0:
            return []
        wanted = list(dict.fromkeys(namespaces))
        found = await asyncio.gather(
            *(self._asked(self._collection(name), memory_filter, limit, query) for name in wanted)
        )
        return [(name, side) for name, sides in zip(wanted, found, strict=True) for side in sides]

    async def _write_points(self, points: Sequence[tuple[MemoryRecord, PointVectors]]) -> int:
        """One upsert request per namespace (collection) in the batch."""
        by_collection: dict[str, list[models.PointStruct]] = {}
        names: dict[str, str] = {}
        for memory, vectors in points:
            point_id = self._point_id(memory.namespace, memory.id)
            if point_id is None:
                raise BackendRejected(f"memory id {memory.id!r} is not a UUID")
            collection = self._collection(memory.namespace)
            names[collection] = memory.namespace
            payload = layout.memory_to_payload(memory)
            point = models.PointStruct(id=point_id, vector=vectors, payload=payload)
            by_collection.setdefault(collection, []).append(point)
        for collection, written in by_collection.items():
            try:
                await self._upsert(collection, written)
            except CollectionMissing as exc:
                raise NamespaceGone(f"namespace {names[collection]} not found") from exc
        return sum(len(written) for written in by_collection.values())

    async def _upsert(self, collection: str, points: list[models.PointStruct]) -> None:
        """Upsert; a collection made before keyword (or token) vectors existed gains the
        vector on the first write that carries one (and the write is sent again)."""
        try:
            await self._call(lambda c: c.upsert(collection, points, wait=True))
        except CollectionMissing:
            raise
        except BackendError as exc:
            if NO_VECTOR not in str(exc):
                raise
            info = await self._call(lambda c: c.get_collection(collection))
            tokens = any(isinstance(p.vector, dict) and TOKENS_VECTOR in p.vector for p in points)
            dimension = self.token_dimension if tokens else None
            await token_vectors.ensure_vectors(self._call, collection, info, dimension)
            await self._call(lambda c: c.upsert(collection, points, wait=True))
