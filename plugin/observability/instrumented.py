"""A `VectorBackend` that times every call of the one it wraps.

The adapters stay free of metrics: the app wraps whichever backend it has
(built from settings, or handed in by a test) in this proxy, which delegates
every method and reports (operation, outcome, seconds) to an observer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import ClassVar

from adapters.base import (
    MemoryFilter,
    MemoryRecord,
    NamespaceRecord,
    ScoredMemory,
    SearchMode,
    SearchQuery,
    SparseVector,
    StoreCondition,
    StoredMemory,
    TokenVectors,
    VectorBackend,
)
from adapters.errors import (
    BackendRejected,
    BackendUnavailable,
    NamespaceConflict,
    NamespaceGone,
    StorageDamaged,
    StorageFull,
)
from adapters.token_index import TokenIndex

OperationObserver = Callable[[str, str, float], None]

# Outcome labels; the set is closed, whatever an adapter raises.
_OUTCOMES: tuple[tuple[type[BaseException], str], ...] = (
    (asyncio.CancelledError, "cancelled"),  # the request's deadline, or shutdown
    (StorageFull, "storage_full"),
    (StorageDamaged, "storage_damaged"),
    (BackendUnavailable, "unavailable"),
    (BackendRejected, "rejected"),
    (NamespaceGone, "namespace_gone"),
    (NamespaceConflict, "conflict"),
)


def outcome_of(error: BaseException) -> str:
    for kind, label in _OUTCOMES:
        if isinstance(error, kind):
            return label
    return "error"


class _Timing:
    """Times the block it wraps and reports its outcome.

    A plain (synchronous) context manager: timing needs no await, and this runs
    around every backend call of every request, where a generator-based async one
    cost four times as much.
    """

    __slots__ = ("_observe", "_operation", "_started")

    def __init__(self, observe: OperationObserver, operation: str) -> None:
        self._observe = observe
        self._operation = operation
        self._started = 0.0

    def __enter__(self) -> None:
        self._started = time.perf_counter()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        outcome = "ok" if error is None else outcome_of(error)
        self._observe(self._operation, outcome, time.perf_counter() - self._started)


class InstrumentedBackend(VectorBackend):
    """Delegates every call to `inner`, observing its duration and outcome."""

    name: ClassVar[str] = "instrumented"

    def __init__(self, inner: VectorBackend, observe: OperationObserver) -> None:
        super().__init__(inner.dimension)
        self.inner = inner
        self._observe = observe

    def _timed(self, operation: str) -> _Timing:
        return _Timing(self._observe, operation)

    async def start(self) -> None:
        with self._timed("start"):
            await self.inner.start()

    async def close(self) -> None:
        with self._timed("close"):
            await self.inner.close()

    async def maintain(self) -> None:
        with self._timed("maintain"):
            await self.inner.maintain()

    async def ping(self) -> None:
        with self._timed("ping"):
            await self.inner.ping()

    async def verify(self) -> tuple[str, ...]:
        with self._timed("verify"):
            return await self.inner.verify()

    def condition(self) -> StoreCondition:
        return self.inner.condition()

    @property
    def search_modes(self) -> frozenset[SearchMode]:
        return self.inner.search_modes

    def token_index(self) -> TokenIndex | None:
        """The inner backend's part, untimed: the background upgrade is its one caller."""
        return self.inner.token_index()

    async def prepare_keywords(self, *, reset: bool = False) -> None:
        with self._timed("prepare_keywords"):
            await self.inner.prepare_keywords(reset=reset)

    async def unindexed_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        with self._timed("unindexed_memories"):
            return await self.inner.unindexed_memories(cursor, limit)

    async def index_keywords(self, items: Sequence[tuple[str, SparseVector]]) -> int:
        with self._timed("index_keywords"):
            return await self.inner.index_keywords(items)

    async def get_namespace(self, name: str) -> NamespaceRecord | None:
        with self._timed("get_namespace"):
            return await self.inner.get_namespace(name)

    async def get_namespaces(self, names: Sequence[str]) -> Mapping[str, NamespaceRecord]:
        with self._timed("get_namespaces"):
            return await self.inner.get_namespaces(names)

    async def save_namespace(self, record: NamespaceRecord) -> None:
        with self._timed("save_namespace"):
            await self.inner.save_namespace(record)

    async def delete_namespace(self, name: str) -> bool:
        with self._timed("delete_namespace"):
            return await self.inner.delete_namespace(name)

    async def list_namespaces(self) -> list[NamespaceRecord]:
        with self._timed("list_namespaces"):
            return await self.inner.list_namespaces()

    async def read_store_meta(self) -> Mapping[str, str]:
        with self._timed("read_store_meta"):
            return await self.inner.read_store_meta()

    async def write_store_meta(self, key: str, value: str) -> None:
        with self._timed("write_store_meta"):
            await self.inner.write_store_meta(key, value)

    async def iter_memories(
        self,
        namespace: str,
        now: datetime,
        *,
        page_size: int = 256,
        with_vectors: bool = True,
    ) -> AsyncIterator[list[StoredMemory]]:
        """Pages as the inner backend gives them; each page's read is timed."""
        pages = self.inner.iter_memories(
            namespace, now, page_size=page_size, with_vectors=with_vectors
        ).__aiter__()
        while True:
            with self._timed("iter_memories"):
                try:
                    page = await pages.__anext__()
                except StopAsyncIteration:
                    return
            yield page

    async def upsert_memories(
        self, memories: Sequence[StoredMemory], keywords: Sequence[SparseVector] | None = None
    ) -> int:
        with self._timed("upsert_memories"):
            return await self.inner.upsert_memories(memories, keywords)

    async def expired_namespaces(self, now: datetime) -> list[NamespaceRecord]:
        with self._timed("expired_namespaces"):
            return await self.inner.expired_namespaces(now)

    async def get_memory(self, namespace: str, memory_id: str) -> MemoryRecord | None:
        with self._timed("get_memory"):
            return await self.inner.get_memory(namespace, memory_id)

    async def get_stored_memory(self, namespace: str, memory_id: str) -> StoredMemory | None:
        with self._timed("get_stored_memory"):
            return await self.inner.get_stored_memory(namespace, memory_id)

    async def upsert_memory(
        self,
        memory: MemoryRecord,
        vector: Sequence[float],
        keywords: SparseVector | None = None,
        tokens: TokenVectors | None = None,
    ) -> None:
        with self._timed("upsert_memory"):
            await self.inner.upsert_memory(memory, vector, keywords, tokens)

    async def query_memories(
        self,
        namespaces: Sequence[str],
        query: SearchQuery,
        memory_filter: MemoryFilter,
        limit: int,
    ) -> list[ScoredMemory]:
        with self._timed("query_memories"):
            return await self.inner.query_memories(namespaces, query, memory_filter, limit)

    async def list_memories(
        self, namespaces: Sequence[str], memory_filter: MemoryFilter, limit: int
    ) -> list[MemoryRecord]:
        with self._timed("list_memories"):
            return await self.inner.list_memories(namespaces, memory_filter, limit)

    async def delete_memory(self, namespace: str, memory_id: str) -> bool:
        with self._timed("delete_memory"):
            return await self.inner.delete_memory(namespace, memory_id)

    async def delete_expired_memories(self, now: datetime) -> int:
        with self._timed("delete_expired_memories"):
            return await self.inner.delete_expired_memories(now)
