"""The shared layout's namespace records, kept apart from its memories: a part of its own.

A new incarnation's epoch derives from its name and its count of deletes, so replicas racing to
create one namespace agree on it. See docs/backends.md, "Qdrant server".
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from typing import TypeVar

from qdrant_client import AsyncQdrantClient
from qdrant_client.http import models

from adapters.errors import BackendError
from adapters.qdrant import filters
from adapters.qdrant import layout
from adapters.qdrant.layout import FIELD_EPOCH
from adapters.qdrant.layout import FIELD_EXPIRES_US
from adapters.qdrant.server.client_requests import DIALECT
from adapters.qdrant.server.tenant_collections import FIELD_TYPE
from adapters.qdrant.server.tenant_collections import TenantCollections
from adapters.times import to_micros
from adapters.values import NamespaceRecord

T = TypeVar("T")

# Never change: every stored record and purge point id depends on it.
_RECORD_IDS = uuid.UUID("2b7d5c1e-8a4f-4c3b-9e6d-0f1a2b3c4d5e")
RECORD, PURGE, GENERATION = "record", "purge", "generation"
META = "meta"  # one point per store-wide fact (the embedding fingerprint)
_RECORDS = DIALECT.filter([DIALECT.match_value(FIELD_TYPE, RECORD)], [])
_PURGES = DIALECT.filter([DIALECT.match_value(FIELD_TYPE, PURGE)], [])
_METAS = DIALECT.filter([DIALECT.match_value(FIELD_TYPE, META)], [])
Live = dict[str, tuple[NamespaceRecord, str]]  # name -> (record, current epoch)


def record_id(name: str) -> str:
    return str(uuid.uuid5(_RECORD_IDS, name))


def generation_id(name: str) -> str:
    return str(uuid.uuid5(_RECORD_IDS, f"generation\n{name}"))


def incarnation_epoch(name: str, generation: int) -> str:
    """The epoch of `name`'s incarnation after `generation` deletes."""
    return uuid.uuid5(_RECORD_IDS, f"epoch\n{name}\n{generation}").hex


def purge_id(epoch: str) -> str:
    return str(uuid.uuid5(_RECORD_IDS, f"purge\n{epoch}"))  # names never hold a newline


def meta_id(key: str) -> str:
    return str(uuid.uuid5(_RECORD_IDS, f"meta\n{key}"))  # names never hold a newline


def epoch_of(live: Live, name: str) -> str | None:
    found = live.get(name)
    return None if found is None else found[1]


def _record_point(record: NamespaceRecord, epoch: str) -> models.PointStruct:
    payload: dict[str, Any] = {FIELD_TYPE: RECORD, "name": record.name, FIELD_EPOCH: epoch}
    payload["record"] = layout.namespace_to_json(record)
    if record.expires_at is not None:
        payload[FIELD_EXPIRES_US] = to_micros(record.expires_at)
    return models.PointStruct(id=record_id(record.name), vector={}, payload=payload)


def _decode(point: models.Record) -> tuple[NamespaceRecord, str] | None:
    payload = point.payload or {}
    if payload.get(FIELD_TYPE) != RECORD:
        return None
    try:
        return layout.namespace_from_json(payload["record"]), str(payload[FIELD_EPOCH])
    except (ValueError, KeyError, TypeError) as exc:
        raise BackendError(f"namespace record point {point.id} is corrupt") from exc


