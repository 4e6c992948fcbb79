"""The `collections` layout's namespaces: a collection each, its record in its metadata.

`CollectionNamespaces`, a part of `QdrantCollectionsBackend` (namespace_collections.py): the
record under one metadata key, replaced in one request; the other parts reach collections here.
"""

from __future__ import annotations

from collections.abc import Awaitable
from collections.abc import Callable
from typing import Any
from typing import TypeVar

from qdrant_client import AsyncQdrantClient
from qdrant_client.http import models

from adapters.errors import BackendError
from adapters.errors import NamespaceConflict
from adapters.qdrant import layout
from adapters.qdrant import names
from adapters.qdrant.server import token_vectors
from adapters.qdrant.server.connection import CollectionMissing
from adapters.qdrant.server.server_layouts import QdrantServerLayout
from adapters.values import NamespaceRecord

T = TypeVar("T")

RECORD_KEY = "memory_plugin_namespace"
# Store-wide facts (the embedding fingerprint) are the metadata of `<prefix>store`, a
# collection without vectors; no `~` in it, so it is never taken for a namespace's.
STORE_META_SUFFIX = "store"


class CollectionNamespaces:
    """The namespace collections of one prefix, and the record each one keeps."""

    def __init__(self, server: QdrantServerLayout) -> None:
        self.connection = server.connection
        self.prefix = server.prefix
        self._server = server

    async def read(self, op: Callable[[AsyncQdrantClient], Awaitable[T]], missing: T) -> T:
        """A read on a namespace whose collection is missing answers `missing`."""
        try:
            return await self.connection.call(op)
        except CollectionMissing:
            return missing

    def collection(self, namespace: str) -> str:
        return names.collection_name(namespace, self.prefix)

    async def info(self, collection: str) -> models.CollectionInfo | None:
        return await self.read(lambda c: c.get_collection(collection), None)

    def record(
        self, info: models.CollectionInfo, namespace: str | None, collection: str
    ) -> NamespaceRecord | None:
        """Decode the record kept with `collection`; conflict if it names another namespace."""
        raw = (info.config.metadata or {}).get(RECORD_KEY)
        if not isinstance(raw, str):
            return None
        try:
            record = layout.namespace_from_json(raw)
        except (ValueError, KeyError, TypeError) as exc:
            raise BackendError(f"collection {collection!r} holds a corrupt record") from exc
        if namespace is not None and record.name != namespace:
            raise NamespaceConflict(
                f"collection {collection!r} belongs to {record.name!r}, not {namespace!r}"
            )
        return record

    async def namespace_collections(self) -> list[str]:
        listing = await self.connection.call(lambda c: c.get_collections())
        found = (d.name for d in listing.collections)
        return sorted(name for name in found if names.is_namespace_collection(name, self.prefix))

    async def get_namespace(self, name: str) -> NamespaceRecord | None:
        collection = self.collection(name)
        info = await self.info(collection)
        return None if info is None else self.record(info, name, collection)

    async def save_namespace(self, record: NamespaceRecord) -> None:
        collection = self.collection(record.name)
        metadata: dict[str, Any] = {RECORD_KEY: layout.namespace_to_json(record)}
        info = await self.info(collection)
        if info is None:
            server = self._server
            vectors = token_vectors.collection_vectors(server.dimension, server.token_dimension)
            if await self.connection.create_collection(
                collection, vectors, sparse=token_vectors.SPARSE_VECTORS, metadata=metadata
            ):
                await self.connection.ensure_indexes(collection, layout.MEMORY_INDEXES, {})
                return
            info = await self.info(collection)  # another replica won the race
            if info is None:
                raise BackendError(f"collection {collection!r} vanished while saving")
        self.record(info, record.name, collection)
        await self.connection.ensure_indexes(collection, layout.MEMORY_INDEXES, info.payload_schema)
        tokens = self._server.kept_token_dimension  # rerank: an older collection gains them
        await token_vectors.ensure_vectors(self.connection.call, collection, info, tokens)
        await self.connection.call(lambda c: c.update_collection(collection, metadata=metadata))

    async def delete_namespace(self, name: str) -> bool:
        collection = self.collection(name)
        info = await self.info(collection)
        if info is None:
            return False
        self.record(info, name, collection)
        return await self.read(lambda c: c.delete_collection(collection), False)

    async def list_namespaces(self) -> list[NamespaceRecord]:
        records: list[NamespaceRecord] = []
        for collection in await self.namespace_collections():
            info = await self.info(collection)
            record = None if info is None else self.record(info, None, collection)
            if record is not None and self.collection(record.name) == collection:
                records.append(record)
        return records


class CollectionStoreMeta:
    """The layout's `store_meta` part: the metadata of a collection of its own."""

    def __init__(self, collections: CollectionNamespaces) -> None:
        self._collections = collections
        self._name = collections.prefix + STORE_META_SUFFIX

    async def read_store_meta(self) -> dict[str, str]:
        info = await self._collections.info(self._name)
        found = {} if info is None else info.config.metadata or {}
        return {str(key): str(value) for key, value in found.items()}

    async def write_store_meta(self, key: str, value: str) -> None:
        collection, metadata = self._name, {key: value}
        connection = self._collections.connection
        if await self._collections.info(collection) is None and await connection.create_collection(
            collection, {}, metadata=dict(metadata)
        ):
            return
        await connection.call(lambda c: c.update_collection(collection, metadata=metadata))
