"""A backend in a worker process, as the server sees it: the backend interface, forwarded.

A backend whose engine holds the GIL for the whole of every call (the embedded
store, adapters/qdrant/edge/) would stop every request, refusal and answer of the
server meanwhile. So it runs in a child process (engine_worker.py, watched by
engine_process.py), built there from a `WorkerSpec`, and this class forwards the
backend interface and its parts to it as plain values (frames.py). The event loop
only encodes, sends and waits. A worker that dies takes the store away only until
it is restarted: calls answer `BackendUnavailable` (503) meanwhile and health is
`degraded`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from adapters.base import VectorBackend
from adapters.callers import NOBODY
from adapters.callers import Caller
from adapters.errors import StorageDamaged
from adapters.merge import merge_namespaces
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import ScoredMemory
from adapters.values import SearchMode
from adapters.values import SearchQuery
from adapters.values import SparseVector
from adapters.values import StoreCondition
from adapters.values import StoredMemory
from adapters.values import StoreSize
from adapters.values import TokenVectors
from adapters.worker import frames
from adapters.worker.engine_process import EngineProcess


class _Part:
    """A part of the store in the worker, asked for by its name (adapters/parts.py)."""

    def __init__(self, worker: EngineProcess, name: str) -> None:
        self._worker = worker
        self._name = name

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return await self._worker.call(self._name, method, *args, **kwargs)


class _KeywordIndex(_Part):
    async def prepare_keywords(self, *, reset: bool = False) -> None:
        await self._call("prepare_keywords", reset=reset)

    async def unindexed_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        return await self._call("unindexed_memories", cursor, limit)  # type: ignore[no-any-return]

    async def index_keywords(self, items: Sequence[tuple[str, SparseVector]]) -> int:
        return await self._call("index_keywords", list(items))  # type: ignore[no-any-return]


class _TokenIndex(_Part):
    async def prepare_tokens(self) -> None:
        await self._call("prepare_tokens")

    async def untokenized_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        return await self._call("untokenized_memories", cursor, limit)  # type: ignore[no-any-return]

    async def index_tokens(self, items: Sequence[tuple[str, TokenVectors]]) -> int:
        return await self._call("index_tokens", list(items))  # type: ignore[no-any-return]


class _Transfer(_Part):
    async def iter_memories(
        self, namespace: str, now: datetime, *, page_size: int = 256, with_vectors: bool = True
    ) -> AsyncIterator[list[StoredMemory]]:
        pages = await self._worker.open(
            self._name,
            "iter_memories",
            namespace,
            now,
            page_size=page_size,
            with_vectors=with_vectors,
        )
        try:
            while (page := await self._worker.next(pages)) != frames.END:
                yield page
        finally:  # a caller that stops early leaves the worker's generator open
            self._worker.discard(pages)

    async def upsert_memories(
        self, memories: Sequence[StoredMemory], keywords: Sequence[SparseVector] | None = None
    ) -> int:
        keyed = None if keywords is None else list(keywords)
        return await self._call("upsert_memories", list(memories), keyed)  # type: ignore[no-any-return]


class _StoreMeta(_Part):
    async def read_store_meta(self) -> Mapping[str, str]:
        return await self._call("read_store_meta")  # type: ignore[no-any-return]

    async def write_store_meta(self, key: str, value: str) -> None:
        await self._call("write_store_meta", key, value)


class _StoreSize(_Part):
    async def measure(self) -> StoreSize:
        return await self._call("measure")  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """Which backend a worker builds, and how: all of it plain values, for its command line."""

    factory: str  # "module:callable", called in the worker with `options`
    options: Mapping[str, Any]  # the factory's keyword arguments, as JSON
    data_dir: Path  # what the backend owns: one process holds it at a time (a lock file)
    search_modes: frozenset[SearchMode]
    name: str  # the backend's, as the server names it

    def argv(self) -> list[str]:
        return [
            "--factory",
            self.factory,
            "--options",
            json.dumps(dict(self.options)),
            "--data-dir",
            str(self.data_dir.absolute()),
        ]


class EngineClient(VectorBackend):
    """The backend `spec` builds, in a worker process, behind the backend interface. A
    backend offered this way hands out one built from its own `WorkerSpec`."""

    def __init__(
        self,
        dimension: int,
        spec: WorkerSpec,
        label: str = "engine worker",
        token_dimension: int | None = None,
    ) -> None:
        super().__init__(dimension, token_dimension)
        self.name = spec.name
        self._search_modes = spec.search_modes
        self.worker = EngineProcess(spec.argv(), label)
        self._known: dict[str, NamespaceRecord] = {}
        self._records_of = 0  # the worker's restarts when `_known` was filled
        self._changes = 0  # namespace saves and deletes begun

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return await self.worker.call(None, method, *args, **kwargs)

    @property
    def search_modes(self) -> frozenset[SearchMode]:
        return self._search_modes

    @cached_property
    def transfer(self) -> _Transfer:
        return _Transfer(self.worker, "transfer")

    @cached_property
    def store_meta(self) -> _StoreMeta:
        return _StoreMeta(self.worker, "store_meta")

    @cached_property
    def store_size(self) -> _StoreSize:
        return _StoreSize(self.worker, "store_size")

    @cached_property
    def keyword_index(self) -> _KeywordIndex:
        return _KeywordIndex(self.worker, "keyword_index")

    @cached_property
    def token_index(self) -> _TokenIndex:
        return _TokenIndex(self.worker, "token_index")

    async def start(self) -> None:
        await self.worker.start()

    async def close(self) -> None:
        await self.worker.close()

    async def maintain(self) -> None:
        await self._call("maintain")

    async def ping(self) -> None:
        """`BackendUnavailable` while the worker is being restarted, as for any outage."""
        await self._call("ping")
        self.worker.condition = await self._call("condition")

    def condition(self) -> StoreCondition:
        return self.worker.condition

    async def verify(self) -> tuple[str, ...]:
        return await self._call("verify")  # type: ignore[no-any-return]

    async def accept(self) -> list[str]:
        """verify-store --accept: the store as it is now is vouched for."""
        return await self._call("accept")  # type: ignore[no-any-return]

    def _records(self) -> dict[str, NamespaceRecord]:
        """The namespace records this server has read or written, by name.

        Why: the platform PUTs a namespace before every write and a search reads its
        namespaces' records first, and the worker answers nothing while the engine
        runs a long search. Every change of a record passes through this client, so
        the copy holds: an answer is kept only if no change was made while it was on
        its way. A restarted worker may have rebuilt records: the copy starts over."""
        if self._records_of != self.worker.restarts:
            self._known.clear()
            self._records_of = self.worker.restarts
        return self._known

    def _keep(self, found: Mapping[str, NamespaceRecord], changes: int) -> None:
        if changes == self._changes:
            self._records().update(found)

    async def get_namespace(self, name: str) -> NamespaceRecord | None:
        # A copy is answered only while the worker is up: a request over a namespace of
        # a store that is away is refused at its first step, before the model works for it.
        self.worker.require_up()
        if (known := self._records().get(name)) is not None:
            return known
        changes = self._changes
        found: NamespaceRecord | None = await self._call("get_namespace", name)
        if found is not None:
            self._keep({name: found}, changes)
        return found

    async def get_namespaces(self, names: Sequence[str]) -> Mapping[str, NamespaceRecord]:
        self.worker.require_up()  # as get_namespace
        records = self._records()
        known = {name: records[name] for name in names if name in records}
        missing = [name for name in names if name not in known]
        if not missing:
            return known
        changes = self._changes
        try:
            found: Mapping[str, NamespaceRecord] = await self._call("get_namespaces", missing)
        except StorageDamaged as damaged:  # raised only when none of `missing` is live
            return merge_namespaces([known, damaged])
        self._keep(found, changes)
        return known | dict(found)

    async def save_namespace(self, record: NamespaceRecord) -> None:
        self._changes += 1
        changes = self._changes
        self._records().pop(record.name, None)  # unknown until the worker has it
        await self._call("save_namespace", record)
        self._keep({record.name: record}, changes)

    async def delete_namespace(self, name: str) -> bool:
        self._changes += 1
        self._records().pop(name, None)
        return await self._call("delete_namespace", name)  # type: ignore[no-any-return]

    async def list_namespaces(self) -> list[NamespaceRecord]:
        return await self._call("list_namespaces")  # type: ignore[no-any-return]

    async def expired_namespaces(self, now: datetime) -> list[NamespaceRecord]:
        return await self._call("expired_namespaces", now)  # type: ignore[no-any-return]

    async def get_stored_memory(
        self, namespace: str, memory_id: str, *, caller: Caller = NOBODY
    ) -> StoredMemory | None:
        found = await self._call("get_stored_memory", namespace, memory_id, caller=caller)
        return found  # type: ignore[no-any-return]

    async def upsert_memory(self, memory: MemoryRecord, vectors: MemoryVectors) -> None:
        sent = MemoryVectors(list(vectors.dense), vectors.keywords, vectors.tokens)
        await self._call("upsert_memory", memory, sent)

    async def query_memories(
        self,
        namespaces: Sequence[str],
        query: SearchQuery,
        memory_filter: MemoryFilter,
        limit: int,
        *,
        caller: Caller = NOBODY,
    ) -> list[ScoredMemory]:
        return await self._call(  # type: ignore[no-any-return]
            "query_memories", list(namespaces), query, memory_filter, limit, caller=caller
        )

    async def list_memories(
        self,
        namespaces: Sequence[str],
        memory_filter: MemoryFilter,
        limit: int,
        *,
        caller: Caller = NOBODY,
    ) -> list[MemoryRecord]:
        return await self._call(  # type: ignore[no-any-return]
            "list_memories", list(namespaces), memory_filter, limit, caller=caller
        )

    async def delete_memory(self, namespace: str, memory_id: str) -> bool:
        return await self._call("delete_memory", namespace, memory_id)  # type: ignore[no-any-return]

    async def delete_expired_memories(self, now: datetime) -> int:
        return await self._call("delete_expired_memories", now)  # type: ignore[no-any-return]
