"""`VectorBackend` on a Qdrant server, through qdrant-client's `AsyncQdrantClient`.

One collection per namespace; the namespace record lives in the collection's
`metadata` under a single key, so replacing it is one atomic PATCH (Qdrant
merges metadata keys, it never drops them). Every SDK call goes through
`_call`, which turns SDK and httpx exceptions into `adapters.errors` types.
`location=":memory:"` runs qdrant-client's in-process local mode (tests).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import httpx
from qdrant_client import AsyncQdrantClient
from qdrant_client.common.client_exceptions import QdrantException
from qdrant_client.http import models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from adapters import naming
from adapters import payload as layout
from adapters.base import MemoryFilter, MemoryRecord, NamespaceRecord, ScoredMemory, VectorBackend
from adapters.errors import (
    BackendError,
    BackendRejected,
    BackendUnavailable,
    NamespaceConflict,
    NamespaceGone,
)
from adapters.payload import FIELD_CREATED_US, FIELD_EXPIRES_US, FIELD_KIND, FIELD_PINNED

T = TypeVar("T")

RECORD_KEY = "memory_plugin_namespace"
_INT = models.PayloadSchemaType.INTEGER
# Ordering by created_us needs a range index on a real server; the others serve filters.
PAYLOAD_INDEXES: dict[str, models.PayloadSchemaType | models.IntegerIndexParams] = {
    FIELD_CREATED_US: models.IntegerIndexParams(type=_INT, lookup=True, range=True),
    FIELD_EXPIRES_US: models.IntegerIndexParams(type=_INT, lookup=False, range=True),
    FIELD_PINNED: models.IntegerIndexParams(type=_INT, lookup=True, range=False),
    FIELD_KIND: models.PayloadSchemaType.KEYWORD,
}
_UNAVAILABLE_STATUSES = frozenset({408, 429})
# What reads of a missing collection answer (never mutated).
_NO_RECORDS: list[models.Record] = []
_NO_PAGE: tuple[list[models.Record], Any] = ([], None)


class _CollectionMissing(BackendError):
    """The namespace's collection does not exist (HTTP 404, or local 'not found')."""


class _CollectionExists(BackendError):
    """Create lost a race: another replica created the collection first."""


def _from_response(exc: UnexpectedResponse) -> BackendError:
    status = exc.status_code or 0
    body = exc.content.decode("utf-8", "replace")
    detail = body[:200]
    if status >= 500 or status in _UNAVAILABLE_STATUSES:
        return BackendUnavailable(f"qdrant answered {status}: {detail}")
    if status == 404:
        return _CollectionMissing(detail)
    if status == 409 or (status == 400 and "already exists" in body):
        return _CollectionExists(detail)
    return BackendError(f"qdrant rejected the request ({status}): {detail}")


def _from_value_error(exc: ValueError) -> BackendError:
    """Local mode raises ValueError where a server answers 404 / 409 / 400."""
    text = str(exc)
    if text.startswith("Collection ") and text.endswith(" not found"):
        return _CollectionMissing(text)
    if text.startswith("Collection ") and text.endswith(" already exists"):
        return _CollectionExists(text)
    return BackendError(f"qdrant client refused the request: {text}")


def _point_id(memory_id: str) -> str | None:
    """Canonical UUID text, or None: a server answers 400 to a non-UUID id."""
    try:
        return str(uuid.UUID(memory_id))
    except ValueError:
        return None


def _to_filter(memory_filter: MemoryFilter) -> models.Filter:
    must: list[models.Condition] = []
    if memory_filter.pinned is not None:
        value = int(memory_filter.pinned)
        must.append(models.FieldCondition(key=FIELD_PINNED, match=models.MatchValue(value=value)))
    if memory_filter.kinds is not None:
        kinds = sorted(memory_filter.kinds)
        must.append(models.FieldCondition(key=FIELD_KIND, match=models.MatchAny(any=kinds)))
    return models.Filter(must=must or None, must_not=[_expired_by(memory_filter.now)])


def _expired_by(now: datetime) -> models.FieldCondition:
    expires_by = models.Range(lte=layout.to_micros(now))
    return models.FieldCondition(key=FIELD_EXPIRES_US, range=expires_by)


def _index_creator(
    collection: str, field: str, schema: models.PayloadSchemaType | models.IntegerIndexParams
) -> Callable[[AsyncQdrantClient], Awaitable[models.UpdateResult]]:
    return lambda c: c.create_payload_index(collection, field, field_schema=schema, wait=True)


