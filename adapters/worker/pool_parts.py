"""The optional parts (adapters/parts.py) of an `EnginePool`, spread over its workers.

Bulk transfer goes by namespace to its worker; store-wide facts are written to every
worker's store and read back as one (stores that disagree are refused); sizes add up.
The background fills walk worker after worker: a cursor or a key of theirs is the
worker's index, a slash, and what that worker's own part gave.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING
from typing import Any
from typing import TypeVar

from adapters.errors import BackendMisconfigured
from adapters.values import SparseVector
from adapters.values import StoredMemory
from adapters.values import StoreSize
from adapters.values import TokenVectors

if TYPE_CHECKING:
    from adapters.worker.engine_pool import EnginePool

T = TypeVar("T")
Item = TypeVar("Item")
# A page of keyed memories and the next cursor, as a fill's listing answers it.
Page = tuple[list[tuple[str, str]], str | None]


async def every(calls: Iterable[Awaitable[T]]) -> list[T]:
    """Every call's result, once all have ended; the first failure raised after that."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results  # type: ignore[return-value]


class PoolTransfer:
    def __init__(self, pool: EnginePool) -> None:
        self._pool = pool

    async def iter_memories(
        self, namespace: str, now: datetime, *, page_size: int = 256, with_vectors: bool = True
    ) -> AsyncIterator[list[StoredMemory]]:
        transfer = self._pool.owner(namespace).transfer
        pages = transfer.iter_memories(
            namespace, now, page_size=page_size, with_vectors=with_vectors
        )
        async for page in pages:
            yield page

    async def upsert_memories(
        self, memories: Sequence[StoredMemory], keywords: Sequence[SparseVector] | None = None
    ) -> int:
        """Each worker's memories in one call, the workers in turn (a failure stops there:
        what was written stays, and a retry writes it again, as for one store)."""
        groups: dict[int, list[int]] = {}
        for n, (memory, _) in enumerate(memories):
            groups.setdefault(self._pool.route(memory.namespace), []).append(n)
        written = 0
        for index, positions in groups.items():
            keyed = None if keywords is None else [keywords[n] for n in positions]
            transfer = self._pool.clients[index].transfer
            written += await transfer.upsert_memories([memories[n] for n in positions], keyed)
        return written


class PoolStoreMeta:
    def __init__(self, pool: EnginePool) -> None:
        self._pool = pool

    async def read_store_meta(self) -> Mapping[str, str]:
        facts: dict[str, str] = {}
        for found in await every(c.store_meta.read_store_meta() for c in self._pool.clients):
            for key, value in found.items():
                if facts.setdefault(key, value) != value:
                    raise BackendMisconfigured(
                        f"the engine workers' stores disagree on {key!r}: they were not"
                        " written by one plugin; see docs/repair.md#engine-workers"
                    )
        return facts

    async def write_store_meta(self, key: str, value: str) -> None:
        for client in self._pool.clients:  # in turn: the first holds it before the next
            await client.store_meta.write_store_meta(key, value)


class PoolStoreSize:
    def __init__(self, pool: EnginePool) -> None:
        self._pool = pool

    async def measure(self) -> StoreSize:
        sizes = await every(client.store_size.measure() for client in self._pool.clients)
        used = [s.bytes_used for s in sizes if s.bytes_used is not None]
        free = [s.bytes_free for s in sizes if s.bytes_free is not None]
        return StoreSize(
            sum(s.namespaces for s in sizes),
            sum(s.memories for s in sizes),
            sum(used) if used else None,
            min(free) if free else None,  # one volume, seen by each
        )


async def _walk(
    pool: EnginePool,
    cursor: str | None,
    limit: int,
    page: Callable[[Any, str | None, int], Awaitable[Page]],
) -> Page:
    """One page of the walk over every worker's part in turn, from `cursor`."""
    index, _, inner = (cursor or "0/").partition("/")
    worker = int(index)
    items, after = await page(pool.clients[worker], inner or None, limit)
    keyed = [(f"{worker}/{key}", content) for key, content in items]
    if after is not None:
        return keyed, f"{worker}/{after}"
    return keyed, (f"{worker + 1}/" if worker + 1 < len(pool.clients) else None)


async def _fill(
    pool: EnginePool,
    items: Sequence[tuple[str, Item]],
    fill: Callable[[Any, list[tuple[str, Item]]], Awaitable[int]],
) -> int:
    by_worker: dict[int, list[tuple[str, Item]]] = {}
    for key, value in items:
        index, _, inner = key.partition("/")
        by_worker.setdefault(int(index), []).append((inner, value))
    return sum([await fill(pool.clients[i], found) for i, found in by_worker.items()])


class PoolKeywordIndex:
    def __init__(self, pool: EnginePool) -> None:
        self._pool = pool

    async def prepare_keywords(self, *, reset: bool = False) -> None:
        for client in self._pool.clients:
            await client.keyword_index.prepare_keywords(reset=reset)

    async def unindexed_memories(self, cursor: str | None, limit: int) -> Page:
        return await _walk(
            self._pool, cursor, limit, lambda c, at, n: c.keyword_index.unindexed_memories(at, n)
        )

    async def index_keywords(self, items: Sequence[tuple[str, SparseVector]]) -> int:
        return await _fill(self._pool, items, lambda c, some: c.keyword_index.index_keywords(some))


class PoolTokenIndex:
    def __init__(self, pool: EnginePool) -> None:
        self._pool = pool

    async def prepare_tokens(self) -> None:
        for client in self._pool.clients:
            await client.token_index.prepare_tokens()

    async def untokenized_memories(self, cursor: str | None, limit: int) -> Page:
        return await _walk(
            self._pool, cursor, limit, lambda c, at, n: c.token_index.untokenized_memories(at, n)
        )

    async def index_tokens(self, items: Sequence[tuple[str, TokenVectors]]) -> int:
        return await _fill(self._pool, items, lambda c, found: c.token_index.index_tokens(found))
