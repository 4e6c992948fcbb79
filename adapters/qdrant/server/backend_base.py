"""What both Qdrant server backends share as a `VectorBackend`: a connection and a prefix.

The connection is the backend's own, or one it shares with another backend
(migrate-layout reads one layout and writes the other over one client, which
qdrant-client's local mode needs: each local client is a store of its own).
`tokens` (MEMORY_PLUGIN_SEARCH=rerank) makes the set-up give a collection of an
older version its token vectors' multivector in place (token_vectors.py); new
collections have it whatever the mode.
"""

from __future__ import annotations

from adapters.base import DEFAULT_PREFIX, VectorBackend
from adapters.qdrant import ranking
from adapters.qdrant.server.connection import QdrantConnection
from adapters.values import SearchMode


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

    async def close(self) -> None:
        if self._owns_connection:
            await self.connection.close()
