"""The backend interface: what a request needs of a vector store.

`VectorBackend`, in plain values (`adapters.values`); its docstrings are the semantics every
backend keeps (tests/backends/suite/). What only some callers need is in adapters/parts.py.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Mapping
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from adapters.errors import BackendError
from adapters.parts import OptionalParts
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import ScoredMemory
from adapters.values import SearchMode
from adapters.values import SearchQuery
from adapters.values import StoreCondition
from adapters.values import StoredMemory

# What every backend puts before its own names (collections, Pinecone namespaces).
DEFAULT_PREFIX = "memory-"


class VectorBackend(OptionalParts, abc.ABC):
    """A vector store of namespaces of memories. Any method may raise `BackendUnavailable`;
    `start` must not need the backend reachable (the server boots during an outage)."""

    name: str  # in messages and export headers: "qdrant-edge", "qdrant", "pinecone"
    # Whether this process is the store's one writer (a lock on the embedded store's data
    # directory); a server's or Pinecone's store may have other writers (other replicas).
    sole_writer: bool = False
    # Whether the store makes a memory's keyword vector from its content, and a search's
    # from its text, where asked (`MemoryVectors.make_keywords`, `SearchQuery.text`): the
    # embedded store, in its engine worker; for the others the plugin makes them.
    makes_keywords: bool = False

    def __init__(self, dimension: int, token_dimension: int | None = None) -> None:
        self.dimension = dimension
        # Each stored token vector's size (the embedder's fixed projection's); None: `dimension`.
        self.token_dimension = dimension if token_dimension is None else token_dimension

    @property
    def search_modes(self) -> frozenset[SearchMode]:
        """The `SearchQuery` shapes it answers: dense, a keyword vector (BM25) or both
        (docs/backends.md, "Hybrid search"); Pinecone learns them from its index."""
        return frozenset({SearchMode.DENSE})

    async def start(self) -> None:
        """Open local resources. Default: nothing to open."""

    async def close(self) -> None:
        """Release resources and make every accepted write durable."""

    async def maintain(self) -> None:
        """Periodic housekeeping run by the janitor: finish namespace deletes, compact, flush."""

    @abc.abstractmethod
    async def ping(self) -> None:
        """Raise `BackendUnavailable` unless the backend answers now."""

    def condition(self) -> StoreCondition:
        """Degradations seen so far (cheap, no I/O: `ping` refreshes). Default: none."""
        return StoreCondition()

    async def verify(self) -> tuple[str, ...]:
        """What a check of the stored data against itself finds now (verify-store)."""
        return ()

    async def accept(self) -> list[str]:
        """verify-store --accept: vouch for the store as it is now (namespaces short of
        memories serve again); the namespaces accepted. Default: nothing kept to vouch for."""
        return []

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
        """The memory and its stored dense vector, in one lookup: a commit of unchanged
        content reuses the vector instead of asking the model (plugin/core/service.py)."""

    async def get_memory(self, namespace: str, memory_id: str) -> MemoryRecord | None:
        found = await self.get_stored_memory(namespace, memory_id)
        return None if found is None else found[0]

    async def upsert_memory(self, memory: MemoryRecord, vectors: MemoryVectors) -> None:
        """Insert or replace the memory with `memory.id`, durably, with its dense vector and
        its keyword and token vectors where the backend keeps them; `NamespaceGone` when the
        namespace has no storage. Default: through the `transfer` part, as one of many
        (no tokens)."""
        if self.transfer is None:
            raise NotImplementedError(f"the {self.name} backend writes no memories")
        keyed = None if vectors.keywords is None else [vectors.keywords]
        dense = [float(x) for x in vectors.dense]
        await self.transfer.upsert_memories([(memory, dense)], keyed)

    async def upsert_batch(
        self, batch: Sequence[tuple[MemoryRecord, MemoryVectors]]
    ) -> list[BackendError | None]:
        """Each of `batch` upserted as `upsert_memory` would, together where the backend can
        (the embedded store: one engine update, one sync): for each, None once it is durable,
        else the `BackendError` `upsert_memory` would have raised for it. Default: one
        `upsert_memory` each, side by side."""
        done = await asyncio.gather(
            *(self.upsert_memory(memory, vectors) for memory, vectors in batch),
            return_exceptions=True,
        )
        return [failed_write(outcome) for outcome in done]

    @abc.abstractmethod
    async def query_memories(
        self, namespaces: Sequence[str], query: SearchQuery, memory_filter: MemoryFilter, limit: int
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


def failed_write(outcome: BaseException | None) -> BackendError | None:
    """A write's outcome in a batch: None, or its `BackendError`; anything else is raised
    (a bug, or a cancellation, is not one memory's answer)."""
    if outcome is None or isinstance(outcome, BackendError):
        return outcome
    raise outcome


class AnsweredBy:
    """A request method answered by one of the backend's parts: `AnsweredBy("_reads")` as the
    class's `query_memories` makes `backend.query_memories` the part's own bound method, so
    the call goes straight to the part, with no forwarding method written or run."""

    def __init__(self, part: str) -> None:
        self.part = part
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, backend: object, owner: type | None = None) -> Any:
        if backend is None:
            return self
        return getattr(getattr(backend, self.part), self.name)
