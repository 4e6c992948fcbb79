"""The rerank's weights: each query wordpiece by its rarity among the stored memories.

Each memory stores its wordpieces as a sparse vector with the engine's IDF modifier; a search
scales each query row by its IDF. See docs/backends.md, "Weighing query tokens by rarity".
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from adapters.qdrant.ranking import KEYWORDS_VECTOR
from adapters.values import PackedTokens
from adapters.values import SparseVector
from adapters.values import TokenVectors
from adapters.values import VectorKind
from adapters.values import wordpiece_ids

WORDPIECES_VECTOR = "wordpieces"
# The vector a memory without vectors of each kind lacks, for the fill to find it by. The
# wordpieces are written with the token vectors: a store whose token vectors predate
# wordpieces gains both.
FOUND_BY = {VectorKind.KEYWORDS: KEYWORDS_VECTOR, VectorKind.TOKENS: WORDPIECES_VECTOR}


def document(tokens: TokenVectors) -> SparseVector | None:
    """A memory's wordpieces as stored: each distinct id once, at 1.0; None without ids."""
    ids = wordpiece_ids(tokens)
    if ids is None:
        return None
    distinct = tuple(int(i) for i in np.unique(ids))
    return SparseVector(distinct, (1.0,) * len(distinct))


def query_ids(tokens: TokenVectors) -> list[int]:
    """The distinct wordpieces whose IDF a query with `tokens` asks (none without ids)."""
    ids = wordpiece_ids(tokens)
    return [] if ids is None else [int(i) for i in np.unique(ids)]


@dataclass(frozen=True, slots=True)
class Weighed:
    """A query's token vectors as the engine is asked them, and the mean's divisor."""

    tokens: TokenVectors
    mass: float


def uniform(tokens: TokenVectors) -> Weighed:
    """Every row at full weight: MaxSim's plain mean."""
    return Weighed(tokens, float(len(tokens)))


def weighed(tokens: TokenVectors, idf: Mapping[int, float]) -> Weighed:
    """`tokens` with each row scaled by its wordpiece's IDF over the largest (`idf`: the
    store's, per id it holds); uniform where the rows carry no ids or no IDF is known."""
    known = [value for value in idf.values() if value > 0]
    if not isinstance(tokens, PackedTokens) or (ids := tokens.ids) is None or not known:
        return uniform(tokens)
    rarest = max(known)
    weights = np.array([idf.get(int(i), rarest) for i in ids], dtype=np.float32)
    scales = np.clip(weights / rarest, 0.0, 1.0)
    return Weighed(PackedTokens(tokens.array() * scales[:, None], ids), float(scales.sum()))


def averaged(answers: Sequence[Mapping[int, float]]) -> dict[int, float]:
    """Each id's IDF averaged over the shards (or collections) that answered for it."""
    summed: dict[int, list[float]] = {}
    for answer in answers:
        for key, value in answer.items():
            summed.setdefault(key, []).append(value)
    return {key: sum(values) / len(values) for key, values in summed.items()}
