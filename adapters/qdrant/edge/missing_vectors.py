"""The embedded store's keyword and token indexes: memories missing a vector, given it in place.

`EdgeKeywordIndex` (driven by plugin/upgrades/keyword_upgrade.py) and `EdgeTokenIndex`
(plugin/upgrades/token_upgrade.py) are parts of `QdrantEdgeBackend` (edge_backend.py).
Memories stored without the vector (imported without it, or in a shard that lacked it) are
listed shard by shard (a cursor is "<shard>:<point id or nothing>", a key "<shard>/<point id>",
both opaque to the plugin) and given it with `update_vectors` (everything else stays), a page
per engine call, so the store keeps serving. The write carries the same missing-vector
condition, so a memory rewritten since it was listed keeps the vector of its new content.
Nothing here is lost to `kill -9`: the state is the stored vectors themselves. A store of
another encoder's keyword vectors drops them first.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import TypeVar

import qdrant_edge as qe

from adapters.qdrant import token_codes
from adapters.qdrant.edge.engine import add_keyword_vector
from adapters.qdrant.edge.engine import add_token_vector
from adapters.qdrant.edge.engine import drop_keyword_vector
from adapters.qdrant.edge.engine import sparse
from adapters.qdrant.edge.store import EdgeStore
from adapters.qdrant.ranking import KEYWORDS_VECTOR
from adapters.qdrant.token_codes import TOKEN_CODES_VECTOR
from adapters.values import SparseVector
from adapters.values import TokenVectors

V = TypeVar("V")


class MissingVectors:
    """The memories of the store without the vector `name`."""

    def __init__(self, store: EdgeStore, name: str) -> None:
        self._store = store
        self._name = name
        self._missing = qe.Filter(must_not=[qe.HasVectorCondition(name)])

    async def page(
        self, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        """Up to `limit` of them as (key, content), and the cursor of the next page."""
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
            offset=offset, limit=limit, filter=self._missing, with_payload=["content"]
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

    async def fill(self, items: Sequence[tuple[str, V]], stored: Callable[[V], Any]) -> int:
        """Give each keyed memory its vector (`stored` spells it for the engine), unless
        it has one by now; how many were asked for."""
        by_shard: dict[int, list[tuple[str, Any]]] = {}
        for key, vector in items:
            shard_index, _, point = key.partition("/")
            by_shard.setdefault(int(shard_index), []).append((point, stored(vector)))
        for index, found in by_shard.items():
            await self._store.calls.worker(self._fill, index, found)
        return len(items)

    def _fill(self, index: int, items: list[tuple[str, Any]]) -> None:
        """One update for the page. A point deleted since it was listed makes the engine
        refuse the whole update: then once more without the gone (as a server's, in
        server/keyword_vectors.index_page)."""
        shard = self._store.shards.shards[index]
        if shard is None:
            return
        vectors = [qe.PointVectors(key, {self._name: vector}) for key, vector in items]
        try:
            self._store.update(
                shard, qe.UpdateOperation.update_vectors(vectors, condition=self._missing)
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
                    shard, qe.UpdateOperation.update_vectors(remaining, condition=self._missing)
                )


class EdgeKeywordIndex:
    """`prepare_keywords`, `unindexed_memories` and `index_keywords` for the embedded store
    (the walk and the conditional write: `MissingVectors`)."""

    def __init__(self, store: EdgeStore) -> None:
        self._store = store
        self._missing = MissingVectors(store, KEYWORDS_VECTOR)

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
        return await self._missing.page(cursor, limit)

    async def index_keywords(self, items: Sequence[tuple[str, SparseVector]]) -> int:
        return await self._missing.fill(items, sparse)


class EdgeTokenIndex:
    """`prepare_tokens`, `untokenized_memories` and `index_tokens` for the embedded store
    (the walk and the conditional write: `MissingVectors`)."""

    def __init__(self, store: EdgeStore, dimension: int) -> None:
        self._store = store
        self._dimension = dimension
        self._missing = MissingVectors(store, TOKEN_CODES_VECTOR)

    async def prepare_tokens(self) -> None:
        def prepare() -> None:
            for shard in self._store.shards.open_shards():
                add_token_vector(shard, self._dimension)

        await self._store.calls.worker(prepare)

    async def untokenized_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        return await self._missing.page(cursor, limit)

    async def index_tokens(self, items: Sequence[tuple[str, TokenVectors]]) -> int:
        return await self._missing.fill(items, token_codes.encoded)
