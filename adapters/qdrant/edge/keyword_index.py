"""The embedded store's keyword index: give memories stored without one their keyword vector.

A part of `QdrantEdgeBackend` (backend.py), driven by plugin/embedding/keyword_index.py.
Memories written before keyword vectors existed, or imported without them, are
found by "has no keyword vector" and given one in place (missing_vectors.py); a
store of another encoder's keyword vectors drops them first.
"""

from __future__ import annotations

from collections.abc import Sequence

from adapters.qdrant.edge.engine import add_keyword_vector, drop_keyword_vector, sparse
from adapters.qdrant.edge.missing_vectors import MissingVectors
from adapters.qdrant.edge.store import EdgeStore
from adapters.qdrant.ranking import KEYWORDS_VECTOR
from adapters.values import SparseVector


class EdgeKeywordIndex:
    """`prepare_keywords`, `unindexed_memories` and `index_keywords` for the embedded store
    (the walk and the conditional write: missing_vectors.py)."""

    def __init__(self, store: EdgeStore) -> None:
        self._store = store
        self._missing = MissingVectors(store, KEYWORDS_VECTOR)

    async def prepare_keywords(self, *, reset: bool = False) -> None:
        await self._store.calls.worker(self._prepare_keywords, reset)

    def _prepare_keywords(self, reset: bool) -> None:
        for shard in self._store.shards.open_shards():
            if reset:
                drop_keyword_vector(shard)
            else:
                add_keyword_vector(shard)

    async def unindexed_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        return await self._missing.page(cursor, limit)

    async def index_keywords(self, items: Sequence[tuple[str, SparseVector]]) -> int:
        return await self._missing.fill(items, sparse)
