"""What both Qdrant server backends compose: a connection they own or share, and settings.

The connection is the backend's own, or one it shares with another backend
(migrate-layout reads one layout and writes the other over one client, which
qdrant-client's local mode needs: each local client is a store of its own).
`tokens` (MEMORY_PLUGIN_SEARCH=rerank) makes the set-up give a collection of an
older version its token vectors' multivector in place (token_vectors.py); new
collections have it whatever the mode. Also what both answer alike: the search
modes, and one memory written as a batch of one through the layout's transfer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from adapters.parts import BulkTransfer
from adapters.qdrant import ranking
from adapters.qdrant.server.connection import QdrantConnection
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import SearchMode
from adapters.values import SparseVector
from adapters.values import StoredMemory
from adapters.values import TokenVectors

# keyword feedback is a second pass of the embedded store's reads; `rerank` here is
# MaxSim over the fused candidates without it (docs/backends.md)
SERVER_SEARCH_MODES = ranking.QDRANT_SEARCH_MODES - {SearchMode.FEEDBACK}


class ServerTransfer(BulkTransfer, Protocol):
    """A server layout's bulk writes, which carry token vectors too (rerank mode)."""

    async def upsert_memories(
        self,
        memories: Sequence[StoredMemory],
        keywords: Sequence[SparseVector] | None = None,
        tokens: Sequence[TokenVectors | None] | None = None,
    ) -> int: ...


class ServerConnectionOwner:
    """A server backend's connection (its own, closed with it, or one it shares; the
    collection prefix checked), and whether it keeps token vectors."""

    def __init__(
        self,
        connection: QdrantConnection | None,
        *,
        url: str | None,
        api_key: str | None,
        location: str | None,
        timeout_s: float,
        prefix: str,
        tokens: bool,
    ) -> None:
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

    async def close(self) -> None:
        if self._owns_connection:
            await self.connection.close()


async def upsert_one(
    transfer: ServerTransfer, memory: MemoryRecord, vectors: MemoryVectors
) -> None:
    """One point with its keyword and token vectors (`tokens`: rerank mode only)."""
    keyed = None if vectors.keywords is None else [vectors.keywords]
    await transfer.upsert_memories([(memory, list(vectors.dense))], keyed, [vectors.tokens])
