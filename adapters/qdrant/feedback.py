"""Keyword feedback: the BM25 query widened by the first results' words.

RM3-style pseudo-relevance feedback with no model call: the best first results lend the query
their heaviest terms. How, and why these constants: docs/backends.md, "Keyword feedback".
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence

from adapters.values import SparseVector

FEEDBACK_DOCS = 3
FEEDBACK_TERMS = 20
FEEDBACK_WEIGHT = 0.3


def term_weights(documents: Sequence[SparseVector]) -> dict[int, float]:
    """Each term's BM25 document weight summed over `documents` (no IDF yet)."""
    summed: dict[int, float] = {}
    for vector in documents:
        for index, value in zip(vector.indices, vector.values, strict=True):
            summed[index] = summed.get(index, 0.0) + value
    return summed


def expanded(
    query: SparseVector, weighted: Mapping[int, float], terms: int | None = None
) -> SparseVector:
    """`query` with the `terms` (FEEDBACK_TERMS) heaviest of `weighted` (term -> its
    IDF-weighted weight) added.

    Ties break on the token id, so the expansion is deterministic; terms of no
    weight (IDF 0, or absent from the store) are never added.
    """
    ranked = sorted(
        ((weight, index) for index, weight in weighted.items() if weight > 0),
        key=lambda pair: (-pair[0], pair[1]),
    )[: FEEDBACK_TERMS if terms is None else terms]
    if not ranked:
        return query
    top = ranked[0][0]
    widened = dict(zip(query.indices, query.values, strict=True))
    for weight, index in ranked:
        widened[index] = widened.get(index, 0.0) + FEEDBACK_WEIGHT * weight / top
    return SparseVector(tuple(widened), tuple(widened.values()))
