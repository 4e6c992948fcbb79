"""Pinecone's bulk transfer (adapters/parts.py), which `PineconeBackend` hands out.

A namespace is read by listing its ids and fetching them, 100 at a time (Pinecone's only way);
writes go in upserts of at most 100 vectors. Each write carries its namespace's epoch and is
recorded in the overlay, so the writer reads it back at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any

from pinecone import AsyncIndex

from adapters.errors import NamespaceGone
from adapters.pinecone import vector_metadata
from adapters.pinecone.index_connection import PineconeConnection
from adapters.pinecone.index_connection import PineconeMissing
from adapters.pinecone.index_connection import Shared
from adapters.pinecone.keywords import stored_sparse
from adapters.pinecone.reserved_records import NamespaceRecords
from adapters.values import MemoryRecord
from adapters.values import SparseVector
from adapters.values import StoredMemory
from adapters.values import with_keywords

PAGE = 100  # ids per list page and per fetch; vectors per upsert
UPSERT_MAX_BYTES = 1_500_000  # estimated JSON bytes per upsert, under Pinecone's 2 MB
Item = dict[str, Any]


class PineconeTransfer:
    """The `transfer` part of `PineconeBackend` (backend.py), and its single writes."""

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
        groups: dict[str, list[tuple[MemoryRecord, list[float], SparseVector | None, Item]]] = {}
        for (memory, vector), memory_keywords in with_keywords(memories, keywords):
            state = states.get(memory.namespace)
            if state is None:
                raise NamespaceGone(f"namespace {memory.namespace} was deleted")
            metadata = vector_metadata.memory_to_metadata(memory, state[1])  # refuses oversize
            values = [float(x) for x in vector]
            item: Item = {"id": memory.id, "values": values, "metadata": metadata}
            if (sparse := stored_sparse(self._connection.metric, memory_keywords)) is not None:
                item["sparse_values"] = sparse
            row = (memory, values, memory_keywords, item)
            groups.setdefault(memory.namespace, []).append(row)
        for name, items in groups.items():
            target = self._shared.pinecone_namespace(name)
            upserts = [item for *_, item in items]
            for chunk in batches(upserts, self._connection.dimension):
                await self._shared.upsert("upsert memories", chunk, target)
            for memory, vector, row_keywords, _ in items:
                self._shared.overlay.memory_written(memory, vector, states[name][1], row_keywords)
        return sum(len(items) for items in groups.values())

    async def iter_memories(
        self, namespace: str, now: datetime, *, page_size: int = PAGE, with_vectors: bool = True
    ) -> AsyncIterator[list[StoredMemory]]:
        """Pages of the live memories of the namespace's epoch: two requests per 100 of
        Pinecone's, then the overlay's recent writes. Ids with a recent write or delete are
        taken from the overlay only (Pinecone may not show them yet): each memory comes once,
        a recently deleted one never."""
        state = await self._records.state(namespace)
        if state is None:
            return
        epoch, shared = state[1], self._shared
        target, recent = shared.pinecone_namespace(namespace), shared.overlay.ids_in(namespace)
        size = max(1, min(page_size, PAGE))
        token: str | None = None
        while True:
            try:
                ids, token = await shared.list_page("list memories", target, size, token)
            except PineconeMissing:  # nothing was ever written there
                ids, token = [], None
            ids = [vector_id for vector_id in ids if vector_id not in recent]
            page = await shared.fetch("fetch memories", ids, target) if ids else {}
            found: list[StoredMemory] = []
            for vector_id in ids:
                vector = page.get(vector_id)
                metadata = vector.metadata if vector is not None else None
                if vector is None or not metadata or metadata.get(vector_metadata.F_EPOCH) != epoch:
                    continue
                memory = vector_metadata.memory_from_metadata(vector_id, namespace, metadata)
                if not memory.is_expired(now):
                    found.append(
                        (memory, [float(x) for x in vector.values] if with_vectors else [])
                    )
            if found:
                yield found
            if not token:
                break
        fresh: list[StoredMemory] = [
            (memory, _values(vector, with_vectors))
            for memory, vector, _ in shared.overlay.live_memories(namespace, epoch)
            if not memory.is_expired(now)
        ]
        if fresh:
            yield fresh

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


def _values(vector: Iterable[float], wanted: bool) -> list[float]:
    return [float(x) for x in vector] if wanted else []


def _place(memory_id: str, place: int, namespace: str, index: AsyncIndex, t: float) -> Any:
    placed = {vector_metadata.F_POSITION: place}
    return index.update(id=memory_id, set_metadata=placed, namespace=namespace, timeout=t)


def batches(items: Sequence[Item], dimension: int) -> Iterator[list[Item]]:
    """Upsert-sized chunks, in order: at most `PAGE` vectors and about `UPSERT_MAX_BYTES` each."""
    chunk: list[Item] = []
    size = 0
    for item in items:
        item_size = _json_bytes(item, dimension)
        if chunk and (len(chunk) >= PAGE or size + item_size > UPSERT_MAX_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += item_size
    if chunk:
        yield chunk


def _json_bytes(item: Item, dimension: int) -> int:
    """About what `item` takes in an upsert's JSON: a float up to ~24 bytes, the metadata
    as Pinecone counts it."""
    sparse = len(item.get("sparse_values", {}).get("indices", ()))
    return 24 * (dimension + 2 * sparse) + vector_metadata.metadata_size(item["metadata"]) + 100
