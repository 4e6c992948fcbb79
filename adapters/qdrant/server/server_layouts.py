"""What both layouts of a Qdrant server share, as one type for the code that builds either.

`QdrantServerBackend` (tenants.py) and `QdrantCollectionsBackend` (namespace_collections.py) take
the same settings; their connection is their own, or one they share, which lets migrate-layout
read one layout and write the other over one client, as qdrant-client's local mode needs. A layout
says where a namespace's memories lie and how a point is read; the memory calls and the transfer
are written here once.
"""

from __future__ import annotations

import abc
import contextlib
import logging
from collections.abc import AsyncIterator
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import replace
from datetime import datetime
from functools import cached_property
from typing import TypeVar

from qdrant_client import AsyncQdrantClient
from qdrant_client.http import models

from adapters.base import DEFAULT_PREFIX
from adapters.base import VectorBackend
from adapters.errors import BackendError
from adapters.errors import BackendMisconfigured
from adapters.merge import merge_listed
from adapters.merge import merge_scored
from adapters.qdrant import filters
from adapters.qdrant import layout
from adapters.qdrant import names
from adapters.qdrant import ranking
from adapters.qdrant.server import token_vectors
from adapters.qdrant.server.client_requests import DENSE
from adapters.qdrant.server.client_requests import DIALECT
from adapters.qdrant.server.client_requests import NEWEST_FIRST
from adapters.qdrant.server.client_requests import Query
from adapters.qdrant.server.client_requests import side_requests
from adapters.qdrant.server.connection import NO_VECTOR
from adapters.qdrant.server.connection import CollectionMissing
from adapters.qdrant.server.connection import QdrantConnection
from adapters.qdrant.server.keyword_vectors import PointVectors
from adapters.qdrant.server.keyword_vectors import dense_of
from adapters.qdrant.server.keyword_vectors import point_vector
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import ScoredMemory
from adapters.values import SearchMode
from adapters.values import SearchQuery
from adapters.values import SparseVector
from adapters.values import StoredMemory
from adapters.values import TokenVectors
from adapters.values import with_keywords

T = TypeVar("T")
# keyword feedback is a second pass of the embedded store's reads; `rerank` here is
# MaxSim over the fused candidates without it (docs/backends.md)
SERVER_SEARCH_MODES = ranking.QDRANT_SEARCH_MODES - {SearchMode.FEEDBACK}
# Each pin side's points, with the namespace they were read from where a point does not say.
Sides = list[tuple[str, list[models.ScoredPoint]]]


