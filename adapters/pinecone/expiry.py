"""The expiry sweep on Pinecone: every namespace, a few at a time.

Pinecone has no delete or query across namespaces, so the janitor's cost here grows with the
number of namespaces (docs/backends.md, "Pinecone").
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime

from adapters.pinecone import vector_metadata
from adapters.pinecone.calls import PineconeMissing
from adapters.pinecone.reads import MemoryReads
from adapters.pinecone.reserved_records import NamespaceRecords
from adapters.pinecone.shared import Shared
from adapters.times import to_micros

# Namespaces the janitor sweeps at once: enough to hide latency, few enough not to be throttled.
EXPIRY_CONCURRENCY = 8


class ExpirySweep:
    """`delete_expired_memories` of `PineconeBackend` (backend.py)."""

    def __init__(self, shared: Shared, records: NamespaceRecords, reads: MemoryReads) -> None:
        self._shared = shared
        self._records = records
        self._reads = reads

    async def sweep(self, now: datetime) -> int:
        """Every namespace, `EXPIRY_CONCURRENCY` at a time."""
        gate = asyncio.Semaphore(EXPIRY_CONCURRENCY)

        async def expire(namespace: str, epoch: str) -> int:
            async with gate:
                return await self._delete_expired_in(namespace, epoch, now)

        states = await self._records.all()
        counts = await asyncio.gather(*(expire(name, epoch) for name, (_, epoch) in states.items()))
        return sum(counts)

    async def _delete_expired_in(self, namespace: str, epoch: str, now: datetime) -> int:
        """Delete by metadata filter what has expired (writes apply in order: expired writes
        Pinecone does not show yet too); count what Pinecone (up to 1000) and the overlay show."""
        expired = {
            "$and": [
                {vector_metadata.F_EPOCH: {"$eq": epoch}},
                {vector_metadata.F_EXPIRES_US: {"$lte": to_micros(now)}},
            ]
        }
        gone: set[str] = set()
        recent = self._shared.overlay.ids_in(namespace)  # for these, the overlay knows better
        with contextlib.suppress(PineconeMissing):  # no vector was ever written there
            matches = await self._reads.unranked(
                namespace, expired, "find expired", with_metadata=False
            )
            gone = {match.id for match in matches if match.id not in recent}
        live = self._shared.overlay.live_memories(namespace, epoch)
        gone |= {memory.id for memory, _ in live if memory.is_expired(now)}
        if not gone:
            return 0
        target = self._shared.pinecone_namespace(namespace)
        with contextlib.suppress(PineconeMissing):  # the namespace was deleted meanwhile
            await self._shared.call(
                "delete expired", lambda i, t: i.delete(filter=expired, namespace=target, timeout=t)
            )
        for memory_id in gone:
            self._shared.overlay.memory_deleted(namespace, memory_id, epoch)
        return len(gone)
