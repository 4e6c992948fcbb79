"""The contract's operations in terms of a `VectorBackend` and an embedder.

No HTTP here: handlers parse and serialise, this module decides. Rules that
hold for every backend live here, once:
- An expired namespace or memory behaves exactly as if the janitor had already
  deleted it: not found, never returned, and re-creating it starts afresh.
- Ordering: pinned first; within each side by score (with a query) or newest
  first (without). `limit` applies to the merged result of all namespaces, and
  the backend answers a search over many namespaces with one read.
- Every operation finishes within `deadline_s` or fails as unavailable (503), so
  the platform's 2 s client timeout never fires on us.
- Writes to one namespace record (PUT, PATCH, DELETE) are serialised per name in
  this process: 50 concurrent first PUTs create it once and all answer the same
  `created_at`, and a PUT racing a DELETE sees the delete before or after, never
  half of it. (Replicas sharing a Qdrant server are not serialised with each
  other; docs/behaviour.md, "Concurrency".)
- One damaged namespace does not fail a search over several: when the one read
  reports damage, each namespace is read on its own and the unreadable ones are
  left out (logged, counted, and named by health); only if all are unreadable
  does the search fail (503).
- The model reads at most its first 256 tokens, so only the first
  `MAX_EMBEDDED_CHARS` characters are handed to it (`clip_for_model`): tokenising
  a 900 KiB content in full held the shared embedder for a second and stalled
  every caller.
- Every memory is stored with its keyword vector (plugin/keywords.py, on the
  event loop: microseconds), and a search computes what `search_mode` ranks by:
  the query's embedding, its keyword vector, or both (docs/backends.md, "Hybrid search").
- A commit with an explicit id whose content is stored as is costs no model call:
  the vector read with the stored memory is reused (a backfill re-run sends every
  row again). Only once the store's vectors are known to be of the configured
  encoder's space (`vectors_verified`, set by the fingerprint check); the vector
  is read together with the content it was made from, so a write racing its
  retry stores each content with its own vector.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

from adapters.base import (
    MemoryFilter,
    MemoryRecord,
    NamespaceRecord,
    ScoredMemory,
    SearchMode,
    SearchQuery,
    StoreCondition,
    VectorBackend,
)
from adapters.errors import BackendUnavailable, StorageDamaged
from adapters.merge import merge_listed, merge_scored
from plugin.embedder import clip_for_model
from plugin.keyed_lock import KeyedLock
from plugin.keywords import KeywordEncoder
from plugin.service_errors import InvalidRequest, NotFound
from plugin.wire import MemoryWrite, NamespacePatch, NamespaceUpsert, SearchRequest

Clock = Callable[[], datetime]
log = logging.getLogger(__name__)


class Embedder(Protocol):
    dimension: int

    # An awaitable, not a coroutine function: BatchingEmbedder hands back a future
    # that is already queued for the model when this returns.
    def embed(self, text: str) -> Awaitable[list[float]]: ...


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Hit:
    memory: MemoryRecord
    score: float | None


@dataclass(frozen=True, slots=True)
class SweepReport:
    namespaces_deleted: int
    memories_deleted: int


def _never() -> bool:
    return False


def _nothing() -> None:
    """The default observer of reused vectors: nobody counts."""


def _utc(moment: datetime | None) -> datetime | None:
    return moment.astimezone(UTC) if moment is not None else None


class MemoryService:
    def __init__(
        self,
        backend: VectorBackend,
        embedder: Embedder,
        keywords: KeywordEncoder,
        *,
        search_mode: SearchMode = SearchMode.DENSE,
        deadline_s: float = 1.5,
        clock: Clock = utc_now,
        vectors_verified: Callable[[], bool] = _never,
        on_reused: Callable[[], None] = _nothing,
    ) -> None:
        self.backend = backend
        self.embedder = embedder
        self.keywords = keywords
        self.search_mode = search_mode
        self.deadline_s = deadline_s
        self.clock = clock
        self._vectors_verified = vectors_verified
        self._on_reused = on_reused
        self._namespace_writes = KeyedLock()
        # Namespaces a search found unreadable (left out of its answer), for health.
        self._unreadable: set[str] = set()

    @asynccontextmanager
    async def _deadline(self) -> AsyncIterator[None]:
        try:
            async with asyncio.timeout(self.deadline_s):
                yield
        except TimeoutError:
            raise BackendUnavailable(f"no answer within {self.deadline_s:g} s") from None

    async def ping(self) -> StoreCondition:
        """Raise unless the backend answers; what it serves in a degraded way, if anything."""
        async with self._deadline():
            await self.backend.ping()
        return self.condition()

    def condition(self) -> StoreCondition:
        found = self.backend.condition()
        unreadable = tuple(sorted(set(found.unreadable_namespaces) | self._unreadable))
        return StoreCondition(unreadable, found.problems)

    def _embed(self, text: str) -> Awaitable[list[float]]:
        """What the model reads of `text`, queued for it (module docstring: the clip)."""
        return self.embedder.embed(clip_for_model(text))

    # -- namespaces ------------------------------------------------------------------

    async def _live_namespace(self, name: str) -> NamespaceRecord | None:
        record = await self.backend.get_namespace(name)
        if record is None or record.is_expired(self.clock()):
            return None
        return record

    async def upsert_namespace(self, name: str, body: NamespaceUpsert) -> NamespaceRecord:
        async with self._deadline(), self._namespace_writes.hold(name):
            existing = await self.backend.get_namespace(name)
            now = self.clock()
            if existing is not None and existing.is_expired(now):
                await self.backend.delete_namespace(name)
                existing = None
            record = NamespaceRecord(
                name=name,
                kind=body.kind,
                created_at=existing.created_at if existing else now,
                expires_at=_utc(body.expires_at),
                metadata=body.metadata,
            )
            if record != existing:  # the hot path: the platform PUTs before every write
                await self.backend.save_namespace(record)
            return record

    async def patch_namespace(
        self, name: str, body: NamespacePatch, fields: set[str]
    ) -> NamespaceRecord:
        changes = {key: getattr(body, key) for key in ("expires_at", "metadata") if key in fields}
        if not changes:
            raise InvalidRequest("PATCH needs at least one of expires_at, metadata")
        if "expires_at" in changes:
            changes["expires_at"] = _utc(changes["expires_at"])
        async with self._deadline(), self._namespace_writes.hold(name):
            existing = await self._live_namespace(name)
            if existing is None:
                raise NotFound(f"namespace {name} not found")
            record = replace(existing, **changes)
            if record != existing:
                await self.backend.save_namespace(record)
            return record

    async def delete_namespace(self, name: str) -> None:
        """Also the way to drop a namespace whose stored record is unreadable."""
        async with self._deadline(), self._namespace_writes.hold(name):
            try:
                existing = await self.backend.get_namespace(name)
            except StorageDamaged:
                await self.backend.delete_namespace(name)
                self._unreadable.discard(name)
                return
            if existing is None:
                raise NotFound(f"namespace {name} not found")
            await self.backend.delete_namespace(name)
            self._unreadable.discard(name)
            if existing.is_expired(self.clock()):
                raise NotFound(f"namespace {name} not found (it had expired)")

    # -- memories --------------------------------------------------------------------

    async def commit(self, namespace: str, body: MemoryWrite) -> MemoryRecord:
        async with self._deadline():
            if await self._live_namespace(namespace) is None:
                raise NotFound(f"namespace {namespace} not found")
            # The existence check of an explicit id (a backfill's every write) comes before
            # the model: when it finds this content stored, the model is not asked. It
            # used to run beside the model, but a lone text reached the model before even
            # the embedded store's 50-microsecond lookup answered, every time; a backfill
            # re-run then paid the model for every row.
            existing, vector = None, None
            if body.id is not None:
                existing, vector = await self._stored(namespace, body.id, body.content)
            reused = vector is not None
            if vector is None:
                vector = await self._embed(body.content)
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
            )
            if reused and memory == existing:
                return memory  # stored exactly so, vector included: nothing to write
            await self.backend.upsert_memory(memory, vector, self.keywords.document(body.content))
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

    async def forget(self, memory_id: str, namespace: str) -> None:
        async with self._deadline():
            gone = NotFound(f"memory {memory_id} not found in {namespace}")
            if await self._live_namespace(namespace) is None:
                raise gone
            existing = await self.backend.get_memory(namespace, memory_id)
            if existing is None or existing.is_expired(self.clock()):
                raise gone
            if not await self.backend.delete_memory(namespace, memory_id):
                raise gone

    async def search(self, request: SearchRequest) -> list[Hit]:
        """One backend read over every live namespace asked for; pinned first, `limit` in all."""
        limit = request.effective_limit
        kinds = frozenset(request.kinds) if request.kinds else None
        async with self._deadline():
            names = list(dict.fromkeys(request.namespaces))
            records = await self.backend.get_namespaces(names)
            now = self.clock()
            live = [name for name in names if name in records and not records[name].is_expired(now)]
            if not live:
                return []
            memory_filter = MemoryFilter(now=now, kinds=kinds)
            text = request.query_text
            query = None if text is None else await self._search_query(text)
            try:
                hits = await self._read(live, query, memory_filter, limit)
            except StorageDamaged:
                hits = await self._read_around_damage(live, query, memory_filter, limit)
            return [hit for hit in hits if not hit.memory.is_expired(now)][:limit]

    async def _search_query(self, text: str) -> SearchQuery:
        """What `search_mode` ranks by; a keyword search costs no model call."""
        mode = self.search_mode
        keywords = None if mode is SearchMode.DENSE else self.keywords.query(text)
        dense = None if mode is SearchMode.KEYWORD else await self._embed(text)
        return SearchQuery(dense, keywords)

    async def _read(
        self,
        namespaces: Sequence[str],
        query: SearchQuery | None,
        memory_filter: MemoryFilter,
        limit: int,
    ) -> list[Hit]:
        if query is None:
            listed = await self.backend.list_memories(namespaces, memory_filter, limit)
            return [Hit(memory, None) for memory in listed]
        found = await self.backend.query_memories(namespaces, query, memory_filter, limit)
        return [Hit(scored.memory, scored.score) for scored in found]

    async def _read_around_damage(
        self,
        namespaces: Sequence[str],
        query: SearchQuery | None,
        memory_filter: MemoryFilter,
        limit: int,
    ) -> list[Hit]:
        """Read each namespace alone; leave out (and remember) those that fail; 503 if all do."""
        parts: list[list[Hit]] = []
        for name in namespaces:
            try:
                parts.append(await self._read([name], query, memory_filter, limit))
            except StorageDamaged as error:
                if name not in self._unreadable:
                    log.error("namespace unreadable, left out of searches: %s (%s)", name, error)
                self._unreadable.add(name)
                continue
            self._unreadable.discard(name)
        if not parts:
            named = ", ".join(namespaces[:5]) + (", ..." if len(namespaces) > 5 else "")
            raise StorageDamaged(
                f"stored data unreadable (damaged files; see the plugin log): {named}",
                tuple(namespaces),
            )
        if query is None:
            listed = merge_listed(([hit.memory for hit in part] for part in parts), limit)
            return [Hit(memory, None) for memory in listed]
        scored = merge_scored(
            ([ScoredMemory(h.memory, h.score or 0.0) for h in part] for part in parts), limit
        )
        return [Hit(hit.memory, hit.score) for hit in scored]

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
