"""The keyword and token index of the `collections` layout: every namespace collection.

Parts of `QdrantCollectionsBackend` (namespace_collections.py); their walk for memories without a
vector (`Walk`) goes collection by collection in name order.
"""

from __future__ import annotations

from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Sequence
from typing import TypeVar

from adapters.qdrant.server import keyword_vectors
from adapters.qdrant.server import token_vectors
from adapters.qdrant.server.connection import Call
from adapters.qdrant.server.connection import CollectionMissing
from adapters.qdrant.server.keyword_vectors import Page
from adapters.qdrant.server.namespace_collections_records import CollectionNamespaces
from adapters.values import SparseVector
from adapters.values import TokenVectors

T = TypeVar("T")
V = TypeVar("V")
PageOf = Callable[[Call, str, str | None, int], Awaitable[Page]]
Fill = Callable[[Call, str, Sequence[tuple[str, V]]], Awaitable[None]]


class CollectionsKeywordIndex:
    """`prepare_keywords`, `unindexed_memories` and `index_keywords` per collection."""

    def __init__(self, collections: CollectionNamespaces) -> None:
        self._collections = collections

    async def prepare_keywords(self, *, reset: bool = False) -> None:
        """Every namespace collection gets its keyword vector (`reset`: dropped first)."""
        for collection in await self._collections.namespace_collections():
            info = await self._collections.info(collection)
            if info is None:
                continue
            if reset and keyword_vectors.has_keyword_vector(info):
                await keyword_vectors.drop_keyword_vector(self._collections.call, collection)
            elif not keyword_vectors.has_keyword_vector(info):
                await keyword_vectors.add_keyword_vector(self._collections.call, collection)

    async def unindexed_memories(self, cursor: str | None, limit: int) -> Page:
        return await walk(self._collections, keyword_vectors.unindexed_page, cursor, limit)

    async def index_keywords(self, items: Sequence[tuple[str, SparseVector]]) -> int:
        return await fill(self._collections, keyword_vectors.index_page, items)


class CollectionsTokenIndex:
    """`prepare_tokens`, `untokenized_memories` and `index_tokens` per collection."""

    def __init__(self, collections: CollectionNamespaces) -> None:
        self._collections = collections

    async def prepare_tokens(self) -> None:
        """Every namespace collection gets its token vectors' multivector, in place."""
        for collection in await self._collections.namespace_collections():
            info = await self._collections.info(collection)
            if info is not None:
                call, dimension = self._collections.call, self._collections.token_dimension
                await token_vectors.ensure_token_vector(call, collection, dimension, info)

    async def untokenized_memories(self, cursor: str | None, limit: int) -> Page:
        return await walk(self._collections, token_vectors.untokenized_page, cursor, limit)

    async def index_tokens(self, items: Sequence[tuple[str, TokenVectors]]) -> int:
        return await fill(self._collections, token_vectors.index_page, items)


async def walk(
    namespaces: CollectionNamespaces, page_of: PageOf, cursor: str | None, limit: int
) -> Page:
    """A page of `page_of` (memories lacking a vector), collection by collection in name
    order; keys name the collection too."""
    collections = await namespaces.namespace_collections()
    if cursor is None:
        collection, offset = (collections[0] if collections else None), None
    else:
        collection, offset = keyword_vectors.parse_cursor(cursor)
        if collection not in collections:  # deleted meanwhile: on to the next one
            collection, offset = _after(collections, collection), None
    if collection is None:
        return [], None
    try:
        page, after = await page_of(namespaces.call, collection, offset, limit)
    except CollectionMissing:  # deleted meanwhile: on to the next one
        page, after = [], None
    keyed = [(keyword_vectors.cursor(collection, key), content) for key, content in page]
    if after is not None:
        return keyed, keyword_vectors.cursor(collection, after)
    following = _after(collections, collection)
    return keyed, None if following is None else keyword_vectors.cursor(following, None)


async def fill(
    namespaces: CollectionNamespaces, fill_page: Fill[V], items: Sequence[tuple[str, V]]
) -> int:
    """Give the keyed memories their vectors, a request per collection; how many."""
    by_collection: dict[str, list[tuple[str, V]]] = {}
    for key, value in items:
        collection, point_id = keyword_vectors.parse_cursor(key)
        if point_id is not None:
            by_collection.setdefault(collection, []).append((point_id, value))
    for collection, page in by_collection.items():
        try:
            await fill_page(namespaces.call, collection, page)
        except CollectionMissing:
            continue
    return len(items)


def _after(collections: list[str], collection: str) -> str | None:
    """The first of the (sorted) `collections` after `collection`."""
    return next((name for name in collections if name > collection), None)
