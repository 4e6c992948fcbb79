"""The backend interface: what a vector store must offer the plugin.

Modelled on qdrant-client's "one front, several implementations": the plugin's
service layer speaks only to `VectorBackend`, and `tests/backend_suite.py` runs
the same calls against every implementation. Types here are plain dataclasses,
never SDK objects, and no adapter imports aiohttp.

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
import enum
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from adapters.times import format_optional_time, format_time, parse_optional_time, parse_time

JsonObject = dict[str, Any]
# What every backend puts before its own names (collections, Pinecone namespaces).
DEFAULT_PREFIX = "memory-"

# A memory with the vector the store keeps for it (export, import, migrations).
StoredMemory = tuple["MemoryRecord", list[float]]


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

    def to_json_object(self) -> JsonObject:
        """The contract's `Namespace` object: the one JSON form of a record, on the wire,
        in the Qdrant records and in export files."""
        return {
            "name": self.name,
            "kind": self.kind,
            "expires_at": format_optional_time(self.expires_at),
            "metadata": self.metadata,
            "created_at": format_time(self.created_at),
        }

    @classmethod
    def from_json_object(cls, data: JsonObject) -> NamespaceRecord:
        return cls(
            name=data["name"],
            kind=data["kind"],
            created_at=parse_time(data["created_at"]),
            expires_at=parse_optional_time(data.get("expires_at")),
            metadata=data.get("metadata"),
        )


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
    """A memory with its ranking score: higher is better, within one answer.

    Cosine similarity for a dense query, BM25 for a keyword query, and for a hybrid
    query the fused score (adapters/qdrant/ranking.py, docs/backends.md "Hybrid search").
    """

    memory: MemoryRecord
    score: float


@dataclass(frozen=True, slots=True)
class SparseVector:
    """A keyword vector: token ids (32-bit hashes) with their weights, ids unique."""

    indices: tuple[int, ...]
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.indices) != len(self.values):
            raise ValueError("a sparse vector needs one value per index")


class SearchMode(enum.StrEnum):
    """How a search with a query ranks: MEMORY_PLUGIN_SEARCH."""

    HYBRID = "hybrid"  # dense and keyword candidates, fused by the store
    DENSE = "dense"  # cosine over the embeddings only
    KEYWORD = "keyword"  # BM25 over the keyword vectors only


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """What a search with a query sends the store: a dense vector, a keyword vector, or both.

    Both is a hybrid search. The plugin computes only what the mode needs (a keyword
    search costs no model call).
    """

    dense: Sequence[float] | None = None
    keywords: SparseVector | None = None

    def __post_init__(self) -> None:
        if self.dense is None and self.keywords is None:
            raise ValueError("a search query needs a dense vector, a keyword vector or both")


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """Which memories a query or listing may return.

    `now`: memories with `expires_at <= now` are excluded.
    `pinned`: None for both sides (pinned first), True or False for one side only.
    `kinds`: None for all kinds, else only these.
    """

    now: datetime
    pinned: bool | None = None
    kinds: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class StoreCondition:
    """What a backend that still serves wants an operator to know (health, metrics).

    `unreadable_namespaces`: names whose stored data cannot be read; requests for
    them answer 503 while the rest are served. `problems`: one line each, naming
    no file path (e.g. "the data volume is full ...").
    """

    unreadable_namespaces: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def degraded(self) -> bool:
        return bool(self.unreadable_namespaces or self.problems)


def with_keywords(
    memories: Sequence[StoredMemory], keywords: Sequence[SparseVector] | None
) -> Iterator[tuple[StoredMemory, SparseVector | None]]:
    """`upsert_memories`' arguments as pairs: each memory with its keyword vector or None."""
    if keywords is None:
        return ((stored, None) for stored in memories)
    return zip(memories, keywords, strict=True)


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
        self, memory: MemoryRecord, vector: Sequence[float], keywords: SparseVector | None = None
    ) -> None:
        """Insert or replace the memory with `memory.id`; durable when it returns.

        `keywords` is its keyword vector; a backend that keeps none ignores it, and a
        memory written without one is indexed later (`unindexed_memories`).
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
