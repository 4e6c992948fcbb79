"""Keyword vectors on Pinecone: sparse-dense search on a `dotproduct` index.

A memory's BM25 term weights are its sparse values, a query's words weigh KEYWORD_WEIGHT each,
and Pinecone adds their dot product to the cosine. See docs/backends.md, "Hybrid search".
"""

from __future__ import annotations

from typing import Any

from adapters.values import SparseVector

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
