"""`VectorBackend` on a Pinecone serverless index, through the official SDK's async client.

Layout (see README "Pinecone"):
- One existing index (classic vector API, cosine, the embedder's dimension).
- A namespace of ours is the Pinecone namespace `prefix + name`. Pinecone takes
  1-512 ASCII characters without NUL; our names are at most 256 characters of
  `[a-z:A-Z0-9_.-]`, so the mapping is the identity plus the prefix: injective.
- Namespace records live in one reserved Pinecone namespace, `prefix + "~namespaces"`,
  one vector per namespace with the name as its id (`~` never starts a name, so
  the reserved namespace cannot collide with a mapped one): `adapters.pinecone_records`.
- Memory ids are the vector ids; upsert is native, so a retried commit updates in place.
- Metadata layout, the 40 KB limit and namespace epochs: `adapters.pinecone_layout`.
- Read-your-writes: `adapters.pinecone_overlay`. Retries and errors: `adapters.pinecone_calls`.
- Listing without a query: `adapters.pinecone_listing`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from pinecone import AsyncIndex
from pinecone.models.vectors.vector import ScoredVector

from adapters import pinecone_layout as layout
from adapters.base import MemoryFilter, MemoryRecord, NamespaceRecord, ScoredMemory, VectorBackend
from adapters.errors import NamespaceGone
from adapters.naming import DEFAULT_PREFIX
from adapters.payload import to_micros
from adapters.pinecone_calls import PineconeMissing, call
from adapters.pinecone_connection import PineconeConnection
from adapters.pinecone_listing import newest_memories
from adapters.pinecone_overlay import FreshnessOverlay
from adapters.pinecone_records import NamespaceRecords

QUERY_TOP_K_WITH_METADATA = 1000


class PineconeBackend(VectorBackend):
    name = "pinecone"

    def __init__(
        self,
        dimension: int,
        *,
        api_key: str,
        index_name: str | None = None,
        host: str | None = None,
        prefix: str = DEFAULT_PREFIX,
        timeout_s: float = 1.5,
        freshness_window_s: float = 30.0,
        overlay_max_entries: int = 5000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(dimension)
        self._connection = PineconeConnection(
            dimension,
            api_key=api_key,
            index_name=index_name,
            host=host,
            budget_s=timeout_s,
            clock=clock,
        )
        self._prefix = prefix
        self._budget_s = timeout_s
        self._unit = layout.fixed_unit_vector(dimension)
        self.overlay = FreshnessOverlay(freshness_window_s, overlay_max_entries, clock)
        self._records = NamespaceRecords(
            prefix=prefix,
            unit_vector=self._unit,
            overlay=self.overlay,
            ready=self._ready,
            budget_s=timeout_s,
            clock=clock,
        )

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Check the index: a wrong key, index, dimension or metric ends start-up."""
        await self._connection.start()

    async def close(self) -> None:
        await self._connection.close()

    async def _ready(self) -> AsyncIndex:
        return await self._connection.index()

    # -- namespaces --------------------------------------------------------------------

    def _ns(self, name: str) -> str:
        return self._prefix + name

    async def ping(self) -> None:
        index = await self._ready()
        await call(
            "describe_index_stats", lambda t: index.describe_index_stats(timeout=t), self._budget_s
        )

    async def get_namespace(self, name: str) -> NamespaceRecord | None:
        state = await self._records.state(name)
        return state[0] if state else None

    async def save_namespace(self, record: NamespaceRecord) -> None:
        await self._records.save(record)

    async def delete_namespace(self, name: str) -> bool:
        """Vectors first, then the record: a failure half-way leaves a namespace that a
        retried DELETE finishes, never a record-less namespace full of vectors."""
        if await self._records.state(name) is None:
            return False
        index = await self._ready()
        with contextlib.suppress(PineconeMissing):  # no vector was ever written there
            await call(
                "delete namespace",
                lambda t: index.delete_namespace(name=self._ns(name), timeout=t),
                self._budget_s,
            )
        await self._records.delete(name)
        return True

    async def list_namespaces(self) -> list[NamespaceRecord]:
        """Every record (the janitor's use only: its cost grows with the namespace count)."""
        return await self._records.all()

    # -- memories ----------------------------------------------------------------------

    async def get_memory(self, namespace: str, memory_id: str) -> MemoryRecord | None:
        state = await self._records.state(namespace)
        if state is None:
            return None
        entry = self.overlay.memory(namespace, memory_id, state[1])
        if entry is not None:
            return entry.memory
        index = await self._ready()
        found = await call(
            "fetch memory",
            lambda t: index.fetch(ids=[memory_id], namespace=self._ns(namespace), timeout=t),
            self._budget_s,
        )
        vector = found.vectors.get(memory_id)
        metadata = vector.metadata if vector else None
        if not metadata or metadata.get(layout.F_EPOCH) != state[1]:
            return None
        return layout.memory_from_metadata(memory_id, namespace, metadata)

    async def upsert_memory(self, memory: MemoryRecord, vector: Sequence[float]) -> None:
        state = await self._records.state(memory.namespace)
        if state is None:
            raise NamespaceGone(f"namespace {memory.namespace} was deleted")
        epoch = state[1]
        metadata = layout.memory_to_metadata(memory, epoch)  # refuses oversize: nothing written
        item = {"id": memory.id, "values": [float(x) for x in vector], "metadata": metadata}
        index = await self._ready()
        await call(
            "upsert memory",
            lambda t: index.upsert(vectors=[item], namespace=self._ns(memory.namespace), timeout=t),
            self._budget_s,
        )
        self.overlay.memory_written(memory, vector, epoch)

    async def query_memories(
        self,
        namespace: str,
        vector: Sequence[float],
        memory_filter: MemoryFilter,
        limit: int,
    ) -> list[ScoredMemory]:
        state = await self._records.state(namespace)
        if state is None:
            return []
        epoch = state[1]
        top_k = min(limit + len(self.overlay.ids_in(namespace)), QUERY_TOP_K_WITH_METADATA)
        index = await self._ready()
        found = await call(
            "query",
            lambda t: index.query(
                top_k=top_k,
                vector=[float(x) for x in vector],
                namespace=self._ns(namespace),
                filter=layout.memory_filter(epoch, memory_filter),
                include_metadata=True,
                timeout=t,
            ),
            self._budget_s,
        )
        hits = [
            ScoredMemory(layout.memory_from_metadata(m.id, namespace, m.metadata or {}), m.score)
            for m in found.matches
        ]
        return self.overlay.merge_query(namespace, epoch, vector, memory_filter, hits, limit)

    async def list_memories(
        self, namespace: str, memory_filter: MemoryFilter, limit: int
    ) -> list[MemoryRecord]:
        state = await self._records.state(namespace)
        if state is None:
            return []
        epoch = state[1]

        async def scan(flt: dict[str, Any]) -> list[MemoryRecord]:
            matches = await self._unranked(namespace, flt, "list memories", with_metadata=True)
            return [layout.memory_from_metadata(m.id, namespace, m.metadata or {}) for m in matches]

        want = min(limit + len(self.overlay.ids_in(namespace)), QUERY_TOP_K_WITH_METADATA)
        base = layout.memory_filter(epoch, memory_filter)
        listed = await newest_memories(scan, base, want, QUERY_TOP_K_WITH_METADATA)
        return self.overlay.merge_listing(namespace, epoch, memory_filter, listed, limit)

    async def delete_memory(self, namespace: str, memory_id: str) -> bool:
        state = await self._records.state(namespace)
        if state is None or await self.get_memory(namespace, memory_id) is None:
            return False
        index = await self._ready()
        await call(
            "delete memory",
            lambda t: index.delete(ids=[memory_id], namespace=self._ns(namespace), timeout=t),
            self._budget_s,
        )
        self.overlay.memory_deleted(namespace, memory_id, state[1])
        return True

    async def delete_expired_memories(self, namespace: str, now: datetime) -> int:
        """Delete by metadata filter what has expired; count what Pinecone and the overlay
        show (Pinecone's part capped at one query's 1000). Pinecone applies writes in order,
        so the delete also covers expired writes it does not show yet."""
        state = await self._records.state(namespace)
        if state is None:
            return 0
        epoch = state[1]
        expired = {
            "$and": [
                {layout.F_EPOCH: {"$eq": epoch}},
                {layout.F_EXPIRES_US: {"$lte": to_micros(now)}},
            ]
        }
        matches = await self._unranked(namespace, expired, "find expired", with_metadata=False)
        gone = {match.id for match in matches}
        recent = self.overlay.live_memories(namespace, epoch)
        gone |= {memory.id for memory, _ in recent if memory.is_expired(now)}
        if not gone:
            return 0
        index = await self._ready()
        await call(
            "delete expired",
            lambda t: index.delete(filter=expired, namespace=self._ns(namespace), timeout=t),
            self._budget_s,
        )
        for memory_id in gone:
            self.overlay.memory_deleted(namespace, memory_id, epoch)
        return len(gone)

    async def _unranked(
        self, namespace: str, flt: dict[str, Any], operation: str, *, with_metadata: bool
    ) -> list[ScoredVector]:
        """Up to 1000 memories matching `flt`, in no useful order (a query by a fixed vector)."""
        index = await self._ready()
        found = await call(
            operation,
            lambda t: index.query(
                top_k=QUERY_TOP_K_WITH_METADATA,
                vector=self._unit,
                namespace=self._ns(namespace),
                filter=flt,
                include_metadata=with_metadata,
                timeout=t,
            ),
            self._budget_s,
        )
        return list(found.matches)
