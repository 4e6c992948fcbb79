"""The backend interface: what a vector store must offer the plugin.

Modelled on qdrant-client's "one front, several implementations": the plugin's
service layer speaks only to `VectorBackend`, and `tests/backend_suite.py` runs
the same calls against every implementation. Types here are plain dataclasses,
never SDK objects, and no adapter imports aiohttp.

Semantics every implementation must keep:
- A namespace is a collection: it has its own storage and a record
  (name, kind, metadata, expires_at, created_at) kept with that storage.
- Memory ids are UUIDs in canonical (lower-case, hyphenated) form and are the
  vector ids, so `upsert_memory` with a known id replaces that memory in place.
  An id is scoped to its namespace: a write only ever touches the namespace it
  names.
- Expiry: `MemoryFilter.now` excludes every memory whose `expires_at` is at or
  before it, whatever the janitor has already deleted.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class NamespaceRecord:
    """A namespace as stored: the contract's `Namespace` object."""

    name: str
    kind: str
    created_at: datetime
    expires_at: datetime | None = None
    metadata: JsonObject | None = None

    def is_expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """A memory as stored: the contract's `Memory` object without a score."""

    id: str
    namespace: str
    content: str
    kind: str
    source: str
    created_at: datetime
    pin: bool = False
    expires_at: datetime | None = None
    propagation: JsonObject | None = None

    def is_expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now


@dataclass(frozen=True, slots=True)
class ScoredMemory:
    """A memory with its cosine similarity to the query vector."""

    memory: MemoryRecord
    score: float


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """Which memories a query or listing may return.

    `now`: memories with `expires_at <= now` are excluded.
    `pinned`: None for both, True or False for one side only.
    `kinds`: None for all kinds, else only these.
    """

    now: datetime
    pinned: bool | None = None
    kinds: frozenset[str] | None = None


class VectorBackend(abc.ABC):
    """A vector store holding namespaces (collections) of memories.

    `start` must not require the backend to be reachable: the server boots during an
    outage and recovers by itself. Every method may raise `BackendUnavailable`.
    """

    name: ClassVar[str]

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Open local resources. Default: nothing to open."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources and make every accepted write durable."""

    async def maintain(self) -> None:  # noqa: B027 - optional hook
        """Periodic housekeeping run by the janitor (compaction, flushes)."""

    @abc.abstractmethod
    async def ping(self) -> None:
        """Raise `BackendUnavailable` unless the backend answers now."""

    @abc.abstractmethod
    async def get_namespace(self, name: str) -> NamespaceRecord | None: ...

    @abc.abstractmethod
    async def save_namespace(self, record: NamespaceRecord) -> None:
        """Create the namespace's collection if missing and store `record` with it."""

    @abc.abstractmethod
    async def delete_namespace(self, name: str) -> bool:
        """Drop the namespace with all its memories; False if it did not exist."""

    @abc.abstractmethod
    async def list_namespaces(self) -> list[NamespaceRecord]: ...

    @abc.abstractmethod
    async def get_memory(self, namespace: str, memory_id: str) -> MemoryRecord | None: ...

    @abc.abstractmethod
    async def upsert_memory(self, memory: MemoryRecord, vector: Sequence[float]) -> None:
        """Insert or replace the memory with `memory.id`; durable when it returns.

        Raises `NamespaceGone` when the namespace has no storage (deleted meanwhile).
        """

    @abc.abstractmethod
    async def query_memories(
        self,
        namespace: str,
        vector: Sequence[float],
        memory_filter: MemoryFilter,
        limit: int,
    ) -> list[ScoredMemory]:
        """The `limit` memories most similar (cosine) to `vector`, best first."""

    @abc.abstractmethod
    async def list_memories(
        self, namespace: str, memory_filter: MemoryFilter, limit: int
    ) -> list[MemoryRecord]:
        """Up to `limit` memories, newest `created_at` first (equal times in any order)."""

    @abc.abstractmethod
    async def delete_memory(self, namespace: str, memory_id: str) -> bool:
        """Delete one memory; False if the namespace holds no such id."""

    @abc.abstractmethod
    async def delete_expired_memories(self, namespace: str, now: datetime) -> int:
        """Delete memories with `expires_at <= now`; return how many went."""
