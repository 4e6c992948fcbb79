"""What both layouts of a Qdrant server share, as one type for the code that builds either.

`QdrantServerBackend` (tenants.py) and `QdrantCollectionsBackend` (namespace_collections.py) take
the same settings and connection part; plugin/backends.py builds either, migrate-layout both.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Unpack

from qdrant_client.http import models

from adapters.base import VectorBackend
from adapters.merge import merge_listed
from adapters.merge import merge_scored
from adapters.qdrant.server.client_requests import NEWEST_FIRST
from adapters.qdrant.server.client_requests import Query
from adapters.qdrant.server.connection_owner import SERVER_SEARCH_MODES
from adapters.qdrant.server.connection_owner import ServerConnectionOwner
from adapters.qdrant.server.connection_owner import ServerOptions
from adapters.qdrant.server.connection_owner import ServerTransfer
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import ScoredMemory
from adapters.values import SearchMode
from adapters.values import SearchQuery

# Each pin side's points, with the namespace they were read from where a point does not say.
Sides = list[tuple[str, list[models.ScoredPoint]]]


class QdrantServerLayout(VectorBackend):
    """A backend on a Qdrant server: its connection (owned or shared), its search modes, its
    writes through its `transfer`, its reads merged from each pin side's points (`_sides`)."""

    def __init__(self, dimension: int, **options: Unpack[ServerOptions]) -> None:
        super().__init__(dimension, options.get("token_dimension"))
        self._server = ServerConnectionOwner(dimension, **options)
        self.connection = self._server.connection  # its own, or one it shares
        self.keep_tokens = self._server.keep_tokens

    @property
    def search_modes(self) -> frozenset[SearchMode]:
        return SERVER_SEARCH_MODES

    async def close(self) -> None:
        await self._server.close()

    @property
    @abc.abstractmethod
    def transfer(self) -> ServerTransfer: ...

    async def upsert_memory(self, memory: MemoryRecord, vectors: MemoryVectors) -> None:
        """One point with its keyword and token vectors (`tokens`: rerank mode only)."""
        keyed = None if vectors.keywords is None else [vectors.keywords]
        written = [(memory, list(vectors.dense))]
        await self.transfer.upsert_memories(written, keyed, [vectors.tokens])

    async def query_memories(
        self, namespaces: Sequence[str], query: SearchQuery, memory_filter: MemoryFilter, limit: int
    ) -> list[ScoredMemory]:
        parts = await self._sides(namespaces, memory_filter, limit, query)
        scored = ([ScoredMemory(self._memory(n, p), p.score) for p in side] for n, side in parts)
        return merge_scored(scored, limit)

    async def list_memories(
        self, namespaces: Sequence[str], memory_filter: MemoryFilter, limit: int
    ) -> list[MemoryRecord]:
        parts = await self._sides(namespaces, memory_filter, limit, NEWEST_FIRST)
        return merge_listed(([self._memory(n, p) for p in side] for n, side in parts), limit)

    @abc.abstractmethod
    async def _sides(
        self, namespaces: Sequence[str], memory_filter: MemoryFilter, limit: int, query: Query
    ) -> Sides:
        """Each pin side's best `limit` points over `namespaces` (`query` ranks or lists)."""

    @abc.abstractmethod
    def _memory(self, namespace: str, point: models.ScoredPoint) -> MemoryRecord:
        """The memory a point read from `namespace` holds."""
