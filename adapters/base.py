"""The backend interface: what a vector store must offer the plugin.

Modelled on qdrant-client's "one front, several implementations": the plugin's
service layer speaks only to `VectorBackend`, and `tests/backends/suite/` runs
the same calls against every implementation. The values it speaks in are plain
dataclasses (`adapters.values`, re-exported here), never SDK objects, and no
adapter imports aiohttp.

Semantics every implementation must keep:
- A namespace behaves as a collection: it has a record (name, kind, metadata,
  expires_at, created_at), full isolation, and `delete_namespace` makes it and
  all its memories vanish for every later call at once, even if the physical
  removal finishes later (in `maintain`). How it is stored is the adapter's
  business: a partition of one shared store (Qdrant), a Pinecone namespace, or a
  collection of its own (Qdrant's `collections` layout).
- Memory ids are UUIDs in canonical (lower-case, hyphenated) form. An id is
  scoped to its namespace: `upsert_memory` with a known (namespace, id) replaces
  that memory in place, and the same id in two namespaces is two memories.
- Reads span namespaces: `query_memories` and `list_memories` take every
  namespace a search asks for, so a backend can answer with one engine request.
  Both return pinned memories first, then each side best first or newest first,
  `limit` in all (`adapters.merge` does this for adapters that must ask per
  namespace).
- Two vectors per memory where the backend can keep them: the dense embedding
  and a sparse keyword vector (BM25 term weights), both computed by the plugin.
  A `SearchQuery` carries either or both; `search_modes` says which shapes the
  backend answers (docs/backends.md, "Hybrid search").
- Expiry: `MemoryFilter.now` excludes every memory whose `expires_at` is at or
  before it, whatever the janitor has already deleted.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar

from adapters.values import (
    JsonObject,
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
    with_keywords,
)

if TYPE_CHECKING:
    from adapters.token_index import TokenIndex

__all__ = [
    "DEFAULT_PREFIX",
    "JsonObject",
    "MemoryFilter",
    "MemoryRecord",
    "NamespaceRecord",
    "ScoredMemory",
    "SearchMode",
    "SearchQuery",
    "SparseVector",
    "StoreCondition",
    "StoredMemory",
    "TokenVectors",
    "VectorBackend",
    "with_keywords",
]

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
        """The `SearchQuery` modes this backend answers. Default: dense only.

        A property because a backend may learn it only from its store (a Pinecone
        index's metric); the plugin refuses a MEMORY_PLUGIN_SEARCH outside it.
        """
        return frozenset({SearchMode.DENSE})

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
        """Check the stored data against itself now; the problems found (none: all agree).

        For stores whose halves can disagree (the embedded store's records and
        engine files); a hosted service checks itself, so by default nothing to do.
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
        """Drop the namespace with all its memories; False if it did not exist.

        When it returns, no call sees the namespace or any of its memories, and a
        namespace created again under the same name starts empty.
        """

    @abc.abstractmethod
    async def list_namespaces(self) -> list[NamespaceRecord]: ...

    async def expired_namespaces(self, now: datetime) -> list[NamespaceRecord]:
        """Namespaces whose `expires_at` is at or before `now`. Default: scan them all."""
        return [record for record in await self.list_namespaces() if record.is_expired(now)]

    @abc.abstractmethod
    async def get_memory(self, namespace: str, memory_id: str) -> MemoryRecord | None: ...

    async def get_stored_memory(self, namespace: str, memory_id: str) -> StoredMemory | None:
        """`get_memory` with the dense vector stored for it (read with it, in one lookup).

        Why: a commit whose content is already stored as is reuses that vector instead of
        asking the model again (plugin/core/service.py). Default: the memory with an empty
        vector, which stands for nothing (the service then embeds as usual).
        """
        memory = await self.get_memory(namespace, memory_id)
        return None if memory is None else (memory, [])

    @abc.abstractmethod
    async def upsert_memory(
        self,
        memory: MemoryRecord,
        vector: Sequence[float],
        keywords: SparseVector | None = None,
        tokens: TokenVectors | None = None,
    ) -> None:
        """Insert or replace the memory with `memory.id`; durable when it returns.

        `keywords` is its keyword vector, `tokens` its token vectors; a backend that keeps
        none ignores them, and a memory written without them is indexed later
        (`unindexed_memories`, `token_index`).
        Raises `NamespaceGone` when the namespace has no storage (deleted meanwhile).
        """

    @abc.abstractmethod
    async def query_memories(
        self,
        namespaces: Sequence[str],
        query: SearchQuery,
        memory_filter: MemoryFilter,
        limit: int,
    ) -> list[ScoredMemory]:
        """Up to `limit` memories of `namespaces`: pinned first, each side best first.

        The query's shape must be one of `search_modes`. Namespaces that do not exist
        contribute nothing.
        """

    @abc.abstractmethod
    async def list_memories(
        self, namespaces: Sequence[str], memory_filter: MemoryFilter, limit: int
    ) -> list[MemoryRecord]:
        """Up to `limit` memories of `namespaces`: pinned first, each side newest first.

        Equal `created_at` come in any order; namespaces that do not exist contribute nothing.
        """

    @abc.abstractmethod
    async def delete_memory(self, namespace: str, memory_id: str) -> bool:
        """Delete one memory; False if the namespace holds no such id."""

    @abc.abstractmethod
    async def delete_expired_memories(self, now: datetime) -> int:
        """Delete every memory with `expires_at <= now`, in every namespace; how many went.

        The janitor's hot loop: its cost should not grow with the number of
        namespaces that have nothing to expire.
        """

    def token_index(self) -> TokenIndex | None:
        """The part filling in token vectors (adapters/token_index.py); None: this
        backend keeps none, and ranks without them."""
        return None

    # -- store metadata -------------------------------------------------------------

    async def read_store_meta(self) -> Mapping[str, str]:
        """Store-wide facts written by `write_store_meta`; empty when none were.

        Why: the embedding fingerprint (model and runtime) is recorded with the store,
        so that vectors of another vector space are never mixed in silently
        (plugin/core/fingerprint.py). Keys and values are short strings.
        """
        raise NotImplementedError(f"the {self.name} backend keeps no store metadata")

    async def write_store_meta(self, key: str, value: str) -> None:
        """Set one store-wide fact, durably; visible to every later `read_store_meta`."""
        raise NotImplementedError(f"the {self.name} backend keeps no store metadata")

    # -- bulk transfer (export, import, parity) -------------------------------------

    async def iter_memories(
        self,
        namespace: str,
        now: datetime,
        *,
        page_size: int = 256,
        with_vectors: bool = True,
    ) -> AsyncIterator[list[StoredMemory]]:
        """Every memory of the namespace's current incarnation live at `now`, a page at a time.

        Why: the contract lists at most 100 memories per search and cannot name every
        namespace, so export, import and the parity check read the store through this.
        Each memory comes with its stored vector (an empty list without `with_vectors`),
        in the store's own order (not by time), at most once. A namespace that does not
        exist yields nothing; memories written while iterating may or may not appear.
        """
        raise NotImplementedError(f"the {self.name} backend cannot stream its memories")
        yield []  # pragma: no cover - makes this an async generator, as overrides are

    async def upsert_memories(
        self, memories: Sequence[StoredMemory], keywords: Sequence[SparseVector] | None = None
    ) -> int:
        """Insert or replace many memories, each as `upsert_memory` would; how many were written.

        `keywords`, when given, holds one keyword vector per memory, in order.
        Default: one `upsert_memory` each. Backends override it with one request per
        batch, which is what makes an import fast. Raises `NamespaceGone` when a
        namespace has no storage (earlier items may already be written: retry is safe).
        """
        for (memory, vector), memory_keywords in with_keywords(memories, keywords):
            await self.upsert_memory(memory, vector, memory_keywords)
        return len(memories)

    # -- the keyword index (plugin/embedding/keyword_index.py) --------------------------------

    async def prepare_keywords(self, *, reset: bool = False) -> None:
        """Make every memory able to hold a keyword vector, in place; idempotent.

        With `reset`, first drop every stored keyword vector (another encoder made
        them): `unindexed_memories` then lists every memory again. Why here and not
        at every start: a store written before keyword vectors existed gains them
        without copying or re-embedding anything.
        """
        raise NotImplementedError(f"the {self.name} backend keeps no keyword vectors")

    async def unindexed_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        """A page of memories with no keyword vector, as (key, content), and the next cursor.

        Walks the whole store once from `cursor=None` until the returned cursor is
        None, in any order, whatever is indexed meanwhile. Keys are opaque to the plugin.
        """
        raise NotImplementedError(f"the {self.name} backend keeps no keyword vectors")

    async def index_keywords(self, items: Sequence[tuple[str, SparseVector]]) -> int:
        """Give each keyed memory its keyword vector, unless it has one by now; how many.

        "Unless it has one by now": a memory rewritten since it was listed carries the
        keyword vector of its new content, which must not be replaced by the old one's.
        """
        raise NotImplementedError(f"the {self.name} backend keeps no keyword vectors")
