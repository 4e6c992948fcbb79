"""`VectorFill` on a Qdrant server (adapters/parts.py), for both layouts.

A memory without vectors of a kind lacks the vector it is found by (`wordpieces.FOUND_BY`); the
walk (adapters/walk.py) is over the layout's memory collections: the shared layout's one, or the
`collections` layout's namespace collections.
"""

from __future__ import annotations

from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass

from qdrant_client.http import models

from adapters.errors import BackendError
from adapters.qdrant.server import keyword_vectors
from adapters.qdrant.server import token_vectors
from adapters.qdrant.server.connection import Call
from adapters.qdrant.server.connection import CollectionMissing
from adapters.qdrant.wordpieces import FOUND_BY
from adapters.values import FillVector
from adapters.values import VectorKind
from adapters.walk import Page
from adapters.walk import by_place
from adapters.walk import walk


def _lacking(kind: VectorKind) -> models.Filter:
    return models.Filter(must_not=[models.HasVectorCondition(has_vector=FOUND_BY[kind])])


@dataclass(frozen=True, slots=True)
class ServerVectorFill:
    """The fill of the layout's memory `collections`, walked in name order: a collection
    deleted meanwhile has nothing to fill."""

    call: Call
    collections: Callable[[], Awaitable[list[str]]]
    token_dimension: int

    async def prepare(self, kind: VectorKind, *, reset: bool = False) -> None:
        """Each collection gets its vectors of `kind` where it lacks them (`reset`: every
        keyword vector dropped first); token vectors of another shape make way
        (token_vectors.py)."""
        for collection in await self.collections():
            try:
                info = await self._info(collection)
            except CollectionMissing:
                continue
            keywords = keyword_vectors.has_keyword_vector(info)
            if kind is VectorKind.TOKENS:
                dimension = self.token_dimension
                await token_vectors.ensure_token_vector(self.call, collection, dimension, info)
            elif reset and keywords:
                await keyword_vectors.drop_keyword_vector(self.call, collection)
            elif not keywords:
                await keyword_vectors.add_keyword_vector(self.call, collection)

    async def _info(self, collection: str) -> models.CollectionInfo:
        return await self.call(lambda c: c.get_collection(collection))

    async def missing(self, kind: VectorKind, cursor: str | None, limit: int) -> Page[str]:
        """(point id, content) of points without vectors of `kind`, a page at a time."""
        wanted = _lacking(kind)

        async def page(collection: str, offset: str | None) -> Page[str]:
            try:
                points, after = await self.call(
                    lambda c: c.scroll(
                        collection, wanted, limit, offset=offset, with_payload=["content"]
                    )
                )
            except CollectionMissing:
                return [], None
            found = [
                (str(point.id), content)
                for point in points
                if isinstance(content := (point.payload or {}).get("content"), str)
            ]
            return found, None if after is None else str(after)

        return await walk(await self.collections(), cursor, page)

    async def fill(self, kind: VectorKind, items: Sequence[tuple[str, FillVector]]) -> int:
        for collection, found in by_place(items).items():
            try:
                await self.fill_page(collection, kind, found)
            except CollectionMissing:
                continue
        return len(items)

    async def fill_page(
        self, collection: str, kind: VectorKind, items: Sequence[tuple[str, FillVector]]
    ) -> None:
        """Set the vectors of `kind` of the points still without, in one request: a point
        rewritten since it was listed keeps its new content's. A point deleted since makes the
        server refuse the whole request: then once more without the gone."""
        vectors = [
            models.PointVectors(id=point_id, vector=keyword_vectors.fill_vectors(vector))
            for point_id, vector in items
        ]
        unset = _lacking(kind)
        try:
            await self.call(lambda c: c.update_vectors(collection, vectors, update_filter=unset))
        except BackendError:
            ids: list[models.ExtendedPointId] = [vector.id for vector in vectors]
            found = await self.call(lambda c: c.retrieve(collection, ids, with_payload=False))
            present = {str(point.id) for point in found}
            remaining = [vector for vector in vectors if str(vector.id) in present]
            if len(remaining) == len(vectors):
                raise
            if remaining:
                await self.call(
                    lambda c: c.update_vectors(collection, remaining, update_filter=unset)
                )
