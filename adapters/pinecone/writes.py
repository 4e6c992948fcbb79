"""Writes of memories to Pinecone: one upsert, or many in batches of up to 100 vectors.

Each write carries its namespace's epoch in its metadata (vector_metadata.py)
and is recorded in the overlay, so the writer reads it back at once
(overlay.py). Keyword vectors go with a memory only on a dotproduct index.
"""

from __future__ import annotations

from collections.abc import Sequence

from pinecone import AsyncIndex

from adapters.base import MemoryRecord, SparseVector, StoredMemory, TokenVectors, with_keywords
from adapters.errors import NamespaceGone
from adapters.pinecone import transfer, vector_metadata
from adapters.pinecone.calls import call
from adapters.pinecone.connection import PineconeConnection
from adapters.pinecone.keywords import sparse_values
from adapters.pinecone.namespace_records import NamespaceRecords
from adapters.pinecone.overlay import FreshnessOverlay
from adapters.pinecone.reads import MemoryReads


class MemoryWrites:
    """`upsert_memory` and `upsert_memories` of `PineconeBackend` (backend.py)."""

    def __init__(
        self,
        connection: PineconeConnection,
        records: NamespaceRecords,
        reads: MemoryReads,
        overlay: FreshnessOverlay,
        *,
        budget_s: float,
    ) -> None:
        self._connection = connection
        self._records = records
        self._reads = reads
        self._overlay = overlay
        self._budget_s = budget_s

    def _sparse(self, keywords: SparseVector | None) -> dict[str, object] | None:
        """The sparse values to store with a memory: only a dotproduct index takes them."""
        return sparse_values(keywords) if self._connection.metric == "dotproduct" else None

    async def upsert_memory(
        self,
        memory: MemoryRecord,
        vector: Sequence[float],
        keywords: SparseVector | None = None,
        tokens: TokenVectors | None = None,
    ) -> None:
        """Pinecone keeps no token vectors (no multivectors): `tokens` is ignored."""
        state = await self._records.state(memory.namespace)
        if state is None:
            raise NamespaceGone(f"namespace {memory.namespace} was deleted")
        epoch = state[1]
        # Refuses oversize metadata: then nothing is written.
        metadata = vector_metadata.memory_to_metadata(memory, epoch)
        index = await self._connection.index()
        target = self._reads.pinecone_namespace(memory.namespace)
        item = transfer.upsert_item(memory.id, vector, metadata, self._sparse(keywords))
        await call(
            "upsert memory",
            lambda t: index.upsert(vectors=[item], namespace=target, timeout=t),
            self._budget_s,
        )
        self._overlay.memory_written(memory, vector, epoch, keywords)

    async def upsert_memories(
        self, memories: Sequence[StoredMemory], keywords: Sequence[SparseVector] | None = None
    ) -> int:
        """Upserts of up to 100 vectors per Pinecone namespace, instead of one per memory."""
        states = await self._records.states([memory.namespace for memory, _ in memories])
        # Per namespace: (memory, vector, metadata, keywords), metadata checked up front.
        groups: dict[
            str, list[tuple[MemoryRecord, list[float], transfer.Item, SparseVector | None]]
        ] = {}
        for (memory, vector), memory_keywords in with_keywords(memories, keywords):
            state = states.get(memory.namespace)
            if state is None:
                raise NamespaceGone(f"namespace {memory.namespace} was deleted")
            metadata = vector_metadata.memory_to_metadata(memory, state[1])  # refuses oversize
            row = (memory, list(vector), metadata, memory_keywords)
            groups.setdefault(memory.namespace, []).append(row)
        index = await self._connection.index()
        for name, items in groups.items():
            epoch = states[name][1]
            vectors = [
                transfer.upsert_item(memory.id, vector, metadata, self._sparse(row_keywords))
                for memory, vector, metadata, row_keywords in items
            ]
            for chunk in transfer.batches(vectors, self._connection.dimension):
                await self._upsert_chunk(index, name, chunk)
            for memory, vector, _, row_keywords in items:
                self._overlay.memory_written(memory, vector, epoch, row_keywords)
        return sum(len(items) for items in groups.values())

    async def _upsert_chunk(
        self, index: AsyncIndex, namespace: str, chunk: list[transfer.Item]
    ) -> None:
        target = self._reads.pinecone_namespace(namespace)
        await call(
            "upsert memories",
            lambda t: index.upsert(vectors=chunk, namespace=target, timeout=t),
            self._budget_s,
        )
