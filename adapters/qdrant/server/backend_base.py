"""What both Qdrant server backends share as a `VectorBackend`: a connection and a prefix.

The connection is the backend's own, or one it shares with another backend
(migrate-layout reads one layout and writes the other over one client, which
qdrant-client's local mode needs: each local client is a store of its own).
`tokens` (MEMORY_PLUGIN_SEARCH=rerank) makes the set-up give a collection of an
older version its token vectors' multivector in place (token_vectors.py); new
collections have it whatever the mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from adapters.base import DEFAULT_PREFIX, VectorBackend
from adapters.parts import BulkTransfer
from adapters.qdrant import ranking
from adapters.qdrant.server.connection import QdrantConnection
from adapters.values import (
    MemoryRecord,
    SearchMode,
    SparseVector,
    StoredMemory,
    TokenVectors,
)


class ServerTransfer(BulkTransfer, Protocol):
    """A server layout's bulk writes, which carry token vectors too (rerank mode)."""

    async def upsert_memories(
        self,
        memories: Sequence[StoredMemory],
        keywords: Sequence[SparseVector] | None = None,
        tokens: Sequence[TokenVectors | None] | None = None,
    ) -> int: ...


class QdrantServerBase(VectorBackend):
    """A server layout's backend: its own connection or one it shares, and a prefix."""

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
    ) -> None:
        super().__init__(dimension)
        self.keep_tokens = tokens
        self._owns_connection = connection is None
        self.connection = QdrantConnection.of_backend(
            connection,
            url=url,
            api_key=api_key,
            location=location,
            timeout_s=timeout_s,
            prefix=prefix,
        )
        self._prefix = prefix

    @property
    def search_modes(self) -> frozenset[SearchMode]:
        # keyword feedback is a second pass of the embedded store's reads; `rerank` here is
        # MaxSim over the fused candidates without it (docs/backends.md)
        return ranking.QDRANT_SEARCH_MODES - {SearchMode.FEEDBACK}

    @property
    def transfer(self) -> ServerTransfer:  # each layout hands out its own
        raise NotImplementedError

    async def upsert_memory(
        self,
        memory: MemoryRecord,
        vector: Sequence[float],
        keywords: SparseVector | None = None,
        tokens: TokenVectors | None = None,
    ) -> None:
        """One point with its keyword and token vectors (`tokens`: rerank mode only)."""
        keyed = None if keywords is None else [keywords]
        await self.transfer.upsert_memories([(memory, list(vector))], keyed, [tokens])

    async def close(self) -> None:
        if self._owns_connection:
            await self.connection.close()
