"""How memories and namespace records are laid out in Qdrant, for every Qdrant layout.

One payload layout serves the embedded store and a Qdrant server, so data written by one reads the
same in the other. The fields: docs/backends.md, "Qdrant server".
"""

from __future__ import annotations

import enum
import functools
import json
import uuid
from dataclasses import dataclass

from adapters.times import format_time
from adapters.times import parse_optional_time
from adapters.times import parse_time
from adapters.times import to_micros
from adapters.values import JsonObject
from adapters.values import MemoryRecord
from adapters.values import NamespaceRecord

FIELD_NAMESPACE = "ns"
FIELD_EPOCH = "epoch"
FIELD_MEMORY_ID = "memory_id"
FIELD_CREATED_US = "created_us"
FIELD_EXPIRES_US = "expires_us"
FIELD_PROPAGATION_JSON = "propagation_json"
FIELD_PINNED = "pinned"
FIELD_KIND = "kind"
FIELD_POSITION = "pos"

# The UUIDv5 namespace of point ids in the shared layout. Never change it: every
# stored point id depends on it.
_POINT_IDS = uuid.UUID("6f0c8a52-3c0e-4d8e-9b7a-1f2e5d4c3b2a")


class IndexKind(enum.Enum):
    """What a payload index is for; each engine renders it in its own types."""

    TENANT = "tenant"  # keyword, is_tenant: the partition key
    KEYWORD = "keyword"
    ORDERED_INTEGER = "ordered_integer"  # range + lookup: order_by needs it on a server
    RANGE_INTEGER = "range_integer"
    MATCH_INTEGER = "match_integer"


# Indexes of a memories store; the tenant layout adds the first two.
TENANT_INDEXES: dict[str, IndexKind] = {
    FIELD_NAMESPACE: IndexKind.TENANT,
    FIELD_EPOCH: IndexKind.KEYWORD,
}
MEMORY_INDEXES: dict[str, IndexKind] = {
    FIELD_CREATED_US: IndexKind.ORDERED_INTEGER,
    FIELD_EXPIRES_US: IndexKind.RANGE_INTEGER,
    FIELD_PINNED: IndexKind.MATCH_INTEGER,
    FIELD_KIND: IndexKind.KEYWORD,
}


@dataclass(frozen=True, slots=True)
class Scope:
    """The namespaces a read may see: each live name with its current epoch."""

    names: tuple[str, ...]
    epochs: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.names)


@functools.lru_cache(maxsize=4096)
def point_id(namespace: str, memory_id: str) -> str:
    """The shared layout's point id for a memory: stable, and distinct per namespace.

    Cached: a commit with an explicit id asks for it twice (existence check, upsert),
    and a uuid5 costs more than both lookups.
    """
    return str(uuid.uuid5(_POINT_IDS, f"{namespace}\n{memory_id}"))


def new_epoch() -> str:
    """A token for one incarnation of a namespace (unique across names and time)."""
    return uuid.uuid4().hex


def memory_to_payload(memory: MemoryRecord, epoch: str | None = None) -> JsonObject:
    """The payload of `memory`; with `epoch`, in the shared layout (tenant fields added)."""
    payload: JsonObject = {
        "content": memory.content,
        FIELD_KIND: memory.kind,
        "source": memory.source,
        FIELD_PINNED: int(memory.pin),
        "created_at": format_time(memory.created_at),
        FIELD_CREATED_US: to_micros(memory.created_at),
        "expires_at": None,
    }
    if memory.propagation is not None:
        payload[FIELD_PROPAGATION_JSON] = json.dumps(memory.propagation, separators=(",", ":"))
    if memory.expires_at is not None:
        payload["expires_at"] = format_time(memory.expires_at)
        payload[FIELD_EXPIRES_US] = to_micros(memory.expires_at)
    if memory.position is not None:
        payload[FIELD_POSITION] = memory.position
    if epoch is not None:
        payload[FIELD_NAMESPACE] = memory.namespace
        payload[FIELD_EPOCH] = epoch
        payload[FIELD_MEMORY_ID] = memory.id
    return payload


def memory_from_payload(memory_id: str, namespace: str, payload: JsonObject) -> MemoryRecord:
    return MemoryRecord(
        id=memory_id,
        namespace=namespace,
        content=payload["content"],
        kind=payload[FIELD_KIND],
        source=payload["source"],
        created_at=parse_time(payload["created_at"]),
        pin=bool(payload.get(FIELD_PINNED, 0)),
        expires_at=parse_optional_time(payload.get("expires_at")),
        propagation=_propagation(payload),
        position=payload.get(FIELD_POSITION),
    )


def _propagation(payload: JsonObject) -> JsonObject | None:
    text = payload.get(FIELD_PROPAGATION_JSON)
    if isinstance(text, str):
        found: JsonObject = json.loads(text)
        return found
    return payload.get("propagation")


def memory_from_shared(payload: JsonObject) -> MemoryRecord:
    """A memory read from the shared layout, where the payload names its namespace and id."""
    return memory_from_payload(payload[FIELD_MEMORY_ID], payload[FIELD_NAMESPACE], payload)


def namespace_to_json(record: NamespaceRecord) -> str:
    return json.dumps(record.to_json_object(), separators=(",", ":"), sort_keys=True)


def namespace_from_json(text: str) -> NamespaceRecord:
    return NamespaceRecord.from_json_object(json.loads(text))
