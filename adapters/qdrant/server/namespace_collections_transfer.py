"""The `collections` layout's bulk transfer (adapters/parts.py): a collection per namespace.

`QdrantCollectionsBackend` hands it out as `transfer` and writes its single memories through it;
also how a point of a namespace collection is read as a memory, for both.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from collections.abc import Sequence
from datetime import datetime

from qdrant_client.http import models

from adapters.errors import BackendError
from adapters.errors import BackendRejected
from adapters.errors import NamespaceGone
from adapters.qdrant import filters
from adapters.qdrant import layout
from adapters.qdrant.ranking import TOKENS_VECTOR
from adapters.qdrant.server import keyword_vectors
from adapters.qdrant.server import token_vectors
from adapters.qdrant.server.client_requests import DIALECT
from adapters.qdrant.server.connection import NO_VECTOR
from adapters.qdrant.server.connection import CollectionMissing
from adapters.qdrant.server.connection_owner import ServerTransfer
from adapters.qdrant.server.connection_owner import set_places
from adapters.qdrant.server.keyword_vectors import PointVectors
from adapters.qdrant.server.namespace_collections_records import CollectionNamespaces
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import StoredMemory


def point_id_of(memory_id: str) -> str | None:
    """Canonical UUID text, or None: a server answers 400 to a non-UUID id."""
    try:
        return str(uuid.UUID(memory_id))
    except ValueError:
        return None


def memory_of(namespace: str, point: models.Record | models.ScoredPoint) -> MemoryRecord:
    return layout.memory_from_payload(str(point.id), namespace, point.payload or {})


def stored_of(namespace: str, point: models.Record) -> StoredMemory:
    vector = keyword_vectors.dense_of(point)
    if vector is None:
        raise BackendError(f"point {point.id} of {namespace} has no plain dense vector")
    return memory_of(namespace, point), vector


class CollectionsTransfer(ServerTransfer):
    """`iter_memories` per collection; `upsert_memories`, one request per collection."""

    def __init__(self, collections: CollectionNamespaces) -> None:
        self._collections = collections

    async def iter_memories(
        self, namespace: str, now: datetime, *, page_size: int = 256, with_vectors: bool = True
    ) -> AsyncIterator[list[StoredMemory]]:
        """Scroll the namespace's own collection, live memories only, a page per request."""
        if await self._collections.get_namespace(namespace) is None:
            return
        wanted = filters.memories(DIALECT, MemoryFilter(now=now))
        pages = self._collections.connection.pages(
            self._collections.collection(namespace),
            wanted,
            with_vectors=with_vectors,
            size=page_size,
        )
        try:
            async for points in pages:
                if with_vectors:
                    found = [stored_of(namespace, point) for point in points]
                else:
                    found = [(memory_of(namespace, point), []) for point in points]
                if found:
                    yield found
        except CollectionMissing:  # deleted meanwhile: its memories vanish, as for reads
            return

    async def place_memories(self, namespace: str, places: Sequence[tuple[str, int]]) -> int:
        """One request to the namespace's collection; nothing where it is gone."""
        points = [
            (point, place)
            for memory_id, place in places
            if (point := point_id_of(memory_id)) is not None
        ]
        collection = self._collections.collection(namespace)
        with contextlib.suppress(CollectionMissing):  # deleted meanwhile: nothing to place
            await set_places(self._collections.call, collection, points)
        return len(places)

    async def write_points(self, points: Sequence[tuple[MemoryRecord, PointVectors]]) -> int:
        """One upsert request per namespace (collection) in the batch."""
        by_collection: dict[str, list[models.PointStruct]] = {}
        names: dict[str, str] = {}
        for memory, vectors in points:
            point_id = point_id_of(memory.id)
            if point_id is None:
                raise BackendRejected(f"memory id {memory.id!r} is not a UUID")
            collection = self._collections.collection(memory.namespace)
            names[collection] = memory.namespace
            by_collection.setdefault(collection, []).append(
                models.PointStruct(
                    id=point_id, vector=vectors, payload=layout.memory_to_payload(memory)
                )
            )
        for collection, written in by_collection.items():
            try:
                await self._upsert(collection, written)
            except CollectionMissing as exc:
                raise NamespaceGone(f"namespace {names[collection]} not found") from exc
        return sum(len(written) for written in by_collection.values())

    async def _upsert(self, collection: str, points: list[models.PointStruct]) -> None:
        """Upsert; a collection made before keyword (or token) vectors existed gains the
        vector on the first write that carries one (and the write is sent again)."""
        call = self._collections.call
        try:
            await call(lambda c: c.upsert(collection, points, wait=True))
        except CollectionMissing:
            raise
        except BackendError as exc:
            if NO_VECTOR not in str(exc):
                raise
            info = await call(lambda c: c.get_collection(collection))
            tokens = any(map(_carries_tokens, points))
            dimension = self._collections.token_dimension if tokens else None
            await token_vectors.ensure_vectors(call, collection, info, dimension)
            await call(lambda c: c.upsert(collection, points, wait=True))


def _carries_tokens(point: models.PointStruct) -> bool:
    return isinstance(point.vector, dict) and TOKENS_VECTOR in point.vector
