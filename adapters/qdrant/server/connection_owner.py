"""What both Qdrant server backends compose: a connection they own or share, and settings.

A shared one lets migrate-layout read one layout and write the other over one client, as
qdrant-client's local mode needs. Also how both start and write memories (`ServerTransfer`).
"""

from __future__ import annotations

import abc
import logging
from collections.abc import AsyncIterator
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from typing import TypedDict

from qdrant_client import AsyncQdrantClient
from qdrant_client.http import models

from adapters.base import DEFAULT_PREFIX
from adapters.errors import BackendError
from adapters.errors import BackendMisconfigured
from adapters.qdrant import layout
from adapters.qdrant import names
from adapters.qdrant import ranking
from adapters.qdrant.server.connection import QdrantConnection
from adapters.qdrant.server.keyword_vectors import PointVectors
from adapters.qdrant.server.keyword_vectors import point_vector
from adapters.values import MemoryRecord
from adapters.values import SearchMode
from adapters.values import SparseVector
from adapters.values import StoredMemory
from adapters.values import TokenVectors
from adapters.values import with_keywords

# keyword feedback is a second pass of the embedded store's reads; `rerank` here is
# MaxSim over the fused candidates without it (docs/backends.md)
SERVER_SEARCH_MODES = ranking.QDRANT_SEARCH_MODES - {SearchMode.FEEDBACK}


class ServerOptions(TypedDict, total=False):
    """Both server backends' keyword arguments (defaults: `ServerConnectionOwner`): `url` or
    `location` (":memory:": qdrant-client's local mode), or a `connection` to share."""

    url: str | None
    api_key: str | None
    location: str | None
    prefix: str
    timeout_s: float
    connection: QdrantConnection | None
    tokens: bool
    token_dimension: int | None


class ServerConnectionOwner:
    """A server backend's connection (its own, closed with it, or one it shares) and the
    settings its layout's parts read: the collection prefix (checked), the dimension,
    whether it keeps token vectors and their size (None: the dimension)."""

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
        self.dimension = dimension
        self.keep_tokens = tokens
        self.token_dimension = token_dimension or dimension

    async def close(self) -> None:
        if self._owns_connection:
            await self.connection.close()


class ServerTransfer(abc.ABC):
    """A server layout's bulk transfer: each memory's point vectors made here, written by the
    layout's `write_points`."""

    __slots__ = ()

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
        return await self.write_points(
            [
                (memory, point_vector(vector, memory_keywords, memory_tokens))
                for ((memory, vector), memory_keywords), memory_tokens in written
            ]
        )

    @abc.abstractmethod
    async def write_points(self, points: Sequence[tuple[MemoryRecord, PointVectors]]) -> int:
        """Write each memory as a point with these vectors; how many were written."""

    @abc.abstractmethod
    def iter_memories(
        self, namespace: str, now: datetime, *, page_size: int = 256, with_vectors: bool = True
    ) -> AsyncIterator[list[StoredMemory]]: ...

    @abc.abstractmethod
    async def place_memories(self, namespace: str, places: Sequence[tuple[str, int]]) -> int: ...


async def set_places(
    call: Callable[[Callable[[AsyncQdrantClient], Awaitable[Any]]], Awaitable[Any]],
    collection: str,
    places: Sequence[tuple[str, int]],
) -> None:
    """Each point's place in the write order (`layout.FIELD_POSITION`), in one request; a
    point that is gone is skipped (each is named by a filter, which matches nothing then)."""
    operations: list[models.UpdateOperation] = [
        models.SetPayloadOperation(
            set_payload=models.SetPayload(
                payload={layout.FIELD_POSITION: place},
                filter=models.Filter(must=[models.HasIdCondition(has_id=[point])]),
            )
        )
        for point, place in places
    ]
    if operations:
        await call(lambda c: c.batch_update_points(collection, operations, wait=True))


async def start_step(step: Callable[[], Awaitable[None]], log: logging.Logger, outage: str) -> None:
    """A start-up step: a store it cannot serve ends the boot (`BackendMisconfigured`);
    Qdrant down or failing is logged (`outage`, with the error) and done later."""
    try:
        await step()
    except BackendMisconfigured:
        raise
    except BackendError as exc:
        log.warning(outage, exc)
