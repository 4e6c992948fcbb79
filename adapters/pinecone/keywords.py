"""Keyword vectors on Pinecone: sparse-dense search on a `dotproduct` index.

A memory's BM25 term weights are its sparse values, a query's words weigh KEYWORD_WEIGHT each,
and Pinecone adds their dot product to the cosine. See docs/backends.md, "Hybrid search".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any

from adapters.errors import BackendMisconfigured
from adapters.values import SparseVector

if TYPE_CHECKING:
    from adapters.pinecone.index_connection import PineconeConnection

KEYWORD_WEIGHT = 0.12


def sparse_values(vector: SparseVector | None, scale: float = 1.0) -> dict[str, Any] | None:
    """Pinecone's spelling of a keyword vector; None when it is empty (Pinecone refuses those)."""
    if vector is None or not vector.indices:
        return None
    return {"indices": list(vector.indices), "values": [scale * v for v in vector.values]}


def stored_sparse(metric: str | None, keywords: SparseVector | None) -> dict[str, Any] | None:
    """The sparse values to store with a memory: only a dotproduct index takes them."""
    return sparse_values(keywords) if metric == "dotproduct" else None


def keyword_score(query: SparseVector | None, stored: SparseVector | None) -> float:
    """What the sparse half of a Pinecone query adds to a memory's score (for the overlay)."""
    if query is None or stored is None:
        return 0.0
    weights = dict(zip(stored.indices, stored.values, strict=True))
    return KEYWORD_WEIGHT * sum(
        w * weights.get(i, 0.0) for i, w in zip(query.indices, query.values, strict=True)
    )


class PineconeKeywordIndex:
    """The adapter side of plugin/upgrades/keyword_upgrade.py, as far as Pinecone allows it."""

    def __init__(self, connection: PineconeConnection) -> None:
        self._connection = connection

    async def prepare_keywords(self, *, reset: bool = False) -> None:
        """A dotproduct index takes keyword vectors as memories are written; Pinecone can
        neither list the records without one nor drop them in place."""
        await self._connection.index()
        if self._connection.metric != "dotproduct":
            raise NotImplementedError("a cosine Pinecone index keeps no keyword vectors")
        if reset:
            raise BackendMisconfigured(
                "the Pinecone index holds keyword vectors of another encoder configuration and"
                " cannot re-index them in place: copy the memories into a new index with"
                " `memory-plugin-vector export` and `import`"
            )

    async def unindexed_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        return [], None  # not findable on Pinecone (module docstring)

    async def index_keywords(self, items: Sequence[tuple[str, SparseVector]]) -> int:
        """Never asked: `unindexed_memories` finds nothing to index."""
        raise NotImplementedError("the pinecone backend indexes keyword vectors as it writes")
