"""The contract's operations in terms of a `VectorBackend` and an embedder.

No HTTP here: handlers parse and serialise, this module decides, by the rules every backend
shares (docs/behaviour.md: expiry, deadlines, concurrency).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import replace
from datetime import UTC
from datetime import datetime

from adapters.base import VectorBackend
from adapters.callers import NOBODY
from adapters.callers import Caller
from adapters.errors import StorageDamaged
from adapters.keyword_encoder import KeywordEncoder
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import SearchMode
from adapters.values import StoreCondition
from plugin.core.fields import MemoryFields
from plugin.core.fields import NamespaceChanges
from plugin.core.fields import NamespaceFields
from plugin.core.keyed_lock import KeyedLock
from plugin.core.new_ids import NewIds
from plugin.core.search import Embedder
from plugin.core.search import MemorySearch
from plugin.core.search_mode import Ranking
from plugin.core.service_errors import InvalidRequest
from plugin.core.service_errors import NotFound
from plugin.core.service_errors import within
from plugin.core.single_flight import SingleFlight
from plugin.core.write_order import WriteOrder
from plugin.scheduling.work import Priority
from plugin.scheduling.work import Work

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class SweepReport:
    namespaces_deleted: int
    memories_deleted: int


def _never() -> bool:
    return False


def _nothing() -> None:
    """The default observer of reused vectors: nobody counts."""


async def unexpired_namespace(
    backend: VectorBackend, name: str, now: datetime
) -> NamespaceRecord | None:
    """The stored record of namespace `name` before it is written (created or replaced).
    One whose expiry passed is deleted, memories and all, and None is returned: re-creating
    an expired namespace starts afresh, whether the janitor got to it or not. The PUT and
    the import (`StoreWriter`) both write namespaces through this rule."""
    existing = await backend.get_namespace(name)
    if existing is not None and existing.is_expired(now):
        await backend.delete_namespace(name)
        return None
    return existing


def _utc(moment: datetime | None) -> datetime | None:
    return moment.astimezone(UTC) if moment is not None else None


class MemoryService:
    def __init__(
        self,
        backend: VectorBackend,
        embedder: Embedder,
        keywords: KeywordEncoder,
        *,
        ranking: Ranking = Ranking(SearchMode.DENSE),  # noqa: B008 (frozen)
        deadline_s: float = 1.5,
        clock: Clock = utc_now,
        vectors_verified: Callable[[], bool] = _never,
        on_reused: Callable[[], None] = _nothing,
    ) -> None:
        self.backend = backend
        self.embedder = embedder
        self.keywords = keywords
        self.deadline_s = deadline_s
        self.clock = clock
        self._vectors_verified = vectors_verified
        self._on_reused = on_reused
        self._namespace_writes = KeyedLock()
        self.write_order = WriteOrder(backend)
        self.new_ids = NewIds(enabled=backend.sole_writer)
        # Searches are answered there (plugin/core/search.py); the handler calls it.
        self.searches = MemorySearch(
            backend, keywords, ranking, clock=clock, deadline_s=deadline_s, embedder=embedder
        )
        # A burst of health checks pings once; a ping past the deadline is not joined.
        self._ping = SingleFlight(lambda: self.backend.ping(), join_within_s=deadline_s)

    async def ping(self) -> StoreCondition:
        """Raise unless the backend answers; what it serves in a degraded way, if anything."""
        async with within(self.deadline_s):
            await self._ping()
        return self.condition()

    def condition(self) -> StoreCondition:
        found = self.backend.condition()
        unreadable = tuple(sorted(set(found.unreadable_namespaces) | self.searches.unreadable))
        return StoreCondition(unreadable, found.problems, found.disk)

    # -- namespaces ------------------------------------------------------------------

    async def _live_namespace(self, name: str) -> NamespaceRecord | None:
        record = await self.backend.get_namespace(name)
        if record is None or record.is_expired(self.clock()):
            return None
        return record

    async def upsert_namespace(self, name: str, body: NamespaceFields) -> NamespaceRecord:
        async with within(self.deadline_s), self._namespace_writes.hold(name):
            now = self.clock()
            existing = await unexpired_namespace(self.backend, name, now)
            record = NamespaceRecord(
                name=name,
                kind=body.kind,
                created_at=existing.created_at if existing else now,
                expires_at=_utc(body.expires_at),
                metadata=body.metadata,
            )
            if record != existing:  # the hot path: the platform PUTs before every write
                await self.backend.save_namespace(record)
            if existing is None:
                self.write_order.started(name)
                self.new_ids.started(name)
            return record

    async def patch_namespace(
        self, name: str, body: NamespaceChanges, fields: set[str]
    ) -> NamespaceRecord:
        changes = {key: getattr(body, key) for key in ("expires_at", "metadata") if key in fields}
        if not changes:
            raise InvalidRequest("PATCH needs at least one of expires_at, metadata")
        if "expires_at" in changes:
            changes["expires_at"] = _utc(changes["expires_at"])
        async with within(self.deadline_s), self._namespace_writes.hold(name):
            existing = await self._live_namespace(name)
            if existing is None:
                raise NotFound(f"namespace {name} not found")
            record = replace(existing, **changes)
            if record != existing:
                await self.backend.save_namespace(record)
            return record

    async def delete_namespace(self, name: str) -> None:
        """Also the way to drop a namespace whose stored record is unreadable."""
        async with within(self.deadline_s), self._namespace_writes.hold(name):
            try:
                existing = await self.backend.get_namespace(name)
            except StorageDamaged:
                await self.backend.delete_namespace(name)
                self._forget(name)
                return
            if existing is None:
                raise NotFound(f"namespace {name} not found")
            await self.backend.delete_namespace(name)
            self._forget(name)
            if existing.is_expired(self.clock()):
                raise NotFound(f"namespace {name} not found (it had expired)")

    def _forget(self, name: str) -> None:
        """What this process kept of a namespace just deleted."""
        self.write_order.forget(name)
        self.new_ids.forget(name)
        self.searches.unreadable.discard(name)

    # -- memories --------------------------------------------------------------------

    async def commit(
        self, namespace: str, body: MemoryFields, caller: Caller = NOBODY
    ) -> MemoryRecord:
        async with within(self.deadline_s, caller.waiting):
            if await self._live_namespace(namespace) is None:
                raise NotFound(f"namespace {namespace} not found")
            # The existence check of an explicit id (a backfill's every write) comes before
            # the model, not beside it: when it finds this content stored, the model is
            # not asked. Run side by side, a lone text reaches the model before even the
            # embedded store's lookup answers, and a backfill re-run pays for every row.
            existing, vector = None, None
            if body.id is not None and not self.new_ids.never_held(namespace, body.id):
                existing, vector = await self._stored(namespace, body.id, body.content)
            reused = vector is not None
            # Its place in the write order, taken as it arrives; a stored id keeps its own.
            if existing is not None and not existing.is_expired(self.clock()):
                position = existing.position
            else:
                position = await self.write_order.take(namespace)
            # The model computes token vectors with the sentence vector; a reused vector
            # comes without them (the token index fills them in).
            tokens = None
            if vector is None:
                work = Work(namespace, Priority.WRITE, caller.waiting)
                embedded = await self.embedder.embed(body.content, work)
                vector, tokens = embedded.vector, embedded.tokens
            else:
                self._on_reused()
            now = self.clock()
            created_at = now
            if existing is not None and not existing.is_expired(now):
                created_at = existing.created_at
            memory = MemoryRecord(
                id=body.id or str(uuid.uuid4()),
                namespace=namespace,
                content=body.content,
                kind=body.kind,
                source=body.source,
                created_at=created_at,
                pin=body.pin,
                expires_at=_utc(body.expires_at),
                propagation=body.propagation,
                position=position,
            )
            if reused and memory == existing:
                return memory  # stored exactly so, vector included: nothing to write
            made_there = self.backend.makes_keywords  # the store makes them from the content
            keywords = None if made_there else self.keywords.document(body.content)
            vectors = MemoryVectors(vector, keywords, tokens, make_keywords=made_there)
            self.new_ids.sending(namespace, memory.id)
            await self.backend.upsert_memory(memory, vectors)
            return memory

    async def _stored(
        self, namespace: str, memory_id: str, content: str
    ) -> tuple[MemoryRecord | None, list[float] | None]:
        """The stored memory with this id, and its vector when it stands for `content`'s."""
        if not self._vectors_verified():
            return await self.backend.get_memory(namespace, memory_id), None
        found = await self.backend.get_stored_memory(namespace, memory_id)
        if found is None:
            return None, None
        memory, vector = found
        return memory, (vector if vector and memory.content == content else None)

    async def forget(self, memory_id: str, namespace: str, caller: Caller = NOBODY) -> None:
        async with within(self.deadline_s):
            gone = NotFound(f"memory {memory_id} not found in {namespace}")
            if await self._live_namespace(namespace) is None:
                raise gone
            existing = await self.backend.get_memory(namespace, memory_id)
            if existing is None or existing.is_expired(self.clock()):
                raise gone
            if not await self.backend.delete_memory(namespace, memory_id):
                raise gone

    # -- janitor ---------------------------------------------------------------------

    async def sweep(self) -> SweepReport:
        """Delete expired namespaces and expired memories, then let the backend tidy up.

        Two store-wide calls, not a visit to every namespace: the cost follows what
        expired, not how many namespaces exist.
        """
        now = self.clock()
        namespaces_deleted = 0
        for record in await self.backend.expired_namespaces(now):
            namespaces_deleted += int(await self.backend.delete_namespace(record.name))
        memories_deleted = await self.backend.delete_expired_memories(now)
        await self.backend.maintain()
        return SweepReport(namespaces_deleted, memories_deleted)