def _memory(namespace: str, point: models.Record | models.ScoredPoint) -> MemoryRecord:
    return layout.memory_from_payload(str(point.id), namespace, point.payload or {})


class QdrantServerBackend(VectorBackend):
    """Memories in a Qdrant server (or qdrant-client local mode), one collection per namespace."""

    name = "qdrant"

    def __init__(
        self,
        dimension: int,
        *,
        url: str | None = None,
        api_key: str | None = None,
        location: str | None = None,
        prefix: str = naming.DEFAULT_PREFIX,
        timeout_s: float = 1.0,
    ) -> None:
        super().__init__(dimension)
        if (url is None) == (location is None):
            raise ValueError("give exactly one of url and location")
        if not naming.is_valid_collection_name(prefix):
            raise ValueError(f"prefix {prefix!r} cannot start a Qdrant collection name")
        self._url = url
        self._api_key = api_key
        self._location = location
        self._prefix = prefix
        self._timeout = max(1, math.ceil(timeout_s))
        # Local mode ignores payload indexes and warns on each one: skip them there.
        self._local = url is None and not str(location).startswith(("http://", "https://"))
        self._client: AsyncQdrantClient | None = None

    async def start(self) -> None:
        """Build the client without I/O: the plugin must boot while Qdrant is down."""
        if self._client is not None:
            return
        if self._url is not None:
            self._client = AsyncQdrantClient(
                url=self._url,
                api_key=self._api_key,
                timeout=self._timeout,
                check_compatibility=False,
            )
        else:
            self._client = AsyncQdrantClient(location=self._location)

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await self._call(lambda c: c.close(), client)

    async def _call(
        self,
        op: Callable[[AsyncQdrantClient], Awaitable[T]],
        client: AsyncQdrantClient | None = None,
    ) -> T:
        """Run one SDK call, letting out only `adapters.errors` types."""
        client = self._client if client is None else client
        if client is None:
            raise BackendUnavailable("qdrant backend is not started")
        try:
            return await op(client)
        except UnexpectedResponse as exc:
            raise _from_response(exc) from exc
        except (ResponseHandlingException, QdrantException, httpx.HTTPError) as exc:
            # QdrantException: 429 with Retry-After (ResourceExhaustedResponse) or a bad one.
            raise BackendUnavailable(f"qdrant unreachable: {exc!r}") from exc
        except ValueError as exc:
            raise _from_value_error(exc) from exc
        except Exception as exc:
            raise BackendError(f"qdrant client failed: {exc!r}") from exc

    async def _read(self, op: Callable[[AsyncQdrantClient], Awaitable[T]], missing: T) -> T:
        """A read on a namespace whose collection is missing answers `missing`."""
        try:
            return await self._call(op)
        except _CollectionMissing:
            return missing

    def _collection(self, namespace: str) -> str:
        return naming.collection_name(namespace, self._prefix)

    async def ping(self) -> None:
        try:
            await self._call(lambda c: c.get_collections())
        except BackendUnavailable:
            raise
        except BackendError as exc:
            raise BackendUnavailable(f"qdrant did not answer ping: {exc}") from exc

    async def _info(self, collection: str) -> models.CollectionInfo | None:
        return await self._read(lambda c: c.get_collection(collection), None)

    def _record(
        self, info: models.CollectionInfo, namespace: str | None, collection: str
    ) -> NamespaceRecord | None:
        """Decode the record kept with `collection`; conflict if it names another namespace."""
        raw = (info.config.metadata or {}).get(RECORD_KEY)
        if not isinstance(raw, str):
            return None
        try:
            record = layout.namespace_from_json(raw)
        except (ValueError, KeyError, TypeError) as exc:
            raise BackendError(f"collection {collection!r} holds a corrupt record") from exc
        if namespace is not None and record.name != namespace:
            raise NamespaceConflict(
                f"collection {collection!r} belongs to {record.name!r}, not {namespace!r}"
            )
        return record

    async def get_namespace(self, name: str) -> NamespaceRecord | None:
        collection = self._collection(name)
        info = await self._info(collection)
        return None if info is None else self._record(info, name, collection)

    async def save_namespace(self, record: NamespaceRecord) -> None:
        collection = self._collection(record.name)
        metadata: dict[str, Any] = {RECORD_KEY: layout.namespace_to_json(record)}
        info = await self._info(collection)
        if info is None:
            try:
                await self._call(
                    lambda c: c.create_collection(
                        collection,
                        vectors_config=models.VectorParams(
                            size=self.dimension, distance=models.Distance.COSINE
                        ),
                        metadata=metadata,
                    )
                )
            except _CollectionExists:
                info = await self._info(collection)  # another replica won the race
            else:
                await self._ensure_indexes(collection, {})
                return
            if info is None:
                raise BackendError(f"collection {collection!r} vanished while saving")
        self._record(info, record.name, collection)
        await self._ensure_indexes(collection, info.payload_schema)
        await self._call(lambda c: c.update_collection(collection, metadata=metadata))

    async def _ensure_indexes(self, collection: str, present: dict[str, Any]) -> None:
        """Create missing payload indexes; also heals a create cut short by a crash."""
        if self._local:
            return
        for field, schema in PAYLOAD_INDEXES.items():
            if field not in present:
                await self._call(_index_creator(collection, field, schema))

    async def delete_namespace(self, name: str) -> bool:
        collection = self._collection(name)
        info = await self._info(collection)
        if info is None:
            return False
        self._record(info, name, collection)
        return await self._read(lambda c: c.delete_collection(collection), False)

    async def list_namespaces(self) -> list[NamespaceRecord]:
        listing = await self._call(lambda c: c.get_collections())
        records: list[NamespaceRecord] = []
        for description in sorted(listing.collections, key=lambda d: d.name):
            if not description.name.startswith(self._prefix):
                continue
            info = await self._info(description.name)
            record = None if info is None else self._record(info, None, description.name)
            if record is not None and self._collection(record.name) == description.name:
                records.append(record)
        return records

    async def _retrieve(self, namespace: str, memory_id: str) -> models.Record | None:
        point_id = _point_id(memory_id)
        if point_id is None:
            return None
        collection = self._collection(namespace)
        found = await self._read(lambda c: c.retrieve(collection, [point_id]), _NO_RECORDS)
        return found[0] if found else None

    async def get_memory(self, namespace: str, memory_id: str) -> MemoryRecord | None:
        point = await self._retrieve(namespace, memory_id)
        return None if point is None else _memory(namespace, point)

    async def upsert_memory(self, memory: MemoryRecord, vector: Sequence[float]) -> None:
        point_id = _point_id(memory.id)
        if point_id is None:
            raise BackendRejected(f"memory id {memory.id!r} is not a UUID")
        point = models.PointStruct(
            id=point_id, vector=[float(x) for x in vector], payload=layout.memory_to_payload(memory)
        )
        collection = self._collection(memory.namespace)
        try:
            await self._call(lambda c: c.upsert(collection, [point], wait=True))
        except _CollectionMissing as exc:
            raise NamespaceGone(f"namespace {memory.namespace} not found") from exc

    async def query_memories(
        self,
        namespace: str,
        vector: Sequence[float],
        memory_filter: MemoryFilter,
        limit: int,
    ) -> list[ScoredMemory]:
        collection, query = self._collection(namespace), [float(x) for x in vector]
        query_filter = _to_filter(memory_filter)
        response = await self._read(
            lambda c: c.query_points(
                collection, query, query_filter=query_filter, limit=limit, with_payload=True
            ),
            models.QueryResponse(points=[]),
        )
        return [ScoredMemory(_memory(namespace, p), p.score) for p in response.points]

    async def list_memories(
        self, namespace: str, memory_filter: MemoryFilter, limit: int
    ) -> list[MemoryRecord]:
        collection, scroll_filter = self._collection(namespace), _to_filter(memory_filter)
        newest_first = models.OrderBy(key=FIELD_CREATED_US, direction=models.Direction.DESC)
        points, _ = await self._read(
            lambda c: c.scroll(
                collection, scroll_filter, limit, order_by=newest_first, with_payload=True
            ),
            _NO_PAGE,
        )
        return [_memory(namespace, p) for p in points]

    async def delete_memory(self, namespace: str, memory_id: str) -> bool:
        point = await self._retrieve(namespace, memory_id)
        if point is None:
            return False
        collection, selector = self._collection(namespace), models.PointIdsList(points=[point.id])
        deleted = await self._read(lambda c: c.delete(collection, selector, wait=True), None)
        return deleted is not None

    async def delete_expired_memories(self, namespace: str, now: datetime) -> int:
        collection = self._collection(namespace)
        expired = models.Filter(must=[_expired_by(now)])
        found = await self._read(
            lambda c: c.count(collection, expired, exact=True), models.CountResult(count=0)
        )
        if found.count == 0:
            return 0
        selector = models.FilterSelector(filter=expired)
        deleted = await self._read(lambda c: c.delete(collection, selector, wait=True), None)
        return 0 if deleted is None else found.count
