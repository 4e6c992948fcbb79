"""`VectorBackend` on a Pinecone serverless index, through the official SDK's async client.

A namespace is the Pinecone namespace `prefix + name`, a memory id the vector id; one module per
concern beside it. See docs/backends.md, "Pinecone".
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from collections.abc import Sequence
from datetime import datetime
from functools import cached_property

from adapters.base import DEFAULT_PREFIX
from adapters.base import AnsweredBy
from adapters.base import VectorBackend
from adapters.errors import BackendMisconfigured
from adapters.pinecone import vector_metadata
from adapters.pinecone.index_connection import PineconeConnection
from adapters.pinecone.index_connection import PineconeMissing
from adapters.pinecone.index_connection import Shared
from adapters.pinecone.overlay import FreshnessOverlay
from adapters.pinecone.pinecone_transfer import PineconeTransfer
from adapters.pinecone.reads import MemoryReads
from adapters.pinecone.reserved_records import NamespaceRecords
from adapters.pinecone.reserved_records import PineconeStoreMeta
from adapters.times import to_micros
from adapters.values import FillVector
from adapters.values import SearchMode
from adapters.values import StoredMemory
from adapters.values import VectorKind

# Namespaces the janitor sweeps at once: enough to hide latency, few enough not to be throttled.
EXPIRY_CONCURRENCY = 8


class PineconeBackend(VectorBackend):
    """Its namespace calls answered by its records, its searches and listings by its reads;
    memories written through its `transfer` (no token vectors: Pinecone has no multivectors)."""

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
        self._reads = MemoryReads(shared, self._records)

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

    async def ping(self) -> None:
        stats = "describe_index_stats"
        await self._shared.call(stats, lambda i, t: i.describe_index_stats(timeout=t))

    # -- the optional parts (adapters/parts.py) ----------------------------------------

    @cached_property
    def transfer(self) -> PineconeTransfer:
        return PineconeTransfer(self._shared, self._connection, self._records)

    @cached_property
    def store_meta(self) -> PineconeStoreMeta:
        return PineconeStoreMeta(self._shared)

    @cached_property
    def vector_fill(self) -> PineconeVectorFill:
        return PineconeVectorFill(self._connection)

    # -- namespaces (their records: reserved_records.py) -------------------------------

    get_namespace = AnsweredBy("_records")
    get_namespaces = AnsweredBy("_records")
    save_namespace = AnsweredBy("_records")
    list_namespaces = AnsweredBy("_records")

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

    # -- memories (searches and listings: reads.py) ------------------------------------

    query_memories = AnsweredBy("_reads")
    list_memories = AnsweredBy("_reads")

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
        """Every namespace, `EXPIRY_CONCURRENCY` at a time: Pinecone has no delete or query
        across namespaces, so the sweep's cost grows with their number."""
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
        recent = self.overlay.ids_in(namespace)  # for these, the overlay knows better
        with contextlib.suppress(PineconeMissing):  # no vector was ever written there
            matches = await self._reads.unranked(
                namespace, expired, "find expired", with_metadata=False
            )
            gone = {match.id for match in matches if match.id not in recent}
        live = self.overlay.live_memories(namespace, epoch)
        gone |= {memory.id for memory, _, _ in live if memory.is_expired(now)}
        if not gone:
            return 0
        with contextlib.suppress(PineconeMissing):  # the namespace was deleted meanwhile
            await self._shared.call(
                "delete expired",
                lambda i, t: i.delete(filter=expired, namespace=self._ns(namespace), timeout=t),
            )
        for memory_id in gone:
            self.overlay.memory_deleted(namespace, memory_id, epoch)
        return len(gone)


class PineconeVectorFill:
    """`VectorFill` as far as Pinecone allows: keyword vectors only, on a dotproduct index,
    as memories are written; Pinecone can neither list the records without one nor drop
    them in place."""

    def __init__(self, connection: PineconeConnection) -> None:
        self._connection = connection

    async def prepare(self, kind: VectorKind, *, reset: bool = False) -> None:
        await self._connection.index()
        if kind is not VectorKind.KEYWORDS or self._connection.metric != "dotproduct":
            raise NotImplementedError(f"this Pinecone index keeps no {kind} vectors")
        if reset:
            raise BackendMisconfigured(
                "the Pinecone index holds keyword vectors of another encoder configuration and"
                " cannot re-index them in place: copy the memories into a new index with"
                " `memory-plugin-vector export` and `import`"
            )

    async def missing(
        self, kind: VectorKind, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        return [], None  # not findable on Pinecone

    async def fill(self, kind: VectorKind, items: Sequence[tuple[str, FillVector]]) -> int:
        """Never asked: `missing` finds nothing to fill."""
        raise NotImplementedError("the pinecone backend writes keyword vectors as it writes")
