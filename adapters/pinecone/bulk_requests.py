"""Bulk reads and writes on Pinecone, for export and import.

A namespace is read by listing its ids and fetching them, 100 at a time (Pinecone's only way);
writes go in upserts of at most 100 vectors. Both honour the epoch and the overlay.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from collections.abc import Iterator
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from adapters.pinecone import vector_metadata
from adapters.pinecone.calls import PineconeMissing
from adapters.pinecone.shared import Shared
from adapters.values import StoredMemory

PAGE = 100  # ids per list page and per fetch; vectors per upsert
UPSERT_MAX_BYTES = 1_500_000  # estimated JSON bytes per upsert, under Pinecone's 2 MB
Item = dict[str, Any]


async def scan(
    shared: Shared,
    name: str,
    epoch: str,
    now: datetime,
    *,
    page_size: int,
    with_vectors: bool,
) -> AsyncIterator[list[StoredMemory]]:
    """Pages of the live memories of one epoch of namespace `name`: Pinecone's, then the
    overlay's recent writes. Ids with a recent write or delete are taken from the overlay only
    (Pinecone may not show them yet): each memory comes once, a recently deleted one never."""
    pinecone_namespace = shared.pinecone_namespace(name)
    recent = shared.overlay.ids_in(name)
    size = max(1, min(page_size, PAGE))
    token: str | None = None
    while True:
        try:
            ids, token = await shared.list_page("list memories", pinecone_namespace, size, token)
        except PineconeMissing:  # nothing was ever written there
            ids, token = [], None
        ids = [vector_id for vector_id in ids if vector_id not in recent]
        if ids:
            page = await shared.fetch("fetch memories", ids, pinecone_namespace)
            found: list[StoredMemory] = []
            for vector_id in ids:
                vector = page.get(vector_id)
                metadata = vector.metadata if vector is not None else None
                if vector is None or not metadata or metadata.get(vector_metadata.F_EPOCH) != epoch:
                    continue
                memory = vector_metadata.memory_from_metadata(vector_id, name, metadata)
                if memory.is_expired(now):
                    continue
                values = [float(x) for x in vector.values] if with_vectors else []
                found.append((memory, values))
            if found:
                yield found
        if not token:
            break
    fresh: list[StoredMemory] = [
        (memory, [float(x) for x in vector] if with_vectors else [])
        for memory, vector in shared.overlay.live_memories(name, epoch)
        if not memory.is_expired(now)
    ]
    if fresh:
        yield fresh


def upsert_item(
    vector_id: str,
    vector: Sequence[float],
    metadata: dict[str, Any],
    sparse: dict[str, Any] | None = None,
) -> Item:
    """One vector as `AsyncIndex.upsert` takes it (sparse values on a dotproduct index)."""
    found: Item = {"id": vector_id, "values": [float(x) for x in vector], "metadata": metadata}
    if sparse is not None:
        found["sparse_values"] = sparse
    return found


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