class QdrantServerLayout(VectorBackend):
    """A backend on a Qdrant server: its connection, the collection prefix (checked), whether
    it keeps token vectors (`tokens`) and their size; `url` or `location` (":memory:":
    qdrant-client's local mode), or a `connection` to share (not closed with it)."""

    def __init__(
        self,
        dimension: int,
        *,
        url: str | None = None,
        api_key: str | None = None,
        location: str | None = None,
        prefix: str = DEFAULT_PREFIX,
        timeout_s: float = 1.0,
        connection: QdrantConnection | None = None,
        tokens: bool = False,
        token_dimension: int | None = None,
    ) -> None:
        super().__init__(dimension, token_dimension)
        if not names.is_valid_collection_name(prefix):
            raise ValueError(f"prefix {prefix!r} cannot start a Qdrant collection name")
        if connection is not None and (url is not None or location is not None):
            raise ValueError("give either a connection or url/location, not both")
        self._owns_connection = connection is None
        if connection is None:
            connection = QdrantConnection(
                url=url, api_key=api_key, location=location, timeout_s=timeout_s
            )
        self.connection = connection
        self.prefix = prefix
        self.keep_tokens = tokens

    @property
    def search_modes(self) -> frozenset[SearchMode]:
        return SERVER_SEARCH_MODES

    @property
    def kept_token_dimension(self) -> int | None:
        """The token vectors' size where it keeps them, else None."""
        return self.token_dimension if self.keep_tokens else None

    async def close(self) -> None:
        if self._owns_connection:
            await self.connection.close()

    @cached_property
    def transfer(self) -> ServerTransfer:
        return ServerTransfer(self)

    # -- what each layout says -------------------------------------------------------

    @abc.abstractmethod
    async def _call(self, op: Callable[[AsyncQdrantClient], Awaitable[T]]) -> T:
        """One SDK call on the layout's collections."""

    @abc.abstractmethod
    def _collection(self, namespace: str) -> str:
        """The collection holding the namespace's memories."""

    @abc.abstractmethod
    def _point_id(self, namespace: str, memory_id: str) -> str | None:
        """The memory's point id (None: it cannot be stored here)."""

    @abc.abstractmethod
    async def _listed(self) -> list[str]:
        """The memory collections."""

    @abc.abstractmethod
    async def _live_place(self, namespace: str) -> tuple[str, layout.Scope | None] | None:
        """The collection and scope of a live namespace's memories; None if it is absent."""

    @abc.abstractmethod
    async def _sides(
        self, namespaces: Sequence[str], memory_filter: MemoryFilter, limit: int, query: Query
    ) -> Sides:
        """Each pin side's best `limit` points over `namespaces` (`query` ranks or lists)."""

    @abc.abstractmethod
    def _memory(self, namespace: str, point: models.Record | models.ScoredPoint) -> MemoryRecord:
        """The memory a point read from `namespace` holds."""

    @abc.abstractmethod
    async def _write_points(self, points: Sequence[tuple[MemoryRecord, PointVectors]]) -> int:
        """Write each memory as a point with these vectors; how many were written."""

    # -- memories --------------------------------------------------------------------

    async def _point(self, namespace: str, memory_id: str) -> models.Record | None:
        """The memory's point, with its dense vector."""
        point_id = self._point_id(namespace, memory_id)
        if point_id is None:
            return None
        collection = self._collection(namespace)
        try:
            found = await self._call(
                lambda c: c.retrieve(collection, [point_id], with_vectors=[DENSE])
            )
        except CollectionMissing:
            return None
        return found[0] if found else None

    async def get_memory(self, namespace: str, memory_id: str) -> MemoryRecord | None:
        point = await self._point(namespace, memory_id)
        return None if point is None else self._memory(namespace, point)

    async def get_stored_memory(self, namespace: str, memory_id: str) -> StoredMemory | None:
        point = await self._point(namespace, memory_id)
        return None if point is None else (self._memory(namespace, point), stored_vector(point))

    async def upsert_memory(self, memory: MemoryRecord, vectors: MemoryVectors) -> None:
        """One point with its keyword and token vectors (`tokens`: rerank mode only)."""
        keyed = None if vectors.keywords is None else [vectors.keywords]
        written = [(memory, list(vectors.dense))]
        await self.transfer.upsert_memories(written, keyed, [vectors.tokens])

    async def delete_memory(self, namespace: str, memory_id: str) -> bool:
        point = await self._point(namespace, memory_id)
        if point is None:
            return False
        collection, selector = self._collection(namespace), models.PointIdsList(points=[point.id])
        try:
            await self._call(lambda c: c.delete(collection, selector, wait=True))
        except CollectionMissing:
            return False
        return True

    async def delete_expired_memories(self, now: datetime) -> int:
        """One count and delete per memory collection (per namespace: this layout's cost)."""
        expired = filters.expired(DIALECT, now)
        return sum([await self._sweep(name, expired) for name in await self._listed()])

    async def _sweep(self, collection: str, expired: models.Filter) -> int:
        try:
            found = await self._call(lambda c: c.count(collection, expired, exact=True))
            if found.count > 0:
                selector = models.FilterSelector(filter=expired)
                await self._call(lambda c: c.delete(collection, selector, wait=True))
        except CollectionMissing:
            return 0
        return found.count

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

    async def _asked(
        self,
        collection: str,
        memory_filter: MemoryFilter,
        limit: int,
        query: Query,
        scope: layout.Scope | None = None,
    ) -> list[list[models.ScoredPoint]]:
        """Each pin side's best `limit` in one collection: one query_batch_points request."""
        mass = None
        if isinstance(query, SearchQuery):
            query, mass = await token_vectors.weighed_query(self._call, collection, query)
        requests = side_requests(memory_filter, limit, query, scope, mass)
        try:
            responses = await self._call(lambda c: c.query_batch_points(collection, requests))
        except CollectionMissing:
            return []
        except BackendError as exc:
            if not isinstance(query, SearchQuery) or not query.tokens or NO_VECTOR not in str(exc):
                raise
            # No token vectors here yet (made by an older replica meanwhile): MaxSim is 0
            # for every memory, which ranks and scores as the fused stage alone.
            unranked = replace(query, tokens=None)
            return await self._asked(collection, memory_filter, limit, unranked, scope)
        return [response.points for response in responses]


