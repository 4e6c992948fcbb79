"""A text's sentence vector and the token vectors the same model call computed.

Kept, they let the store rerank by late interaction at no second model call; see
docs/backends.md, "Reranking by token vectors".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from adapters.values import PackedTokens
from adapters.values import TokenVectors

# What one memory keeps: the model truncates there anyway (all-MiniLM-L6-v2's
# max_seq_length), so the bound is the model's and costs no recall.
MAX_TOKENS = 256


# Whose token vectors to compute: every text's (True), none (False), or each text's own.
Wanted = bool | Sequence[bool]


def wanted_tokens(tokens: Wanted, count: int) -> list[bool]:
    """`tokens` for each of `count` texts."""
    return [tokens] * count if isinstance(tokens, bool) else list(tokens)


@dataclass(frozen=True, slots=True)
class Embedding:
    """One text's sentence vector and its token vectors (None: not computed)."""

    vector: list[float]
    tokens: TokenVectors | None = None


def token_rows(
    hidden: np.ndarray, keep: np.ndarray, ids: np.ndarray, projection: np.ndarray | None = None
) -> list[TokenVectors]:
    """Per text, its kept tokens' unit vectors (at most `MAX_TOKENS`), with their vocabulary
    `ids` (texts by tokens). `hidden`: texts by tokens by dimension; `keep`: 1 for a real,
    non-special token; `projection` (token_projection.py) is applied before normalising,
    which gives the same unit vectors."""
    if projection is not None:  # one product over every row: numpy's 3-d matmul is one per text
        texts, length, dimension = hidden.shape
        hidden = (hidden.reshape(-1, dimension) @ projection).reshape(texts, length, -1)
    norms = np.clip(np.linalg.norm(hidden, axis=2, keepdims=True), 1e-12, None)
    unit = (hidden / norms).astype(np.float32)
    found: list[TokenVectors] = []
    for row, kept, row_ids in zip(unit, keep.astype(bool), ids, strict=True):
        rows, kept_ids = row[kept][:MAX_TOKENS], row_ids[kept][:MAX_TOKENS]
        if not len(rows):  # an empty text: its one vector is the sentence's (never empty)
            rows, kept_ids = row[:1], row_ids[:1]
        found.append(PackedTokens(rows, kept_ids))
    return found
