"""The embedded store's token index: give memories stored without them their token vectors.

A part of `QdrantEdgeBackend` (backend.py; `adapters.parts.TokenIndex`), driven
by plugin/embedding/token_index.py, as keyword_index.py is for keyword vectors:
memories are found by "has no token vectors" and given them in place
(missing_vectors.py: the sentence vector, keyword vector and payload stay).
"""

from __future__ import annotations

from collections.abc import Sequence

from adapters.qdrant.edge.engine import add_token_vector
from adapters.qdrant.edge.missing_vectors import MissingVectors
from adapters.qdrant.edge.store import EdgeStore
from adapters.qdrant.ranking import TOKENS_VECTOR
from adapters.values import TokenVectors


class EdgeTokenIndex:
    """`prepare_tokens`, `untokenized_memories` and `index_tokens` for the embedded store
    (the walk and the conditional write: missing_vectors.py)."""

    def __init__(self, store: EdgeStore, dimension: int) -> None:
        self._store = store
        self._dimension = dimension
        self._missing = MissingVectors(store, TOKENS_VECTOR)

    async def prepare_tokens(self) -> None:
        def prepare() -> None:
            for shard in self._store.shards.open_shards():
                add_token_vector(shard, self._dimension)

        await self._store.calls.worker(prepare)

    async def untokenized_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        return await self._missing.page(cursor, limit)

    async def index_tokens(self, items: Sequence[tuple[str, TokenVectors]]) -> int:
        return await self._missing.fill(items, _rows)


def _rows(vectors: TokenVectors) -> list[list[float]]:
    """Token vectors as the engine takes a multivector."""
    return [list(row) for row in vectors]
