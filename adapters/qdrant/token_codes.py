"""Token vectors as one byte a number: a `Uint8` multivector whose MaxSim is float MaxSim's.

A component `x` is kept as `round(scale * x) + 127`; `EXTRA` numbers a stored row and
`CodedQuery.max_sim` take off what that adds. See docs/backends.md, "Reranking by token vectors".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from adapters.values import PackedTokens
from adapters.values import TokenVectors

TOKEN_CODES_VECTOR = "token_codes"
EXTRA = 16
SPREAD = 8.0
_MID = 127
_TOP = 2 * _MID


def code_dimension(dimension: int) -> int:
    """The stored rows' length for token vectors of `dimension`."""
    return dimension + EXTRA


def scale(dimension: int) -> float:
    """Bytes per unit of a component: the largest kept is min(1, SPREAD / √dimension)."""
    return _MID / min(1.0, SPREAD / math.sqrt(dimension))


def _signed(tokens: TokenVectors) -> tuple[np.ndarray, float]:
    array = tokens.array() if isinstance(tokens, PackedTokens) else np.asarray(tokens, np.float32)
    factor = scale(array.shape[1])
    signed: np.ndarray = np.clip(np.rint(array * factor), -_MID, _MID).astype(np.int64)
    return signed, factor


def encoded(tokens: TokenVectors) -> list[list[float]]:
    """A memory's token vectors as stored: each row's bytes, as numbers (the engine's input)."""
    signed, _ = _signed(tokens)
    need = np.clip(_MID * EXTRA - signed.sum(axis=1), 0, _TOP * EXTRA)
    extra = np.repeat((need // EXTRA)[:, None], EXTRA, axis=1)
    extra += np.arange(EXTRA)[None, :] < (need % EXTRA)[:, None]  # the remainder spread
    rows: list[list[float]] = np.concatenate([signed + _MID, extra], axis=1).tolist()
    return rows  # as ints: quicker to make than floats, and the engine takes either


@dataclass(frozen=True, slots=True)
class CodedQuery:
    """A query's token vectors as bytes, and how to read a MaxSim the engine gives for them."""

    rows: list[list[float]]
    offset: float
    scale: float

    def max_sim(self, score: float) -> float:
        """The engine's MaxSim over coded rows as the MaxSim of the token vectors themselves."""
        return (score - self.offset) / (self.scale * self.scale)


def encoded_query(tokens: TokenVectors) -> CodedQuery:
    """A query's token vectors as bytes, each row with `EXTRA` numbers of 127."""
    signed, factor = _signed(tokens)
    rows = np.concatenate([signed + _MID, np.full((len(signed), EXTRA), _MID)], axis=1)
    width = signed.shape[1] + EXTRA
    offset = float(_MID * signed.sum() + len(signed) * _MID * _MID * width)
    return CodedQuery(rows.tolist(), offset, factor)
