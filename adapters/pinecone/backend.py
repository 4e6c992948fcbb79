"""`VectorBackend` on a Pinecone serverless index, through the official SDK's async client.

A namespace is the Pinecone namespace `prefix + name`, a memory id the vector id; one module per
concern beside it. See docs/backends.md, "Pinecone".
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from datetime import datetime

from adapters.base import DEFAULT_PREFIX
from adapters.base import VectorBackend
from adapters.errors import NamespaceGone
from adapters.pinecone import bulk_requests
from adapters.pinecone import vector_metadata
from adapters.pinecone.calls import PineconeMissing
from adapters.pinecone.expiry import ExpirySweep
from adapters.pinecone.index_connection import PineconeConnection
from adapters.pinecone.keywords import PineconeVectorFill
from adapters.pinecone.keywords import stored_sparse
from adapters.pinecone.overlay import FreshnessOverlay
from adapters.pinecone.pinecone_transfer import PineconeTransfer
from adapters.pinecone.reads import MemoryReads
from adapters.pinecone.reserved_records import NamespaceRecords
from adapters.pinecone.shared import Shared
from adapters.pinecone.store_meta import PineconeStoreMeta
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import ScoredMemory
from adapters.values import SearchMode
from adapters.values import SearchQuery
from adapters.values import StoredMemory


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
        hybrid: bool = False,
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
            hybrid=hybrid,
        )
        unit = vector_metadata.fixed_unit_vector(dimension)
        self.overlay = FreshnessOverlay(freshness_window_s, overlay_max_entries, clock)
        shared = Shared(prefix, unit, self.overlay, self._connection.index, timeout_s)
        self._shared, self._ns = shared, shared.pinecone_namespace
        self._records = NamespaceRecords(shared, clock)
        self._meta = PineconeStoreMeta(shared)
        self._reads = MemoryReads(shared)
        self._expiry = ExpirySweep(shared, self._records, self._reads)
        self._fill = PineconeVectorFill(self._connection)
        self._transfer = PineconeTransfer(shared, self._connection, self._records)

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Check the index: a wrong key, index, dimension or metric ends start-up."""
        await self._connection.start()

    async def close(self) -> None:
        await self._connection.close()

    @property
    def search_modes(self) -> frozenset[SearchMode]:
        """Hybrid on a dotproduct index (or when asked for: start-up then requires one)."""
        if self._connection.hybrid or self._connection.metric == "dotproduct":
            return frozenset({SearchMode.DENSE, SearchMode.HYBRID})
        return frozenset({SearchMode.DENSE})

    # -- the optional parts (adapters/parts.py) ----------------------------------------

    @property
    def transfer(self) -> PineconeTransfer:
        """Batched upserts, and every memory of a namespace listed and fetched."""
        return self._transfer

    @property
    def store_meta(self) -> PineconeStoreMeta:
        return self._meta

    @property
    def vector_fill(self) -> PineconeVectorFill:
        return self._fill

    # -- namespaces --------------------------------------------------------------------

    async def ping(self) -> None:
        stats = "describe_index_stats"
        await self._shared.call(stats, lambda i, t: i.describe_index_stats(timeout=t))

    async def get_namespace(self, name: str) -> NamespaceRecord | None:
        state = await self._records.state(name)
        return state[0] if state else None

    async def get_namespaces(self, names: Sequence[str]) -> Mapping[str, NamespaceRecord]:
        """One fetch of every name the overlay and the short cache do not answer."""
        states = await self._records.states(names)
        return {name: record for name, (record, _) in states.items()}

    async def save_namespace(self, record: NamespaceRecord) -> None:
        await self._records.save(record)

    async def delete_namespace(self, name: str) -> bool:
        """Vectors first, then the record: a failure half-way leaves a namespace that a
        retried DELETE finishes, never a record-less namespace full of vectors."""
        if await self._records.state(name) is None:
            return False
        with contextlib.suppress(PineconeMissing):  # no vector was ever written there
            await self._shared.call(
                "delete namespace", lambda i, t: i.delete_namespace(name=self._ns(name), timeout=t)
            )
        await self._records.delete(name)
        return True

    async def list_namespaces(self) -> list[NamespaceRecord]:
        """Every record (the janitor's use only: its cost grows with the namespace count)."""
        return [record for record, _ in (await self._records.all()).values()]

    # -- memories ----------------------------------------------------------------------

    async def get_stored_memory(self, namespace: str, memory_id: str) -> StoredMemory | None:
        """The overlay's entry if recent (None if recently deleted), else one fetch."""
        state = await self._records.state(namespace)
        if state is None:
            return None
        entry = self.overlay.memory(namespace, memory_id, state[1])
        if entry is not None:
            if entry.memory is None or entry.vector is None:
                return None
            return entry.memory, [float(x) for x in entry.vector]
        found = await self._shared.fetch("fetch memory", [memory_id], self._ns(namespace))
        vector = found.get(memory_id)
        metadata = vector.metadata if vector else None
        if vector is None or not metadata or metadata.get(vector_metadata.F_EPOCH) != state[1]:
            return None
        memory = vector_metadata.memory_from_metadata(memory_id, namespace, metadata)
        return memory, [float(x) for x in vector.values]

    async def upsert_memory(self, memory: MemoryRecord, vectors: MemoryVectors) -> None:
        """Pinecone keeps no token vectors (no multivectors): `vectors.tokens` is ignored."""
        state = await self._records.state(memory.namespace)
        if state is None:
            raise NamespaceGone(f"namespace {memory.namespace} was deleted")
        epoch = state[1]
        # Refuses oversize metadata: then nothing is written.
        metadata = vector_metadata.memory_to_metadata(memory, epoch)
        sparse = stored_sparse(self._connection.metric, vectors.keywords)
        item = bulk_requests.upsert_item(memory.id, vectors.dense, metadata, sparse)
        await self._shared.upsert("upsert memory", [item], self._ns(memory.namespace))
        self.overlay.memory_written(memory, vectors.dense, epoch, vectors.keywords)

    async def query_memories(
        self, namespaces: Sequence[str], query: SearchQuery, memory_filter: MemoryFilter, limit: int
    ) -> list[ScoredMemory]:
        epochs = await self._epochs(namespaces)
        return await self._reads.query(epochs, query, memory_filter, limit)

    async def list_memories(
        self, namespaces: Sequence[str], memory_filter: MemoryFilter, limit: int
    ) -> list[MemoryRecord]:
        epochs = await self._epochs(namespaces)
        return await self._reads.listing(epochs, memory_filter, limit)

    async def _epochs(self, namespaces: Sequence[str]) -> dict[str, str]:
        """The epochs of the live ones among `namespaces` (one fetch for all of them)."""
        states = await self._records.states(namespaces)
        return {name: epoch for name, (_, epoch) in states.items()}

    async def delete_memory(self, namespace: str, memory_id: str) -> bool:
        state = await self._records.state(namespace)
        if state is None or await self.get_memory(namespace, memory_id) is None:
            return False
        await self._shared.call(
            "delete memory",
            lambda i, t: i.delete(ids=[memory_id], namespace=self._ns(namespace), timeout=t),
        )
        self.overlay.memory_deleted(namespace, memory_id, state[1])
        return True

    async def delete_expired_memories(self, now: datetime) -> int:
        return await self._expiry.sweep(now)
