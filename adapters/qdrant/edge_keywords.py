"""The embedded store's keyword index: give memories stored without one their keyword vector.

A mixin of `QdrantEdgeBackend` (edge.py), driven by plugin/keyword_index.py.
Memories written before keyword vectors existed, or imported without them, are
found by "has no keyword vector" and given one in place (`update_vectors`: the
dense vector and payload stay), a page per engine call on a worker thread, so
the store keeps serving. The write carries the same condition, so a memory
rewritten since it was listed keeps the keyword vector of its new content.
Nothing here is lost to `kill -9`: the state is the stored vectors themselves.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import qdrant_edge as qe

from adapters.base import SparseVector
from adapters.qdrant.edge_shard import add_keyword_vector, drop_keyword_vector, sparse
from adapters.qdrant.ranking import KEYWORDS_VECTOR

if TYPE_CHECKING:
    from adapters.qdrant.edge_calls import EngineCalls

_UNINDEXED = qe.Filter(must_not=[qe.HasVectorCondition(KEYWORDS_VECTOR)])


class EdgeKeywordIndex:
    """`prepare_keywords`, `unindexed_memories` and `index_keywords` for the embedded store."""

    if TYPE_CHECKING:  # provided by QdrantEdgeBackend
        _calls: EngineCalls

        def _update(self, operation: Any) -> None: ...
        def _shard_or_fail(self) -> Any: ...

    async def prepare_keywords(self, *, reset: bool = False) -> None:
        await self._calls.worker(self._prepare_keywords, reset)

    def _prepare_keywords(self, reset: bool) -> None:
        shard = self._shard_or_fail()
        if reset:
            drop_keyword_vector(shard)
        else:
            add_keyword_vector(shard)

    async def unindexed_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        offset = None if cursor is None else uuid.UUID(cursor)
        request = qe.ScrollRequest(
            offset=offset, limit=limit, filter=_UNINDEXED, with_payload=["content"]
        )
        page, after = await self._calls.worker(lambda: self._shard_or_fail().scroll(request))
        found = [
            (str(point.id), content)
            for point in page
            if isinstance(content := (point.payload or {}).get("content"), str)
        ]
        return found, None if after is None else str(after)

    async def index_keywords(self, items: Sequence[tuple[str, SparseVector]]) -> int:
        if not items:
            return 0
        await self._calls.worker(self._index, list(items))
        return len(items)

    def _index(self, items: list[tuple[str, SparseVector]]) -> None:
        """One update for the page. A point deleted since it was listed makes the engine
        refuse the whole update: then once more without the gone (as a server's, in
        server_keywords.index_page)."""
        vectors = [qe.PointVectors(key, {KEYWORDS_VECTOR: sparse(v)}) for key, v in items]
        try:
            self._update(qe.UpdateOperation.update_vectors(vectors, condition=_UNINDEXED))
        except Exception:
            ids = [key for key, _ in items]
            found = self._shard_or_fail().retrieve(ids, with_payload=False, with_vector=False)
            present = {str(point.id) for point in found}
            remaining = [vector for vector in vectors if str(vector.id) in present]
            if len(remaining) == len(vectors):
                raise
            if remaining:
                self._update(qe.UpdateOperation.update_vectors(remaining, condition=_UNINDEXED))
