"""Keyword vectors on a Qdrant server, for both layouts: how they are spelt, created and filled.

The sparse vector `keywords` (IDF modifier), added in place to a collection without it and filled
by plugin/upgrades/keyword_upgrade.py. See docs/backends.md, "Hybrid search".
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from qdrant_client.http import models

from adapters.errors import BackendError
from adapters.errors import BackendMisconfigured
from adapters.qdrant import wordpieces
from adapters.qdrant.ranking import KEYWORDS_VECTOR
from adapters.qdrant.ranking import TOKENS_VECTOR
from adapters.qdrant.server.client_ranking import sparse
from adapters.qdrant.server.connection import Call
from adapters.qdrant.server.connection import CollectionMissing
from adapters.qdrant.wordpieces import WORDPIECES_VECTOR
from adapters.values import SparseVector
from adapters.values import TokenVectors
from adapters.values import float_rows

# A sparse vector whose IDF the engine applies: the keyword vector's, and the wordpieces'.
IDF_SPARSE = models.SparseVectorParams(modifier=models.Modifier.IDF)
KEYWORD_VECTORS = {KEYWORDS_VECTOR: IDF_SPARSE}
PointVectors = dict[str, models.Vector]  # a point's vectors by name
# (key, content) of memories lacking a vector, and where the next page starts (None: no more)
Page = tuple[list[tuple[str, str]], str | None]


def lacking(name: str) -> models.Filter:
    """The points without a vector named `name`."""
    return models.Filter(must_not=[models.HasVectorCondition(has_vector=name)])


NEW_IDF_SPARSE = models.SparseVectorNameConfig(
    sparse=models.SparseVectorConfig(modifier=models.Modifier.IDF)
)


def point_vector(
    dense: Sequence[float], keywords: SparseVector | None, tokens: TokenVectors | None = None
) -> PointVectors:
    """A point's vectors by name: the unnamed dense one ("") and, when computed, the keyword
    vector and the token vectors. Always by name: a collection with named vectors (the
    token vectors') refuses a bare list in qdrant-client's local mode."""
    vectors: PointVectors = {"": [float(x) for x in dense]}
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


def dense_of(point: models.Record) -> list[float] | None:
    """The stored dense vector of a point read with its vectors; None if it has none."""
    raw: object = point.vector
    if isinstance(raw, dict):
        raw = raw.get("")
    if not isinstance(raw, list) or not raw:
        return None
    values = [float(x) for x in raw if isinstance(x, int | float)]
    return values if len(values) == len(raw) else None


def has_keyword_vector(info: models.CollectionInfo) -> bool:
    return KEYWORDS_VECTOR in (info.config.params.sparse_vectors or {})


async def add_keyword_vector(call: Call, collection: str) -> None:
    """Give an existing collection its keyword vector, in place (Qdrant 1.18+)."""
    try:
        await call(lambda c: c.create_vector_name(collection, KEYWORDS_VECTOR, NEW_IDF_SPARSE))
    except CollectionMissing as exc:  # the route is unknown to a server before 1.18
        raise BackendMisconfigured(
            f"qdrant cannot add the keyword vector to collection {collection} in place"
            " (needs Qdrant 1.18 or later): upgrade Qdrant, or copy the store into a new"
            " one with `memory-plugin-vector export` and `import`"
        ) from exc


async def drop_keyword_vector(call: Call, collection: str) -> None:
    """Drop every keyword vector of the collection and add the (empty) vector again."""
    await call(lambda c: c.delete_vector_name(collection, KEYWORDS_VECTOR))
    await add_keyword_vector(call, collection)


async def unindexed_page(
    call: Call,
    collection: str,
    offset: str | None,
    limit: int,
) -> Page:
    """(point id, content) of points without a keyword vector, and the next page's offset."""
    return await missing_page(call, collection, KEYWORDS_VECTOR, offset, limit)


async def missing_page(
    call: Call, collection: str, name: str, offset: str | None, limit: int
) -> Page:
    """(point id, content) of points without the vector `name`, and the next page's offset."""
    wanted = lacking(name)
    points, after = await call(
        lambda c: c.scroll(collection, wanted, limit, offset=offset, with_payload=["content"])
    )
    found = [
        (str(point.id), content)
        for point in points
        if isinstance(content := (point.payload or {}).get("content"), str)
    ]
    return found, None if after is None else str(after)


async def index_page(
    call: Call, collection: str, items: Sequence[tuple[str, SparseVector]]
) -> None:
    """Set the keyword vectors still missing, in one request (`fill_page`)."""
    vectors: list[tuple[str, PointVectors]] = [
        (point_id, {KEYWORDS_VECTOR: sparse(keywords)}) for point_id, keywords in items
    ]
    await fill_page(call, collection, KEYWORDS_VECTOR, vectors)


async def fill_page(
    call: Call, collection: str, name: str, items: Sequence[tuple[str, PointVectors]]
) -> None:
    """Set the vectors of the points still without one named `name` (it, and any written
    beside it), in one request: a point rewritten since it was listed keeps its new
    content's. A point deleted since makes the server refuse the whole request: then once
    more without the gone."""
    vectors = [models.PointVectors(id=point_id, vector=named) for point_id, named in items]
    unset = lacking(name)
    try:
        await _update(call, collection, vectors, unset)
    except BackendError:
        ids: list[models.ExtendedPointId] = [vector.id for vector in vectors]
        found = await call(lambda c: c.retrieve(collection, ids, with_payload=False))
        present = {str(point.id) for point in found}
        remaining = [vector for vector in vectors if str(vector.id) in present]
        if len(remaining) == len(vectors):
            raise
        if remaining:
            await _update(call, collection, remaining, unset)


async def _update(
    call: Call, collection: str, vectors: list[models.PointVectors], unset: models.Filter
) -> None:
    await call(lambda c: c.update_vectors(collection, vectors, update_filter=unset))


def cursor(collection: str, offset: str | None) -> str:
    """An opaque cursor for layouts that walk several collections."""
    return json.dumps([collection, offset])


def parse_cursor(text: str) -> tuple[str, str | None]:
    collection, offset = json.loads(text)
    return str(collection), None if offset is None else str(offset)