def stored_vector(point: models.Record) -> list[float]:
    vector = dense_of(point)
    if vector is None:
        raise BackendError(f"point {point.id} has no plain dense vector")
    return vector


@dataclass(frozen=True, slots=True)
class ServerTransfer:
    """Either layout's bulk transfer (adapters/parts.py `BulkTransfer`): each memory's point
    vectors made here, written by the layout's `_write_points`."""

    layout: QdrantServerLayout

    async def upsert_memories(
        self,
        memories: Sequence[StoredMemory],
        keywords: Sequence[SparseVector] | None = None,
        tokens: Sequence[TokenVectors | None] | None = None,
    ) -> int:
        """Write many memories, as `upsert_memory`; how many were written. `tokens` (one
        memory's write in rerank mode): each memory's token vectors, or None."""
        each_tokens = [None] * len(memories) if tokens is None else tokens
        written = zip(with_keywords(memories, keywords), each_tokens, strict=True)
        return await self.layout._write_points(
            [
                (memory, point_vector(vector, memory_keywords, memory_tokens))
                for ((memory, vector), memory_keywords), memory_tokens in written
            ]
        )

    async def iter_memories(
        self, namespace: str, now: datetime, *, page_size: int = 256, with_vectors: bool = True
    ) -> AsyncIterator[list[StoredMemory]]:
        """Scroll the live namespace's memories, a page per request."""
        place = await self.layout._live_place(namespace)
        if place is None:
            return
        collection, scope = place
        wanted = filters.memories(DIALECT, MemoryFilter(now=now), scope)
        pages = self.layout.connection.pages(
            collection, wanted, with_vectors=with_vectors, size=page_size, call=self.layout._call
        )
        try:
            async for points in pages:
                found = [
                    (self.layout._memory(namespace, p), stored_vector(p) if with_vectors else [])
                    for p in points
                ]
                if found:
                    yield found
        except CollectionMissing:  # deleted meanwhile: its memories vanish, as for reads
            return

    async def place_memories(self, namespace: str, places: Sequence[tuple[str, int]]) -> int:
        """Each point's place in the write order (`layout.FIELD_POSITION`), in one request; a
        point that is gone is skipped (each is named by a filter, which matches nothing then)."""
        operations: list[models.UpdateOperation] = [
            models.SetPayloadOperation(
                set_payload=models.SetPayload(
                    payload={layout.FIELD_POSITION: place},
                    filter=models.Filter(must=[models.HasIdCondition(has_id=[point])]),
                )
            )
            for memory_id, place in places
            if (point := self.layout._point_id(namespace, memory_id)) is not None
        ]
        collection = self.layout._collection(namespace)
        if operations:
            with contextlib.suppress(CollectionMissing):  # deleted meanwhile: nothing to place
                await self.layout._call(
                    lambda c: c.batch_update_points(collection, operations, wait=True)
                )
        return len(places)


async def start_step(step: Callable[[], Awaitable[None]], log: logging.Logger, outage: str) -> None:
    """A start-up step: a store it cannot serve ends the boot (`BackendMisconfigured`);
    Qdrant down or failing is logged (`outage`, with the error) and done later."""
    try:
        await step()
    except BackendMisconfigured:
        raise
    except BackendError as exc:
        log.warning(outage, exc)
