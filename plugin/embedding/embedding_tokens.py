"""A sentence vector with the token vectors the same model call computed.

The model computes a vector for every token of a text and pooling throws them away;
kept, normalised and without the special tokens ([CLS], [SEP], padding), they let the
store rerank by late interaction (MaxSim, docs/backends.md "Reranking by token
vectors") at no second model call. An `Embedding` is the sentence vector itself (a
list of floats, so the batcher and every caller of the sentence vector are unchanged)
carrying its token vectors beside it. A model whose sentence vector is not a token
vector's size (several pooling modes concatenated) keeps none: the store's multivector
has the sentence vector's size.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

TokenVectors = list[list[float]]
# What one memory keeps: the model truncates there anyway (all-MiniLM-L6-v2's
# max_seq_length), so the bound is the model's and costs no recall.
MAX_TOKENS = 256


class Embedding(list[float]):
    """A sentence vector; `tokens` holds its token vectors (None: not computed)."""

    __slots__ = ("tokens",)

    def __init__(self, vector: Sequence[float], tokens: TokenVectors | None = None) -> None:
        super().__init__(vector)
        self.tokens = tokens


def tokens_of(vector: Sequence[float]) -> TokenVectors | None:
    """The token vectors computed with `vector`; None for a vector read back from a store."""
    return vector.tokens if isinstance(vector, Embedding) else None


def token_rows(hidden: np.ndarray, keep: np.ndarray) -> list[TokenVectors]:
    """Per text, its kept tokens' vectors, each of unit length (at most `MAX_TOKENS`).

    `hidden` is (texts, tokens, dimension); `keep` is 1 where a token is a real,
    non-special one.
    """
    norms = np.clip(np.linalg.norm(hidden, axis=2, keepdims=True), 1e-12, None)
    unit = (hidden / norms).astype(np.float32)
    found: list[TokenVectors] = []
    for row, kept in zip(unit, keep.astype(bool), strict=True):
        rows = row[kept][:MAX_TOKENS]
        if not len(rows):  # an empty text: its one vector is the sentence's (never empty)
            rows = row[:1]
        found.append(rows.tolist())
    return found
