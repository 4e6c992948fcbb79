"""Keyword vectors on a Qdrant server, for both layouts: how they are spelt, created and filled.

The sparse vector `keywords` (IDF modifier), added in place to a collection without it and filled
by plugin/upgrades/vector_fill.py; a point's vectors by name. See docs/backends.md, "Hybrid search".
"""

from __future__ import annotations

from collections.abc import Sequence

from qdrant_client.http import models

from adapters.errors import BackendError
from adapters.errors import BackendMisconfigured
from adapters.qdrant import wordpieces
from adapters.qdrant.ranking import KEYWORDS_VECTOR
from adapters.qdrant.ranking import TOKENS_VECTOR
from adapters.qdrant.server.client_requests import DENSE
from adapters.qdrant.server.client_requests import sparse
from adapters.qdrant.server.connection import Call
from adapters.qdrant.server.connection import CollectionMissing
from adapters.qdrant.wordpieces import WORDPIECES_VECTOR
from adapters.values import FillVector
from adapters.values import SparseVector
from adapters.values import TokenVectors
from adapters.values import float_rows

# A sparse vector whose IDF the engine applies: the keyword vector's, and the wordpieces'.
IDF_SPARSE = models.SparseVectorParams(modifier=models.Modifier.IDF)
KEYWORD_VECTORS = {KEYWORDS_VECTOR: IDF_SPARSE}
PointVectors = dict[str, models.Vector]  # a point's vectors by name
NEW_IDF_SPARSE = models.SparseVectorNameConfig(
    sparse=models.SparseVectorConfig(modifier=models.Modifier.IDF)
)


def point_vector(
    dense: Sequence[float], keywords: SparseVector | None, tokens: TokenVectors | None = None
) -> PointVectors:
    """A point's vectors by name: the unnamed dense one ("") and, when computed, the keyword
    vector and the token vectors. Always by name: a collection with named vectors (the
    token vectors') refuses a bare list in qdrant-client's local mode."""
    vectors: PointVectors = {DENSE: [float(x) for x in dense]}
    if keywords is not None:
        vectors[KEYWORDS_VECTOR] = sparse(keywords)
    if tokens is not None:
        vectors.update(token_vectors(tokens))
    return vectors


def token_vectors(tokens: TokenVectors) -> PointVectors:
    """A memory's token vectors and, where they carry their ids, its wordpieces
    (adapters/qdrant/wordpieces.py)."""
    vectors: PointVectors = {TOKENS_VECTOR: float_rows(tokens)}
    if (pieces := wordpieces.document(tokens)) is not None:
        vectors[WORDPIECES_VECTOR] = sparse(pieces)
    return vectors


def fill_vectors(vector: FillVector) -> PointVectors:
    """What the fill writes for `vector`: a keyword vector, or token vectors (`token_vectors`)."""
    if isinstance(vector, SparseVector):
        return {KEYWORDS_VECTOR: sparse(vector)}
    return token_vectors(vector)


def dense_of(point: models.Record) -> list[float] | None:
    """The stored dense vector of a point read with its vectors; None if it has none."""
    raw: object = point.vector
    if isinstance(raw, dict):
        raw = raw.get(DENSE)
    if not isinstance(raw, list) or not raw:
        return None
    values = [float(x) for x in raw if isinstance(x, int | float)]
    return values if len(values) == len(raw) else None


def has_keyword_vector(info: models.CollectionInfo) -> bool:
    return KEYWORDS_VECTOR in (info.config.params.sparse_vectors or {})


async def add_vector(
    call: Call, collection: str, name: str, config: models.VectorNameConfig, too_old: str
) -> None:
    """Add the vector `name` to an existing collection, in place (Qdrant 1.18+; before,
    `too_old` with the collection's name ends the boot); one a racing replica added is fine."""
    try:
        await call(lambda c: c.create_vector_name(collection, name, config))
    except CollectionMissing as exc:  # the route is unknown to a server before 1.18
        raise BackendMisconfigured(too_old.format(collection)) from exc
    except BackendError as exc:  # added meanwhile by a racing replica
        if "already exists" not in str(exc):
            raise


_NEW_KEYWORDS_LINE = (
    "qdrant cannot add the keyword vector to collection {} in place (needs Qdrant 1.18 or"
    " later): upgrade Qdrant, or copy the store into a new one with `memory-plugin-vector"
    " export` and `import`"
)


async def add_keyword_vector(call: Call, collection: str) -> None:
    await add_vector(call, collection, KEYWORDS_VECTOR, NEW_IDF_SPARSE, _NEW_KEYWORDS_LINE)


async def drop_keyword_vector(call: Call, collection: str) -> None:
    """Drop every keyword vector of the collection and add the (empty) vector again."""
    await call(lambda c: c.delete_vector_name(collection, KEYWORDS_VECTOR))
    await add_keyword_vector(call, collection)
