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
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

from adapters.base import MemoryFilter, MemoryRecord, NamespaceRecord, VectorBackend
from adapters.errors import BackendUnavailable
from plugin.errors import bad_request, not_found
from plugin.wire import MemoryWrite, NamespacePatch, NamespaceUpsert, SearchRequest

Clock = Callable[[], datetime]


class Embedder(Protocol):
    dimension: int

    async def embed(self, text: str) -> list[float]: ...


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


def _utc(moment: datetime | None) -> datetime | None:
    return moment.astimezone(UTC) if moment is not None else None


class MemoryService:
    def __init__(
        self,
        backend: VectorBackend,
        embedder: Embedder,
        *,
        deadline_s: float = 1.5,
        clock: Clock = utc_now,
    ) -> None:
        self.backend = backend
        self.embedder = embedder
        self.deadline_s = deadline_s
        self.clock = clock

    @asynccontextmanager
    async def _deadline(self) -> AsyncIterator[None]:
        try:
            async with asyncio.timeout(self.deadline_s):
                yield
        except TimeoutError:
            raise BackendUnavailable(f"no answer within {self.deadline_s:g} s") from None

    async def ping(self) -> None:
        async with self._deadline():
            await self.backend.ping()

    # -- namespaces ------------------------------------------------------------------

    async def _live_namespace(self, name: str) -> NamespaceRecord | None:
        record = await self.backend.get_namespace(name)
        if record is None or record.is_expired(self.clock()):
            return None
        return record

    async def upsert_namespace(self, name: str, body: NamespaceUpsert) -> NamespaceRecord:
        async with self._deadline():
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
            raise bad_request("PATCH needs at least one of expires_at, metadata")
        if "expires_at" in changes:
            changes["expires_at"] = _utc(changes["expires_at"])
        async with self._deadline():
            existing = await self._live_namespace(name)
            if existing is None:
                raise not_found(f"namespace {name} not found")
            record = replace(existing, **changes)
            if record != existing:
                await self.backend.save_namespace(record)
            return record

    async def delete_namespace(self, name: str) -> None:
        async with self._deadline():
            existing = await self.backend.get_namespace(name)
            if existing is None:
                raise not_found(f"namespace {name} not found")
            await self.backend.delete_namespace(name)
            if existing.is_expired(self.clock()):
                raise not_found(f"namespace {name} not found (it had expired)")

    # -- memories --------------------------------------------------------------------

    async def commit(self, namespace: str, body: MemoryWrite) -> MemoryRecord:
        async with self._deadline():
            if await self._live_namespace(namespace) is None:
                raise not_found(f"namespace {namespace} not found")
            vector = await self.embedder.embed(body.content)
            now = self.clock()
            created_at = now
            if body.id is not None:
                existing = await self.backend.get_memory(namespace, body.id)
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
            await self.backend.upsert_memory(memory, vector)
            return memory

    async def forget(self, memory_id: str, namespace: str) -> None:
        async with self._deadline():
            gone = not_found(f"memory {memory_id} not found in {namespace}")
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
            if text is None:
                listed = await self.backend.list_memories(live, memory_filter, limit)
                hits = [Hit(memory, None) for memory in listed]
            else:
                vector = await self.embedder.embed(text)
                found = await self.backend.query_memories(live, vector, memory_filter, limit)
                hits = [Hit(scored.memory, scored.score) for scored in found]
            return [hit for hit in hits if not hit.memory.is_expired(now)][:limit]

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
