"""Bulk reads and writes on Pinecone, for export and import.

A namespace is read by listing its ids and fetching them, 100 at a time (Pinecone's only way);
writes go in upserts of at most 100 vectors. Both honour the epoch and the overlay.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pinecone import AsyncIndex

from adapters.pinecone import vector_metadata
from adapters.pinecone.calls import PineconeMissing
from adapters.pinecone.calls import call
from adapters.pinecone.overlay import FreshnessOverlay
from adapters.values import StoredMemory

PAGE = 100  # ids per list page and per fetch; vectors per upsert
UPSERT_MAX_BYTES = 1_500_000  # estimated JSON bytes per upsert, under Pinecone's 2 MB
Item = dict[str, Any]


async def scan(
    ready: Callable[[], Awaitable[AsyncIndex]],
    namespaces: tuple[str, str],
    epoch: str,
    now: datetime,
    overlay: FreshnessOverlay,
    budget_s: float,
    *,
    page_size: int,
    with_vectors: bool,
) -> AsyncIterator[list[StoredMemory]]:
    """Pages of the live memories of one epoch: Pinecone's, then the overlay's recent writes.

    `namespaces` is (ours, Pinecone's). Ids with a recent write or delete are taken
    from the overlay only (Pinecone may not show them yet), so each memory comes
    once and a recently deleted one not at all."""
    name, pinecone_namespace = namespaces
    index = await ready()
    recent = overlay.ids_in(name)
    size = max(1, min(page_size, PAGE))
    token: str | None = None
    while True:
        try:
            ids, token = await _list_page(index, pinecone_namespace, size, token, budget_s)
        except PineconeMissing:  # nothing was ever written there
            ids, token = [], None
        ids = [vector_id for vector_id in ids if vector_id not in recent]
        if ids:
            page = await _fetch(index, pinecone_namespace, ids, budget_s)
            found: list[StoredMemory] = []
            for vector_id in ids:
                vector = page.get(vector_id)
                metadata = vector.metadata if vector is not None else None
                if not metadata or metadata.get(vector_metadata.F_EPOCH) != epoch:
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
        for memory, vector in overlay.live_memories(name, epoch)
        if not memory.is_expired(now)
    ]
    if fresh:
        yield fresh


async def _list_page(
    index: AsyncIndex, namespace: str, size: int, token: str | None, budget_s: float
) -> tuple[list[str], str | None]:
    page = await call(
        "list memories",
        lambda t: index.list_paginated(
            namespace=namespace, limit=size, pagination_token=token, timeout=t
        ),
        budget_s,
    )
    ids = [item.id for item in page.vectors if item.id]
    return ids, page.pagination.next if page.pagination else None


async def _fetch(index: AsyncIndex, namespace: str, ids: list[str], budget_s: float) -> Any:
    found = await call(
        "fetch memories",
        lambda t: index.fetch(ids=ids, namespace=namespace, timeout=t),
        budget_s,
    )
    return found.vectors


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
