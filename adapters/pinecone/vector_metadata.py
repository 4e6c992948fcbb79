"""How memories and namespace records are laid out in Pinecone vector metadata.

Within Pinecone's metadata types and size limit (refused, never truncated), times kept twice,
each memory with its namespace's epoch. See docs/backends.md, "Pinecone".
"""

from __future__ import annotations

import json
from typing import Any

from adapters.errors import BackendRejected
from adapters.times import format_optional_time
from adapters.times import format_time
from adapters.times import parse_time
from adapters.times import to_micros
from adapters.values import JsonObject
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import NamespaceRecord

METADATA_LIMIT_BYTES = 40 * 1024
NEVER_US = 2**53 - 1
F_CONTENT = "content"
F_KIND = "kind"
F_SOURCE = "source"
F_PINNED = "pinned"
F_CREATED_AT = "created_at"
F_CREATED_US = "created_us"
F_POSITION = "pos"
F_EXPIRES_AT = "expires_at"
F_EXPIRES_US = "expires_us"
F_PROPAGATION = "propagation"
F_EPOCH = "epoch"
F_NAME = "name"
F_METADATA = "metadata"


def fixed_unit_vector(dimension: int) -> list[float]:
    """The vector of namespace records and of listing queries: any fixed non-zero one
    (Pinecone refuses an all-zero vector under cosine)."""
    return [1.0] + [0.0] * (dimension - 1)


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def metadata_size(metadata: JsonObject) -> int:
    """Bytes of the metadata as JSON: what Pinecone counts against its 40 KB limit."""
    return len(_compact(metadata).encode())


def require_within_limit(metadata: JsonObject, what: str) -> None:
    """Refuse (HTTP 400) before anything is written; never truncate."""
    size = metadata_size(metadata)
    if size > METADATA_LIMIT_BYTES:
        raise BackendRejected(
            f"{what} is too large for Pinecone: its stored form is {size} bytes, over the"
            f" {METADATA_LIMIT_BYTES}-byte metadata limit per vector; shorten the content"
            " or propagation"
        )


def memory_to_metadata(memory: MemoryRecord, epoch: str) -> JsonObject:
    metadata: JsonObject = {
        F_CONTENT: memory.content,
        F_KIND: memory.kind,
        F_SOURCE: memory.source,
        F_PINNED: memory.pin,
        F_CREATED_AT: format_time(memory.created_at),
        F_CREATED_US: to_micros(memory.created_at),
        F_EXPIRES_US: NEVER_US,
        F_EPOCH: epoch,
    }
    if memory.expires_at is not None:
        metadata[F_EXPIRES_AT] = format_time(memory.expires_at)
        metadata[F_EXPIRES_US] = to_micros(memory.expires_at)
    if memory.propagation is not None:
        metadata[F_PROPAGATION] = _compact(memory.propagation)
    if memory.position is not None:
        metadata[F_POSITION] = memory.position
    require_within_limit(metadata, "the memory")
    return metadata


def memory_from_metadata(memory_id: str, namespace: str, metadata: JsonObject) -> MemoryRecord:
    expires_at = metadata.get(F_EXPIRES_AT)
    propagation = metadata.get(F_PROPAGATION)
    return MemoryRecord(
        id=memory_id,
        namespace=namespace,
        content=metadata[F_CONTENT],
        kind=metadata[F_KIND],
        source=metadata[F_SOURCE],
        created_at=parse_time(metadata[F_CREATED_AT]),
        pin=bool(metadata.get(F_PINNED, False)),
        expires_at=parse_time(expires_at) if isinstance(expires_at, str) else None,
        propagation=json.loads(propagation) if isinstance(propagation, str) else None,
        position=_position(metadata.get(F_POSITION)),
    )


def _position(value: Any) -> int | None:
    """A stored place in the write order: Pinecone answers every number as a float."""
    return None if value is None else int(value)


def namespace_to_metadata(record: NamespaceRecord, epoch: str) -> JsonObject:
    metadata: JsonObject = {
        F_NAME: record.name,
        F_KIND: record.kind,
        F_CREATED_AT: format_time(record.created_at),
        F_EPOCH: epoch,
    }
    expires_at = format_optional_time(record.expires_at)
    if expires_at is not None:
        metadata[F_EXPIRES_AT] = expires_at
    if record.metadata is not None:
        metadata[F_METADATA] = _compact(record.metadata)
    require_within_limit(metadata, "the namespace record")
    return metadata


def namespace_from_metadata(metadata: JsonObject) -> tuple[NamespaceRecord, str]:
    """The record and its epoch."""
    expires_at = metadata.get(F_EXPIRES_AT)
    extra = metadata.get(F_METADATA)
    record = NamespaceRecord(
        name=metadata[F_NAME],
        kind=metadata[F_KIND],
        created_at=parse_time(metadata[F_CREATED_AT]),
        expires_at=parse_time(expires_at) if isinstance(expires_at, str) else None,
        metadata=json.loads(extra) if isinstance(extra, str) else None,
    )
    return record, str(metadata[F_EPOCH])


def memory_filter(epoch: str, memory_filter: MemoryFilter) -> JsonObject:
    """A Pinecone metadata filter for `memory_filter` within one namespace epoch."""
    conditions: list[JsonObject] = [
        {F_EPOCH: {"$eq": epoch}},
        {F_EXPIRES_US: {"$gt": to_micros(memory_filter.now)}},
    ]
    if memory_filter.pinned is not None:
        conditions.append({F_PINNED: {"$eq": memory_filter.pinned}})
    if memory_filter.kinds is not None:
        conditions.append({F_KIND: {"$in": sorted(memory_filter.kinds)}})
    return {"$and": conditions}


def newer_than(base: JsonObject, created_us: int) -> JsonObject:
    """`base` narrowed to memories created at or after `created_us`."""
    conditions: list[Any] = [*base["$and"], {F_CREATED_US: {"$gte": created_us}}]
    return {"$and": conditions}


def matches(memory: MemoryRecord, memory_filter: MemoryFilter) -> bool:
    """The same test as `memory_filter`, for writes Pinecone cannot show yet."""
    if memory.is_expired(memory_filter.now):
        return False
    if memory_filter.pinned is not None and memory.pin != memory_filter.pinned:
        return False
    return memory_filter.kinds is None or memory.kind in memory_filter.kinds
