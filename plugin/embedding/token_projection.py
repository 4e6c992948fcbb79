"""A fixed linear map of the model's token vectors to fewer dimensions, shipped per model.

The map (`projections/<model>.npy`) keeps the rerank's recall at a fraction of the disk; a model
without one keeps its token vectors whole. See docs/backends.md, "Reranking by token vectors".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from threadpoolctl import ThreadpoolController

PROJECTIONS = Path(__file__).with_name("projections")


def projection_file(model: str) -> Path:
    """Where the map of model `model` (its name, as in the fingerprint) lies."""
    return PROJECTIONS / f"{model}.npy"


def load_projection(model: str, dimension: int) -> np.ndarray | None:
    """The map of `model`'s token vectors of `dimension` numbers (dimension by projected),
    or None where none ships or it is for another size."""
    matrix = _shipped(model, dimension)
    if matrix is None:
        return None
    one_blas_thread()
    return np.array(matrix, dtype=np.float32)


def _shipped(model: str, dimension: int) -> np.ndarray | None:
    """The map's file mapped, numbers unread (its header says the shape), or None where none
    ships or it is for another size."""
    path = projection_file(model)
    if not path.is_file():
        return None
    matrix: np.ndarray = np.load(path, mmap_mode="r")
    if matrix.ndim != 2 or matrix.shape[0] != dimension or matrix.shape[1] >= dimension:
        return None
    return matrix


def one_blas_thread() -> None:
    """numpy's OpenBLAS on the calling thread alone, for the rest of the process (torch's
    own BLAS, the `torch` backend's, is left as it is)."""
    ThreadpoolController().select(internal_api="openblas").limit(limits=1)


def projected_dimension(model: str, dimension: int) -> int:
    """The size of `model`'s stored token vectors: the map's, or the model's own (read from
    the map's header: nothing loaded, numpy's threads left as they are)."""
    return token_dimension(dimension, _shipped(model, dimension))


def token_dimension(dimension: int, projection: np.ndarray | None) -> int:
    """The size of each token vector kept: the projection's, or the model's."""
    return dimension if projection is None else int(projection.shape[1])
