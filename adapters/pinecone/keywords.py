"""Keyword vectors on Pinecone: sparse-dense search on a `dotproduct` index.

A memory's BM25 term weights are its sparse values, a query's words weigh KEYWORD_WEIGHT each,
and Pinecone adds their dot product to the cosine. See docs/backends.md, "Hybrid search".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any

from adapters.errors import BackendMisconfigured
from adapters.values import FillVector
from adapters.values import SparseVector
from adapters.values import VectorKind

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


class PineconeVectorFill:
    """`VectorFill` as far as Pinecone allows: keyword vectors only, on a dotproduct index,
    as memories are written; Pinecone can neither list the records without one nor drop
    them in place."""

    def __init__(self, connection: PineconeConnection) -> None:
        self._connection = connection

    async def prepare(self, kind: VectorKind, *, reset: bool = False) -> None:
        await self._connection.index()
        if kind is not VectorKind.KEYWORDS or self._connection.metric != "dotproduct":
            raise NotImplementedError(f"this Pinecone index keeps no {kind} vectors")
        if reset:
            raise BackendMisconfigured(
                "the Pinecone index holds keyword vectors of another encoder configuration and"
                " cannot re-index them in place: copy the memories into a new index with"
                " `memory-plugin-vector export` and `import`"
            )

    async def missing(
        self, kind: VectorKind, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        return [], None  # not findable on Pinecone

    async def fill(self, kind: VectorKind, items: Sequence[tuple[str, FillVector]]) -> int:
        """Never asked: `missing` finds nothing to fill."""
        raise NotImplementedError("the pinecone backend writes keyword vectors as it writes")
