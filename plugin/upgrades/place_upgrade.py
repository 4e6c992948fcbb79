"""Places in the write order for memories stored without one: an older store, or an import.

Per namespace, its memories without a place take places just below its lowest, newest first,
so their `created_at` order is their write order; in the background at start until a store
fact records the store placed; see docs/backends.md, "Neighbours in the write order".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import datetime

from adapters.base import VectorBackend
from adapters.parts import BulkTransfer
from adapters.values import MemoryRecord
from plugin.upgrades import retried

META_STATE = "write_order"
COMPLETE = "complete"
PAGE = 256
RETRY_S = 2.0
log = logging.getLogger(__name__)
Clock = Callable[[], datetime]


async def place_namespace(transfer: BulkTransfer, namespace: str, now: datetime) -> int:
    """Give `namespace`'s live memories without a place theirs; how many it placed."""
    unplaced: list[MemoryRecord] = []
    lowest: int | None = None
    async for page in transfer.iter_memories(namespace, now, with_vectors=False):
        for memory, _ in page:
            if memory.position is None:
                unplaced.append(memory)
            elif lowest is None or memory.position < lowest:
                lowest = memory.position
    unplaced.sort(key=lambda memory: (memory.created_at, memory.id), reverse=True)
    below = 0 if lowest is None else lowest
    places = [(memory.id, below - n) for n, memory in enumerate(unplaced, 1)]
    for start in range(0, len(places), PAGE):
        await transfer.place_memories(namespace, places[start : start + PAGE])
        await asyncio.sleep(0)  # requests queued meanwhile go first
    return len(places)


async def place_store(backend: VectorBackend, clock: Clock) -> int | None:
    """Place every namespace's unplaced memories, then record the store placed; None where
    the backend cannot hold the fact (nothing done), 0 where it was placed before."""
    transfer, meta = backend.transfer, backend.store_meta
    if transfer is None or meta is None:
        return None
    if (await meta.read_store_meta()).get(META_STATE) == COMPLETE:
        return 0
    placed = 0
    for record in await backend.list_namespaces():
        placed += await place_namespace(transfer, record.name, clock())
    await meta.write_store_meta(META_STATE, COMPLETE)
    return placed


async def maintain_in_background(backend: VectorBackend, clock: Clock) -> None:
    """`place_store`, retried while the store is unavailable."""

    async def place() -> None:
        started = time.monotonic()
        placed = await place_store(backend, clock)
        if placed:
            seconds = round(time.monotonic() - started, 2)
            extra = {"memories": placed, "seconds": seconds}
            log.info("memories placed in write order", extra=extra)

    await retried(place, "memories not placed in write order", log, RETRY_S)
