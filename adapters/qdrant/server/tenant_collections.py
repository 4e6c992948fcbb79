"""The shared layout's two collections: how they are set up, and how a memory is a point.

`<prefix>memories` holds every namespace's memories, keyed by `ns`; `<prefix>namespaces` the
records (tenant_namespaces.py). Both are made on first use. See docs/backends.md, "Qdrant server".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import TypeVar

from qdrant_client import AsyncQdrantClient
from qdrant_client.http import models

from adapters.errors import BackendMisconfigured
from adapters.errors import BackendUnavailable
from adapters.qdrant import layout
from adapters.qdrant import names
from adapters.qdrant.layout import FIELD_EPOCH
from adapters.qdrant.layout import FIELD_EXPIRES_US
from adapters.qdrant.layout import IndexKind
from adapters.qdrant.server import token_vectors
from adapters.qdrant.server.connection import CollectionMissing
from adapters.qdrant.server.server_layouts import QdrantServerLayout

T = TypeVar("T")

MEMORY_STORE_INDEXES = {**layout.TENANT_INDEXES, **layout.MEMORY_INDEXES}
# The records collection's points have a `type` (tenant_namespaces.py); records expire.
FIELD_TYPE = "type"
RECORD_INDEXES = {FIELD_TYPE: IndexKind.KEYWORD, FIELD_EXPIRES_US: IndexKind.RANGE_INTEGER}
# HNSW per tenant only, no graph across namespaces (Qdrant's multitenancy guide).
TENANT_HNSW = models.HnswConfigDiff(m=0, payload_m=16)


def legacy_layout_line(found: Sequence[str]) -> str:
    return (
        f"Qdrant holds {len(found)} namespace collections in the per-namespace layout "
        f"(e.g. {found[0]}); run 'memory-plugin-vector migrate-layout' to copy them into "
        "the shared layout, or set MEMORY_PLUGIN_QDRANT_LAYOUT=collections"
    )


class TenantCollections:
    """Both collections of one prefix, set up once per process on first use (and again
    when one vanished); a request only ever sees a 503 for the setup."""

    def __init__(self, server: QdrantServerLayout) -> None:
        self.connection = server.connection
        self._server = server
        self.memories = names.memories_store_name(server.prefix)
        self.records = names.records_store_name(server.prefix)
        self._ready = False
        self._lock = asyncio.Lock()

    async def prepare(self, *, allow_namespace_collections: bool = False) -> None:
        self.connection.open()
        async with self._lock:
            if not self._ready:
                await self._set_up(allow_namespace_collections)
                self._ready = True

    async def _set_up(self, allow_namespace_collections: bool) -> None:
        """Create or check both collections (a lost race is fine) and heal their indexes."""
        connection, server = self.connection, self._server
        listing = await connection.call(lambda c: c.get_collections())
        present = {description.name for description in listing.collections}
        legacy = sorted(n for n in present if names.is_namespace_collection(n, server.prefix))
        if legacy and not allow_namespace_collections:
            raise BackendMisconfigured(legacy_layout_line(legacy))
        info = await connection.ensure_collection(
            self.memories,
            present,
            token_vectors.collection_vectors(server.dimension, server.token_dimension),
            MEMORY_STORE_INDEXES,
            sparse=token_vectors.SPARSE_VECTORS,
            hnsw=TENANT_HNSW,
        )
        if info is not None:
            tokens = server.kept_token_dimension
            await token_vectors.ensure_vectors(connection.call, self.memories, info, tokens)
        await connection.ensure_collection(self.records, present, {}, RECORD_INDEXES)

    async def ready(self) -> None:
        if not self._ready:
            try:
                await self.prepare()
            except BackendMisconfigured as exc:
                raise BackendUnavailable(str(exc)) from exc

    async def call(self, op: Callable[[AsyncQdrantClient], Awaitable[T]]) -> T:
        """One SDK call once both collections are set up."""
        await self.ready()
        try:
            return await self.connection.call(op)
        except CollectionMissing as exc:  # dropped behind our back: set up again next time
            self._ready = False
            raise BackendUnavailable(f"qdrant collection vanished: {exc}") from exc


def owner(point: models.Record) -> tuple[Any, Any]:
    payload = point.payload or {}
    return payload.get(layout.FIELD_NAMESPACE), payload.get(FIELD_EPOCH)
