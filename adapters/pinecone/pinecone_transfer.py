"""Pinecone's bulk transfer (adapters/parts.py), which `PineconeBackend` hands out.

Batched upserts and whole-namespace reads (bulk_requests.py); each write carries its namespace's
epoch and is recorded in the overlay, so the writer reads it back at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any

from pinecone import AsyncIndex

from adapters.errors import NamespaceGone
from adapters.pinecone import bulk_requests
from adapters.pinecone import vector_metadata
from adapters.pinecone.bulk_requests import Item
from adapters.pinecone.index_connection import PineconeConnection
from adapters.pinecone.keywords import stored_sparse
from adapters.pinecone.reserved_records import NamespaceRecords
from adapters.pinecone.shared import Shared
from adapters.values import MemoryRecord
from adapters.values import SparseVector
from adapters.values import StoredMemory
from adapters.values import with_keywords

Keywords = SparseVector | None


class PineconeTransfer:
    """The `transfer` part of `PineconeBackend` (backend.py)."""

    def __init__(
        self, shared: Shared, connection: PineconeConnection, records: NamespaceRecords
    ) -> None:
        self._shared = shared
        self._connection = connection
        self._records = records

    async def upsert_memories(
        self, memories: Sequence[StoredMemory], keywords: Sequence[SparseVector] | None = None
    ) -> int:
        """Upserts of up to 100 vectors per Pinecone namespace, instead of one per memory."""
        states = await self._records.states([memory.namespace for memory, _ in memories])
        # Per namespace: (memory, vector, keywords, its upsert item), metadata checked up front.
        groups: dict[str, list[tuple[MemoryRecord, list[float], Keywords, Item]]] = {}
        for (memory, vector), memory_keywords in with_keywords(memories, keywords):
            state = states.get(memory.namespace)
            if state is None:
                raise NamespaceGone(f"namespace {memory.namespace} was deleted")
            metadata = vector_metadata.memory_to_metadata(memory, state[1])  # refuses oversize
            sparse = stored_sparse(self._connection.metric, memory_keywords)
            item = bulk_requests.upsert_item(memory.id, vector, metadata, sparse)
            row = (memory, list(vector), memory_keywords, item)
            groups.setdefault(memory.namespace, []).append(row)
        for name, items in groups.items():
            target = self._shared.pinecone_namespace(name)
            upserts = [item for *_, item in items]
            for chunk in bulk_requests.batches(upserts, self._connection.dimension):
                await self._shared.upsert("upsert memories", chunk, target)
            for memory, vector, row_keywords, _ in items:
                self._shared.overlay.memory_written(memory, vector, states[name][1], row_keywords)
        return sum(len(items) for items in groups.values())

    async def iter_memories(
        self,
        namespace: str,
        now: datetime,
        *,
        page_size: int = bulk_requests.PAGE,
        with_vectors: bool = True,
    ) -> AsyncIterator[list[StoredMemory]]:
        """List the namespace's ids and fetch them 100 at a time (bulk_requests.py): two
        requests per 100 memories, Pinecone's only way to visit a whole namespace."""
        state = await self._records.state(namespace)
        if state is None:
            return
        pages = bulk_requests.scan(
            self._shared, namespace, state[1], now, page_size=page_size, with_vectors=with_vectors
        )
        async for page in pages:
            yield page

    async def place_memories(self, namespace: str, places: Sequence[tuple[str, int]]) -> int:
        """One metadata update per memory: Pinecone updates a record by id, one at a time
        (an id it does not hold changes nothing); the overlay's recent writes follow."""
        state = await self._records.state(namespace)
        if state is None:
            return len(places)
        target = self._shared.pinecone_namespace(namespace)
        for memory_id, place in places:
            await self._shared.call("place memories", partial(_place, memory_id, place, target))
            self._shared.overlay.memory_placed(namespace, memory_id, place, state[1])
        return len(places)


def _place(memory_id: str, place: int, namespace: str, index: AsyncIndex, t: float) -> Any:
    placed = {vector_metadata.F_POSITION: place}
    return index.update(id=memory_id, set_metadata=placed, namespace=namespace, timeout=t)
