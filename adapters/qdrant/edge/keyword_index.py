"""The embedded store's keyword index: give memories stored without one their keyword vector.

A part of `QdrantEdgeBackend` (backend.py), driven by plugin/embedding/keyword_index.py.
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

import qdrant_edge as qe

from adapters.qdrant.edge.engine import add_keyword_vector, drop_keyword_vector, sparse
from adapters.qdrant.edge.store import EdgeStore
from adapters.qdrant.ranking import KEYWORDS_VECTOR
from adapters.values import SparseVector

_UNINDEXED = qe.Filter(must_not=[qe.HasVectorCondition(KEYWORDS_VECTOR)])


class EdgeKeywordIndex:
    """`prepare_keywords`, `unindexed_memories` and `index_keywords` for the embedded store.

    Every open shard in turn: a cursor is "<shard>:<point id or nothing>", a key
    "<shard>/<point id>" (both opaque to the plugin)."""

    def __init__(self, store: EdgeStore) -> None:
        self._store = store

    async def prepare_keywords(self, *, reset: bool = False) -> None:
        await self._store.calls.worker(self._prepare_keywords, reset)

    def _prepare_keywords(self, reset: bool) -> None:
        for shard in self._store.shards.open_shards():
            if reset:
                drop_keyword_vector(shard)
            else:
                add_keyword_vector(shard)

    async def unindexed_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        index, _, after = (cursor or "0:").partition(":")
        return await self._store.calls.worker(self._unindexed, int(index), after or None, limit)

    def _unindexed(
        self, index: int, after: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        shards = self._store.shards.shards
        while index < len(shards) and shards[index] is None:
            index, after = index + 1, None  # not open (absent, damaged): nothing to index
        if index >= len(shards):
            return [], None
        offset = None if after is None else uuid.UUID(after)
        request = qe.ScrollRequest(
            offset=offset, limit=limit, filter=_UNINDEXED, with_payload=["content"]
        )
        shard = shards[index]
        assert shard is not None  # skipped above
        page, following = shard.scroll(request)
        found = [
            (f"{index}/{point.id}", content)
            for point in page
            if isinstance(content := (point.payload or {}).get("content"), str)
        ]
        if following is not None:
            return found, f"{index}:{following}"
        return found, f"{index + 1}:" if index + 1 < len(shards) else None

    async def index_keywords(self, items: Sequence[tuple[str, SparseVector]]) -> int:
        if not items:
            return 0
        by_shard: dict[int, list[tuple[str, SparseVector]]] = {}
        for key, vector in items:
            shard_index, _, point = key.partition("/")
            by_shard.setdefault(int(shard_index), []).append((point, vector))
        for index, found in by_shard.items():
            await self._store.calls.worker(self._index, index, found)
        return len(items)

    def _index(self, index: int, items: list[tuple[str, SparseVector]]) -> None:
        """One update for the page. A point deleted since it was listed makes the engine
        refuse the whole update: then once more without the gone (as a server's, in
        server/keyword_vectors.index_page)."""
        shard = self._store.shards.shards[index]
        if shard is None:
            return
        vectors = [qe.PointVectors(key, {KEYWORDS_VECTOR: sparse(v)}) for key, v in items]
        try:
            self._store.update(
                shard, qe.UpdateOperation.update_vectors(vectors, condition=_UNINDEXED)
            )
        except Exception:
            ids = [key for key, _ in items]
            found = shard.retrieve(ids, with_payload=False, with_vector=False)
            present = {str(point.id) for point in found}
            remaining = [vector for vector in vectors if str(vector.id) in present]
            if len(remaining) == len(vectors):
                raise
            if remaining:
                self._store.update(
                    shard, qe.UpdateOperation.update_vectors(remaining, condition=_UNINDEXED)
                )
