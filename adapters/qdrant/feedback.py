"""Keyword feedback: the BM25 query widened by the first results' words.

RM3-style pseudo-relevance feedback with no model call: the first fused ranking's top
FEEDBACK_DOCS memories lend their stored keyword vectors; each term's weight across them is
the sum of its BM25 document weights times its IDF (the store's own, asked of the engine:
edge/search_passes.py); the FEEDBACK_TERMS heaviest terms join the query, each at
FEEDBACK_WEIGHT x (its weight / the heaviest term's), added to the query's own weight of 1
where the term is already asked for. The store then applies IDF to the widened query as to
any other, and the fused score is computed again with it. Why: a question rarely shares all
its words with its answer, but the memories it matches best tend to use the answer's words.
Why these constants: docs/backends.md, "Keyword feedback".
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
