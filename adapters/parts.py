"""The optional parts of a backend: what one or two callers need, and not every backend has.

Each is asked for by the code that uses it, through a property of the backend that is None where
the backend has no such part (docs/development.md, "Adding a backend").
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from collections.abc import Mapping
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from adapters.values import FillVector
from adapters.values import SparseVector
from adapters.values import StoredMemory
from adapters.values import StoreSize
from adapters.values import VectorKind

# The attributes of `VectorBackend` that hand out a part (or None): `OptionalParts`.
PARTS = ("vector_fill", "transfer", "store_meta", "store_size")


class VectorFill(Protocol):
    """Vectors of each kind for memories stored without them, filled in place in the background.

    Why in place: a store written before a kind of vector existed gains it without copying or
    re-embedding anything. Keys are opaque to the plugin.
    """

    async def prepare(self, kind: VectorKind, *, reset: bool = False) -> None:
        """Make every memory able to hold vectors of `kind`, in place; idempotent.

        With `reset`, first drop every stored keyword vector (another encoder made them):
        `missing` then lists every memory again; token vectors of another shape are dropped
        here unasked. Raises `NotImplementedError` where the store turns out to keep none of
        `kind` (token vectors on Pinecone, keyword vectors on a cosine Pinecone index).
        """

    async def missing(
        self, kind: VectorKind, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        """A page of memories without vectors of `kind`, as (key, content), and the next cursor.

        Walks the whole store once from `cursor=None` until the returned cursor is None, in
        any order, whatever is filled meanwhile (adapters/walk.py).
        """

    async def fill(self, kind: VectorKind, items: Sequence[tuple[str, FillVector]]) -> int:
        """Give each keyed memory its vectors of `kind`, unless it has some by now; how many.

        "Unless it has some by now": a memory rewritten since it was listed carries the
        vectors of its new content, which must not be replaced by the old one's.
        """


class BulkTransfer(Protocol):
    """Whole namespaces out and many memories in: export, import, parity, migrate-layout."""

    def iter_memories(
        self, namespace: str, now: datetime, *, page_size: int = 256, with_vectors: bool = True
    ) -> AsyncIterator[list[StoredMemory]]:
        """Every memory of the namespace's current incarnation live at `now`, a page at a time.

        Why: the contract lists at most 100 memories per search and cannot name every
        namespace. Each memory comes with its stored vector (an empty list without
        `with_vectors`), in the store's own order, at most once. A namespace that does
        not exist yields nothing; memories written while iterating may or may not
        appear. Implemented as an async generator (the instrumentation times each page).
        """

    async def upsert_memories(
        self, memories: Sequence[StoredMemory], keywords: Sequence[SparseVector] | None = None
    ) -> int:
        """Insert or replace many memories, each as `upsert_memory` would; how many were written.

        `keywords`, when given, holds one keyword vector per memory, in order; one
        request per batch is what makes an import fast. Raises `NamespaceGone` when a
        namespace has no storage (earlier items may already be written: retry is safe).
        """

    async def place_memories(self, namespace: str, places: Sequence[tuple[str, int]]) -> int:
        """Give each memory of the namespace's current incarnation, by id, its place in the
        write order (`MemoryRecord.position`), changing nothing else; an id it no longer
        holds is skipped. How many were asked for."""


class StoreMeta(Protocol):
    """Store-wide facts: the embedding fingerprint, the keyword encoder and its state.

    Why: vectors of another vector space must never be mixed in silently
    (plugin/core/fingerprint.py). Keys and values are short strings.
    """

    async def read_store_meta(self) -> Mapping[str, str]:
        """Every fact written by `write_store_meta`; empty when none were."""

    async def write_store_meta(self, key: str, value: str) -> None:
        """Set one fact, durably; visible to every later `read_store_meta`."""


class StoreSizes(Protocol):
    """How big the store is, for the metrics: from what the store keeps, not a scan."""

    async def measure(self) -> StoreSize:
        """Namespaces and memories now, and the bytes of the volume where the store has one."""


class OptionalParts:
    """The parts `VectorBackend` may hand out; None where the backend has no such part.

    A backend overrides the property with one returning its part (a `cached_property`
    where the part is built on first use)."""

    @property
    def vector_fill(self) -> VectorFill | None:
        return None

    @property
    def transfer(self) -> BulkTransfer | None:
        return None

    @property
    def store_meta(self) -> StoreMeta | None:
        return None

    @property
    def store_size(self) -> StoreSizes | None:
        return None