class TenantNamespaces:
    """The namespace half of the shared layout: record and purge points of the records
    collection. `QdrantServerBackend` (tenants.py) answers its namespace calls with it and
    reads the epochs through it, as `TenantStoreMeta` does its points."""

    def __init__(self, collections: TenantCollections) -> None:
        self._collections = collections
        self.collection = collections.records  # the records collection's name

    async def call(self, op: Callable[[AsyncQdrantClient], Awaitable[T]]) -> T:
        """One SDK call once both collections are set up (tenant_collections.py)."""
        return await self._collections.call(op)

    def pages(self, scan_filter: models.Filter) -> AsyncIterator[list[models.Record]]:
        """Every point of the records collection matching `scan_filter`, a page at a time."""
        return self._collections.connection.pages(self.collection, scan_filter, call=self.call)

    async def get_namespace(self, name: str) -> NamespaceRecord | None:
        return (await self.get_namespaces([name])).get(name)

    async def get_namespaces(self, names: Sequence[str]) -> Mapping[str, NamespaceRecord]:
        return {name: record for name, (record, _) in (await self.live(names)).items()}

    async def live(self, asked: Sequence[str]) -> Live:
        """(record, epoch) of the namespaces `asked` that exist: one retrieve."""
        wanted = list(dict.fromkeys(asked))
        if not wanted:
            return {}
        ids: list[models.ExtendedPointId] = [record_id(name) for name in wanted]
        points = await self.call(lambda c: c.retrieve(self.collection, ids))
        decoded = (_decode(point) for point in points)
        return {d[0].name: d for d in decoded if d is not None and d[0].name in wanted}

    async def _generation(self, name: str) -> int:
        """How many times `name` was deleted: a new incarnation's epoch derives from it."""
        ids: list[models.ExtendedPointId] = [generation_id(name)]
        found = await self.call(lambda c: c.retrieve(self.collection, ids))
        return int((found[0].payload or {}).get(GENERATION, 0)) if found else 0

    async def _fresh_epoch(self, name: str) -> str:
        # Deterministic, not random: replicas racing to create one new namespace (the
        # platform PUTs before every write) agree on its incarnation, so no write
        # lands in an epoch that a concurrent PUT then replaces.
        return incarnation_epoch(name, await self._generation(name))

    async def save_namespace(self, record: NamespaceRecord) -> None:
        epoch = epoch_of(await self.live([record.name]), record.name)
        point = _record_point(record, epoch or await self._fresh_epoch(record.name))
        await self.call(lambda c: c.upsert(self.collection, [point], wait=True))
        if epoch is None:
            return
        purge = [purge_id(epoch)]
        if await self.call(lambda c: c.retrieve(self.collection, purge, with_payload=False)):
            # Deleted while we saved: what we wrote is a new namespace, not the old revived.
            fresh = _record_point(record, await self._fresh_epoch(record.name))
            await self.call(lambda c: c.upsert(self.collection, [fresh], wait=True))

    async def bury(self, name: str) -> str | None:
        """Write the purge point and remove the record in one request; the dead epoch."""
        epoch = epoch_of(await self.live([name]), name)
        if epoch is None:
            return None
        payload = {FIELD_TYPE: PURGE, FIELD_EPOCH: epoch, "name": name}
        purge = models.PointStruct(id=purge_id(epoch), vector={}, payload=payload)
        deletes = await self._generation(name) + 1
        generation: dict[str, Any] = {FIELD_TYPE: GENERATION, "name": name, GENERATION: deletes}
        bumped = models.PointStruct(id=generation_id(name), vector={}, payload=generation)
        operations: list[models.UpdateOperation] = [
            models.UpsertOperation(upsert=models.PointsList(points=[purge, bumped])),
            models.DeleteOperation(delete=models.PointIdsList(points=[record_id(name)])),
        ]
        await self.call(lambda c: c.batch_update_points(self.collection, operations, wait=True))
        return epoch

    async def forget(self, purge_ids: list[models.ExtendedPointId]) -> None:
        """Drop purge points whose memories are gone."""
        done = models.PointIdsList(points=purge_ids)
        await self.call(lambda c: c.delete(self.collection, done, wait=True))

    async def dead(self) -> AsyncIterator[dict[models.ExtendedPointId, str]]:
        """Per page of purge points, those whose epoch no live namespace holds (id -> epoch)."""
        async for points in self.pages(_PURGES):
            pending = {point.id: point.payload or {} for point in points}
            live = await self.live([str(payload.get("name")) for payload in pending.values()])
            yield {  # never an epoch that is some live namespace's current one
                point: str(payload.get(FIELD_EPOCH))
                for point, payload in pending.items()
                if epoch_of(live, str(payload.get("name"))) != payload.get(FIELD_EPOCH)
            }

    async def list_namespaces(self) -> list[NamespaceRecord]:
        return await self._scan(_RECORDS)

    async def expired_namespaces(self, now: datetime) -> list[NamespaceRecord]:
        # Only records carry expires_us: the cost follows expired namespaces, not live ones.
        return await self._scan(filters.expired(DIALECT, now))

    async def _scan(self, scan_filter: models.Filter) -> list[NamespaceRecord]:
        decoded = [_decode(point) async for page in self.pages(scan_filter) for point in page]
        return sorted((d[0] for d in decoded if d is not None), key=lambda r: r.name)


class TenantStoreMeta:
    """The shared layout's `store_meta` part: `meta` points of the records collection."""

    def __init__(self, records: TenantNamespaces) -> None:
        self._records = records

    async def read_store_meta(self) -> dict[str, str]:
        """Store-wide facts: the payloads of the `meta` points."""
        pages = self._records.pages(_METAS)
        found = [point.payload or {} async for page in pages for point in page]
        return {str(p["key"]): str(p["value"]) for p in found if "key" in p and "value" in p}

    async def write_store_meta(self, key: str, value: str) -> None:
        payload = {FIELD_TYPE: META, "key": key, "value": value}
        point = models.PointStruct(id=meta_id(key), vector={}, payload=payload)
        collection = self._records.collection
        await self._records.call(lambda c: c.upsert(collection, [point], wait=True))
