# Written by scripts/generate-engine-stub from adapters/crossings.py: do not edit.
"""The calls the server makes of its engine workers, a typed method each, as declared in
adapters/crossings.py: each hands its `Call` to the pool's `cross` (adapters/pool/engine_pool.py).
What each call does is documented where it is declared: adapters/base.py, adapters/parts.py.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from collections.abc import Mapping
from collections.abc import Sequence
from datetime import datetime
from functools import cached_property
from typing import Any

from adapters.base import VectorBackend
from adapters.crossings import Call
from adapters.values import FillVector
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import NamespaceRecord
from adapters.values import ScoredMemory
from adapters.values import SearchQuery
from adapters.values import SparseVector
from adapters.values import StoredMemory
from adapters.values import StoreSize
from adapters.values import VectorKind


class EngineStub(VectorBackend):
    """The backend interface over the engine workers: each declared call as the pool
    `cross`es it, and each part, made on first use."""

    @abc.abstractmethod
    async def cross(self, call: Call) -> Any:
        """The answer to `call`, from the workers its declaration sends it to."""

    @abc.abstractmethod
    def cross_pages(self, call: Call) -> AsyncIterator[Any]:
        """The pages of `call`, an async generator in its worker."""

    async def maintain(self) -> None:
        await self.cross(Call("maintain", (), {}))

    async def ping(self) -> None:
        await self.cross(Call("ping", (), {}))

    async def verify(self) -> tuple[str, ...]:
        answer: tuple[str, ...] = await self.cross(Call("verify", (), {}))
        return answer

    async def accept(self) -> list[str]:
        answer: list[str] = await self.cross(Call("accept", (), {}))
        return answer

    async def get_namespace(self, name: str) -> NamespaceRecord | None:
        answer: NamespaceRecord | None = await self.cross(Call("get_namespace", (), {"name": name}))
        return answer

    async def get_namespaces(self, names: Sequence[str]) -> Mapping[str, NamespaceRecord]:
        answer: Mapping[str, NamespaceRecord] = await self.cross(
            Call("get_namespaces", (), {"names": names})
        )
        return answer

    async def save_namespace(self, record: NamespaceRecord) -> None:
        await self.cross(Call("save_namespace", (), {"record": record}))

    async def delete_namespace(self, name: str) -> bool:
        answer: bool = await self.cross(Call("delete_namespace", (), {"name": name}))
        return answer

    async def list_namespaces(self) -> list[NamespaceRecord]:
        answer: list[NamespaceRecord] = await self.cross(Call("list_namespaces", (), {}))
        return answer

    async def expired_namespaces(self, now: datetime) -> list[NamespaceRecord]:
        answer: list[NamespaceRecord] = await self.cross(
            Call("expired_namespaces", (), {"now": now})
        )
        return answer

    async def get_stored_memory(self, namespace: str, memory_id: str) -> StoredMemory | None:
        answer: StoredMemory | None = await self.cross(
            Call("get_stored_memory", (), {"namespace": namespace, "memory_id": memory_id})
        )
        return answer

    async def get_memory(self, namespace: str, memory_id: str) -> MemoryRecord | None:
        answer: MemoryRecord | None = await self.cross(
            Call("get_memory", (), {"namespace": namespace, "memory_id": memory_id})
        )
        return answer

    async def query_memories(
        self, namespaces: Sequence[str], query: SearchQuery, memory_filter: MemoryFilter, limit: int
    ) -> list[ScoredMemory]:
        answer: list[ScoredMemory] = await self.cross(
            Call(
                "query_memories",
                (),
                {
                    "namespaces": namespaces,
                    "query": query,
                    "memory_filter": memory_filter,
                    "limit": limit,
                },
            )
        )
        return answer

    async def list_memories(
        self, namespaces: Sequence[str], memory_filter: MemoryFilter, limit: int
    ) -> list[MemoryRecord]:
        answer: list[MemoryRecord] = await self.cross(
            Call(
                "list_memories",
                (),
                {"namespaces": namespaces, "memory_filter": memory_filter, "limit": limit},
            )
        )
        return answer

    async def delete_memory(self, namespace: str, memory_id: str) -> bool:
        answer: bool = await self.cross(
            Call("delete_memory", (), {"namespace": namespace, "memory_id": memory_id})
        )
        return answer

    async def delete_expired_memories(self, now: datetime) -> int:
        answer: int = await self.cross(Call("delete_expired_memories", (), {"now": now}))
        return answer

    @cached_property
    def vector_fill(self) -> VectorFillStub:
        return VectorFillStub(self)

    @cached_property
    def transfer(self) -> BulkTransferStub:
        return BulkTransferStub(self)

    @cached_property
    def store_meta(self) -> StoreMetaStub:
        return StoreMetaStub(self)

    @cached_property
    def store_size(self) -> StoreSizesStub:
        return StoreSizesStub(self)


class VectorFillStub:
    """The engine workers' `vector_fill` (adapters/parts.py, `VectorFill`)."""

    def __init__(self, pool: EngineStub) -> None:
        self._pool = pool

    async def prepare(self, kind: VectorKind, *, reset: bool = False) -> None:
        await self._pool.cross(Call("vector_fill.prepare", (), {"kind": kind, "reset": reset}))

    async def missing(
        self, kind: VectorKind, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        answer: tuple[list[tuple[str, str]], str | None] = await self._pool.cross(
            Call("vector_fill.missing", (), {"kind": kind, "cursor": cursor, "limit": limit})
        )
        return answer

    async def fill(self, kind: VectorKind, items: Sequence[tuple[str, FillVector]]) -> int:
        answer: int = await self._pool.cross(
            Call("vector_fill.fill", (), {"kind": kind, "items": items})
        )
        return answer


class BulkTransferStub:
    """The engine workers' `transfer` (adapters/parts.py, `BulkTransfer`)."""

    def __init__(self, pool: EngineStub) -> None:
        self._pool = pool

    async def iter_memories(
        self, namespace: str, now: datetime, *, page_size: int = 256, with_vectors: bool = True
    ) -> AsyncIterator[list[StoredMemory]]:
        async for page in self._pool.cross_pages(
            Call(
                "transfer.iter_memories",
                (),
                {
                    "namespace": namespace,
                    "now": now,
                    "page_size": page_size,
                    "with_vectors": with_vectors,
                },
            )
        ):
            yield page

    async def upsert_memories(
        self, memories: Sequence[StoredMemory], keywords: Sequence[SparseVector] | None = None
    ) -> int:
        answer: int = await self._pool.cross(
            Call("transfer.upsert_memories", (), {"memories": memories, "keywords": keywords})
        )
        return answer

    async def place_memories(self, namespace: str, places: Sequence[tuple[str, int]]) -> int:
        answer: int = await self._pool.cross(
            Call("transfer.place_memories", (), {"namespace": namespace, "places": places})
        )
        return answer


class StoreMetaStub:
    """The engine workers' `store_meta` (adapters/parts.py, `StoreMeta`)."""

    def __init__(self, pool: EngineStub) -> None:
        self._pool = pool

    async def read_store_meta(self) -> Mapping[str, str]:
        answer: Mapping[str, str] = await self._pool.cross(
            Call("store_meta.read_store_meta", (), {})
        )
        return answer

    async def write_store_meta(self, key: str, value: str) -> None:
        await self._pool.cross(
            Call("store_meta.write_store_meta", (), {"key": key, "value": value})
        )


class StoreSizesStub:
    """The engine workers' `store_size` (adapters/parts.py, `StoreSizes`)."""

    def __init__(self, pool: EngineStub) -> None:
        self._pool = pool

    async def measure(self) -> StoreSize:
        answer: StoreSize = await self._pool.cross(Call("store_size.measure", (), {}))
        return answer
