"""Several engine workers behind one backend interface, each owning some namespaces.

`route(name)` names the worker that owns a namespace (a fixed function of the name).
A call about one namespace goes to its worker; a search or listing over namespaces of
several workers asks each for its own and merges the answers (adapters/merge.py), as
one store orders them; store-wide calls go to every worker. A worker that stops takes
only its namespaces away: their calls answer `BackendUnavailable` (503) until it is
back, health says `degraded`, and the other workers' namespaces are served throughout.
The parts (adapters/parts.py) are spread alike: pool_parts.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from datetime import datetime
from functools import cached_property
from typing import TypeVar

from adapters.base import VectorBackend
from adapters.callers import NOBODY
from adapters.callers import Caller
from adapters.errors import BackendUnavailable
from adapters.merge import merge_listed
from adapters.merge import merge_namespaces
from adapters.merge import merge_scored
from adapters.values import DiskWrites
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import ScoredMemory
from adapters.values import SearchMode
from adapters.values import SearchQuery
from adapters.values import StoreCondition
from adapters.values import StoredMemory
from adapters.worker.engine_client import EngineClient
from adapters.worker.pool_parts import PoolKeywordIndex
from adapters.worker.pool_parts import PoolStoreMeta
from adapters.worker.pool_parts import PoolStoreSize
from adapters.worker.pool_parts import PoolTokenIndex
from adapters.worker.pool_parts import PoolTransfer
from adapters.worker.pool_parts import every

T = TypeVar("T")


class EnginePool(VectorBackend):
    """`clients`' workers as one backend; `route(name)` is the index of a name's worker."""

    def __init__(
        self,
        dimension: int,
        clients: Sequence[EngineClient],
        route: Callable[[str], int],
        token_dimension: int | None = None,
    ) -> None:
        super().__init__(dimension, token_dimension)
        self.clients = list(clients)
        self.name = self.clients[0].name
        self.route = route

    @cached_property
    def transfer(self) -> PoolTransfer:
        return PoolTransfer(self)

    @cached_property
    def store_meta(self) -> PoolStoreMeta:
        return PoolStoreMeta(self)

    @cached_property
    def store_size(self) -> PoolStoreSize:
        return PoolStoreSize(self)

    @cached_property
    def keyword_index(self) -> PoolKeywordIndex:
        return PoolKeywordIndex(self)

    @cached_property
    def token_index(self) -> PoolTokenIndex:
        return PoolTokenIndex(self)

    def owner(self, name: str) -> EngineClient:
        return self.clients[self.route(name)]

    def grouped(self, names: Iterable[str]) -> dict[int, list[str]]:
        """`names` by the index of their worker, each once, in their order."""
        groups: dict[int, list[str]] = {}
        for name in dict.fromkeys(names):
            groups.setdefault(self.route(name), []).append(name)
        return groups

    async def _asked(
        self,
        namespaces: Sequence[str],
        ask: Callable[[EngineClient, list[str]], Awaitable[list[T]]],
    ) -> list[list[T]]:
        """`ask(worker, its namespaces)` of each worker holding some of `namespaces`
        (of the first alone when none does), all at once; their answers in turn."""
        groups = self.grouped(namespaces) or {0: []}
        return await every(ask(self.clients[i], some) for i, some in groups.items())

    @property
    def search_modes(self) -> frozenset[SearchMode]:
        return self.clients[0].search_modes

    async def start(self) -> None:
        try:
            await every(client.start() for client in self.clients)
        except BaseException:
            await asyncio.gather(*(c.close() for c in self.clients), return_exceptions=True)
            raise

    async def close(self) -> None:
        await every(client.close() for client in self.clients)

    async def maintain(self) -> None:
        await every(client.maintain() for client in self.clients)

    async def ping(self) -> None:
        """Answers while any worker does: a worker restarting is a degradation (its
        condition says so), not an outage of the whole store."""
        results = await asyncio.gather(
            *(client.ping() for client in self.clients), return_exceptions=True
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        if len(failures) == len(results):
            raise failures[0]
        for failure in failures:
            if not isinstance(failure, BackendUnavailable):
                raise failure

    def condition(self) -> StoreCondition:
        conditions = [client.condition() for client in self.clients]
        disks = [c.disk for c in conditions if c.disk is not None]
        return StoreCondition(
            unreadable_namespaces=tuple(n for c in conditions for n in c.unreadable_namespaces),
            problems=tuple(p for c in conditions for p in c.problems),
            disk=DiskWrites.merged(disks) if disks else None,
        )

    async def verify(self) -> tuple[str, ...]:
        found = await every(client.verify() for client in self.clients)
        return tuple(line for lines in found for line in lines)

    async def accept(self) -> list[str]:
        names = await every(client.accept() for client in self.clients)
        return sorted(name for found in names for name in found)

    async def get_namespace(self, name: str) -> NamespaceRecord | None:
        return await self.owner(name).get_namespace(name)

    async def get_namespaces(self, names: Sequence[str]) -> Mapping[str, NamespaceRecord]:
        groups = self.grouped(names)
        if len(groups) == 1:
            ((index, group),) = groups.items()
            return await self.clients[index].get_namespaces(group)
        results = await asyncio.gather(
            *(self.clients[i].get_namespaces(group) for i, group in groups.items()),
            return_exceptions=True,
        )
        return merge_namespaces(results)

    async def save_namespace(self, record: NamespaceRecord) -> None:
        await self.owner(record.name).save_namespace(record)

    async def delete_namespace(self, name: str) -> bool:
        return await self.owner(name).delete_namespace(name)

    async def list_namespaces(self) -> list[NamespaceRecord]:
        found = await every(client.list_namespaces() for client in self.clients)
        return [record for records in found for record in records]

    async def expired_namespaces(self, now: datetime) -> list[NamespaceRecord]:
        found = await every(client.expired_namespaces(now) for client in self.clients)
        return [record for records in found for record in records]

    async def get_stored_memory(
        self, namespace: str, memory_id: str, *, caller: Caller = NOBODY
    ) -> StoredMemory | None:
        return await self.owner(namespace).get_stored_memory(namespace, memory_id, caller=caller)

    async def upsert_memory(self, memory: MemoryRecord, vectors: MemoryVectors) -> None:
        await self.owner(memory.namespace).upsert_memory(memory, vectors)

    async def query_memories(
        self,
        namespaces: Sequence[str],
        query: SearchQuery,
        memory_filter: MemoryFilter,
        limit: int,
        *,
        caller: Caller = NOBODY,
    ) -> list[ScoredMemory]:
        def ask(client: EngineClient, some: list[str]) -> Awaitable[list[ScoredMemory]]:
            return client.query_memories(some, query, memory_filter, limit, caller=caller)

        parts = await self._asked(namespaces, ask)
        return parts[0] if len(parts) == 1 else merge_scored(parts, limit)

    async def list_memories(
        self,
        namespaces: Sequence[str],
        memory_filter: MemoryFilter,
        limit: int,
        *,
        caller: Caller = NOBODY,
    ) -> list[MemoryRecord]:
        parts = await self._asked(
            namespaces,
            lambda client, some: client.list_memories(some, memory_filter, limit, caller=caller),
        )
        return parts[0] if len(parts) == 1 else merge_listed(parts, limit)

    async def delete_memory(self, namespace: str, memory_id: str) -> bool:
        return await self.owner(namespace).delete_memory(namespace, memory_id)

    async def delete_expired_memories(self, now: datetime) -> int:
        return sum(await every(c.delete_expired_memories(now) for c in self.clients))
