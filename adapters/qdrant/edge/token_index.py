"""The embedded store's token index: give memories stored without them their token vectors.

A part of `QdrantEdgeBackend` (backend.py; `adapters.token_index.TokenIndex`), driven
by plugin/embedding/token_index.py, as keyword_index.py is for keyword vectors:
memories are found by "has no token vectors" and given them in place
(`update_vectors`: the sentence vector, keyword vector and payload stay), a page per
engine call on a worker thread. The write carries the same condition, so a memory
rewritten since it was listed keeps the token vectors of its new content.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import qdrant_edge as qe

from adapters.base import TokenVectors
from adapters.qdrant.edge.engine import add_token_vector
from adapters.qdrant.edge.store import EdgeStore
from adapters.qdrant.ranking import TOKENS_VECTOR

_UNINDEXED = qe.Filter(must_not=[qe.HasVectorCondition(TOKENS_VECTOR)])


class EdgeTokenIndex:
    """Every open shard in turn: a cursor is "<shard>:<point id or nothing>", a key
    "<shard>/<point id>" (both opaque to the plugin)."""

    def __init__(self, store: EdgeStore, dimension: int) -> None:
        self._store = store
        self._dimension = dimension

    async def prepare_tokens(self) -> None:
        def prepare() -> None:
            for shard in self._store.shards.open_shards():
                add_token_vector(shard, self._dimension)

        await self._store.calls.worker(prepare)

    async def untokenized_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        index, _, after = (cursor or "0:").partition(":")
        return await self._store.calls.worker(self._page, int(index), after or None, limit)

    def _page(
        self, index: int, after: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        shards = self._store.shards.shards
        while index < len(shards) and shards[index] is None:
            index, after = index + 1, None  # not open (absent, damaged): nothing to fill
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

    async def index_tokens(self, items: Sequence[tuple[str, TokenVectors]]) -> int:
        by_shard: dict[int, list[tuple[str, TokenVectors]]] = {}
        for key, vectors in items:
            shard_index, _, point = key.partition("/")
            by_shard.setdefault(int(shard_index), []).append((point, vectors))
        for index, found in by_shard.items():
            await self._store.calls.worker(self._index, index, found)
        return len(items)

    def _index(self, index: int, items: list[tuple[str, TokenVectors]]) -> None:
        """One update for the page; a point deleted since it was listed makes the engine
        refuse the whole update: then once more without the gone."""
        shard = self._store.shards.shards[index]
        if shard is None:
            return
        vectors = [
            qe.PointVectors(key, {TOKENS_VECTOR: [list(row) for row in rows]})
            for key, rows in items
        ]
        try:
            self._store.update(
                shard, qe.UpdateOperation.update_vectors(vectors, condition=_UNINDEXED)
            )
        except Exception:
            present = {
                str(point.id)
                for point in shard.retrieve(
                    [key for key, _ in items], with_payload=False, with_vector=False
                )
            }
            remaining = [vector for vector in vectors if str(vector.id) in present]
            if len(remaining) == len(vectors):
                raise
            if remaining:
                self._store.update(
                    shard, qe.UpdateOperation.update_vectors(remaining, condition=_UNINDEXED)
                )
