"""The backend interface: what a request needs of a vector store.

Modelled on qdrant-client's "one front, several implementations": the service
speaks only to `VectorBackend`, and `tests/backends/suite/` runs the same calls
against every implementation. Values are plain dataclasses (`adapters.values`),
never SDK objects; no adapter imports aiohttp. What only one or two callers need
(keyword index, bulk transfer, store metadata) is a part a backend may offer
(`adapters.parts`), not a method every backend and wrapper must carry.

Semantics every implementation keeps:
- A namespace behaves as a collection: a record, full isolation, and
  `delete_namespace` makes it and its memories vanish for every later call at
  once, even if the physical removal finishes later (in `maintain`).
- Memory ids are canonical UUIDs scoped to their namespace: `upsert_memory` with
  a known (namespace, id) replaces that memory in place.
- Reads span namespaces, so a backend can answer with one engine request; they
  return pinned memories first, then each side best or newest first, `limit` in
  all (`adapters.merge` for adapters that must ask per namespace).
- Two vectors per memory where the backend can keep them: the dense embedding
  and a sparse keyword vector (BM25), both computed by the plugin; `search_modes`
  says which `SearchQuery` shapes it answers (docs/backends.md, "Hybrid search").
- Expiry: `MemoryFilter.now` excludes every memory whose `expires_at` is at or
  before it, whatever the janitor has already deleted.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import ClassVar

from adapters.parts import BulkTransfer, KeywordIndex, StoreMeta
from adapters.values import (
    MemoryFilter,
    MemoryRecord,
    NamespaceRecord,
    ScoredMemory,
    SearchMode,
    SearchQuery,
    SparseVector,
    StoreCondition,
    StoredMemory,
)

# What every backend puts before its own names (collections, Pinecone namespaces).
DEFAULT_PREFIX = "memory-"


class VectorBackend(abc.ABC):
    """A vector store holding namespaces (collections) of memories.

    `start` must not require the backend to be reachable: the server boots during an
    outage and recovers by itself. Every method may raise `BackendUnavailable`.
    """

    name: ClassVar[str]

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension

    @property
    def search_modes(self) -> frozenset[SearchMode]:
        """The query modes it answers (a property: Pinecone learns it from its index)."""
        return frozenset({SearchMode.DENSE})

    # The optional parts (adapters/parts.py), asked for by their callers; None: not offered.

    @property
    def keyword_index(self) -> KeywordIndex | None:
        return None

    @property
    def transfer(self) -> BulkTransfer | None:
        return None

    @property
    def store_meta(self) -> StoreMeta | None:
        return None

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Open local resources. Default: nothing to open."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources and make every accepted write durable."""

    async def maintain(self) -> None:  # noqa: B027 - optional hook
        """Periodic housekeeping run by the janitor: finish namespace deletes, compact, flush."""

    @abc.abstractmethod
    async def ping(self) -> None:
        """Raise `BackendUnavailable` unless the backend answers now."""

    def condition(self) -> StoreCondition:
        """Degradations seen so far (cheap, no I/O: `ping` refreshes). Default: none."""
        return StoreCondition()

    async def verify(self) -> tuple[str, ...]:
        """The problems a check of the stored data against itself finds now (verify-store).

        For stores whose halves can disagree (the embedded store's records and engine).
        """
        return ()

    @abc.abstractmethod
    async def get_namespace(self, name: str) -> NamespaceRecord | None: ...

    async def get_namespaces(self, names: Sequence[str]) -> Mapping[str, NamespaceRecord]:
        """The records of those `names` that exist. Default: one `get_namespace` each."""
        found = await asyncio.gather(*(self.get_namespace(name) for name in names))
        return {record.name: record for record in found if record is not None}

    @abc.abstractmethod
    async def save_namespace(self, record: NamespaceRecord) -> None:
        """Create the namespace's collection if missing and store `record` with it."""

    @abc.abstractmethod
    async def delete_namespace(self, name: str) -> bool:
        """Drop the namespace with all its memories; False if it did not exist. When it
        returns, no call sees them, and one created again under the name starts empty."""

    @abc.abstractmethod
    async def list_namespaces(self) -> list[NamespaceRecord]: ...

    async def expired_namespaces(self, now: datetime) -> list[NamespaceRecord]:
        """Namespaces whose `expires_at` is at or before `now`. Default: scan them all."""
        return [record for record in await self.list_namespaces() if record.is_expired(now)]

    @abc.abstractmethod
    async def get_stored_memory(self, namespace: str, memory_id: str) -> StoredMemory | None:
        """The memory with the dense vector stored for it, read in one lookup.

        Why: a commit whose content is stored as is reuses that vector instead of asking
        the model again (plugin/core/service.py).
        """

    async def get_memory(self, namespace: str, memory_id: str) -> MemoryRecord | None:
        found = await self.get_stored_memory(namespace, memory_id)
        return None if found is None else found[0]

    @abc.abstractmethod
    async def upsert_memory(
        self, memory: MemoryRecord, vector: Sequence[float], keywords: SparseVector | None = None
    ) -> None:
        """Insert or replace the memory with `memory.id`; durable when it returns.

        `keywords` is its keyword vector; a backend that keeps none ignores it. Raises
        `NamespaceGone` when the namespace has no storage (deleted meanwhile).
        """

    @abc.abstractmethod
    async def query_memories(
        self,
        namespaces: Sequence[str],
        query: SearchQuery,
        memory_filter: MemoryFilter,
        limit: int,
    ) -> list[ScoredMemory]:
        """Up to `limit` memories of `namespaces` (absent ones add nothing), pinned first,
        each side best first. The query's shape is one of `search_modes`."""

    @abc.abstractmethod
    async def list_memories(
        self, namespaces: Sequence[str], memory_filter: MemoryFilter, limit: int
    ) -> list[MemoryRecord]:
        """Up to `limit` memories of `namespaces` (absent ones add nothing), pinned first,
        each side newest first; equal `created_at` in any order."""

    @abc.abstractmethod
    async def delete_memory(self, namespace: str, memory_id: str) -> bool:
        """Delete one memory; False if the namespace holds no such id."""

    @abc.abstractmethod
    async def delete_expired_memories(self, now: datetime) -> int:
        """Delete every memory with `expires_at <= now`, in every namespace; how many went.

        The janitor's hot loop: its cost should not grow with idle namespaces."""
