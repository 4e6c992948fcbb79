"""The contract's operations in terms of a `VectorBackend` and an embedder.

No HTTP here: handlers parse and serialise, this module decides. Rules that
hold for every backend live here, once:
- An expired namespace or memory behaves exactly as if the janitor had already
  deleted it: not found, never returned, and re-creating it starts afresh.
- Ordering: pinned first; within each side by score (with a query) or newest
  first (without). `limit` applies to the merged result of all namespaces.
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
from typing import Any, Protocol

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


def _newest_first(hit: Hit) -> tuple[datetime, str]:
    return hit.memory.created_at, hit.memory.id


def _best_first(hit: Hit) -> tuple[float, datetime, str]:
    return hit.score or 0.0, hit.memory.created_at, hit.memory.id


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
        limit = request.effective_limit
        kinds = frozenset(request.kinds) if request.kinds else None
        async with self._deadline():
            names = list(dict.fromkeys(request.namespaces))
            records = await asyncio.gather(*(self._live_namespace(n) for n in names))
            live = [name for name, record in zip(names, records, strict=True) if record]
            if not live:
                return []
            now = self.clock()
            text = request.query_text
            vector = None if text is None else await self.embedder.embed(text)

            async def fetch(name: str, side: MemoryFilter) -> list[Hit]:
                if vector is None:
                    listed = await self.backend.list_memories(name, side, limit)
                    return [Hit(m, None) for m in listed]
                found = await self.backend.query_memories(name, vector, side, limit)
                return [Hit(s.memory, s.score) for s in found]

            async def side_hits(pinned: bool) -> list[Hit]:
                side = MemoryFilter(now=now, pinned=pinned, kinds=kinds)
                parts = await asyncio.gather(*(fetch(name, side) for name in live))
                return [hit for part in parts for hit in part]

            # ORDER BY pin DESC, then score (with a query) or recency (without).
            order: Callable[[Hit], tuple[Any, ...]] = (
                _newest_first if vector is None else _best_first
            )
            sides = await asyncio.gather(side_hits(True), side_hits(False))
            ordered = [hit for side in sides for hit in sorted(side, key=order, reverse=True)]
            return [hit for hit in ordered if not hit.memory.is_expired(now)][:limit]

    # -- janitor ---------------------------------------------------------------------

    async def sweep(self) -> SweepReport:
        """Delete expired namespaces and expired memories, then let the backend tidy up."""
        now = self.clock()
        namespaces_deleted = memories_deleted = 0
        for record in await self.backend.list_namespaces():
            if record.is_expired(now):
                namespaces_deleted += int(await self.backend.delete_namespace(record.name))
            else:
                memories_deleted += await self.backend.delete_expired_memories(record.name, now)
        await self.backend.maintain()
        return SweepReport(namespaces_deleted, memories_deleted)
