"""How a memory and a namespace record are laid out in a Qdrant payload.

Both Qdrant adapters (server and embedded) share this layout, so a collection
written by one can be read by the other. Times are kept twice: as the RFC 3339
string the API returns, and as integer microseconds since the epoch for range
filters and ordering (integers keep microsecond precision; floats do not).

`pinned` is stored as the integer 0 or 1, not as a bool: qdrant-edge-py 0.9.0
never matches `MatchValue(True)` against a bool payload (see
`tests/test_qdrant_edge_quirks.py`), and one layout for both adapters is
worth more than a native bool on the server.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from adapters.base import JsonObject, MemoryRecord, NamespaceRecord

FIELD_CREATED_US = "created_us"
FIELD_EXPIRES_US = "expires_us"
FIELD_PINNED = "pinned"
FIELD_KIND = "kind"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(moment: datetime) -> int:
    """Exact integer microseconds since the epoch of an aware datetime."""
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with a `Z`: what the platform's Go client decodes."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def format_optional_time(moment: datetime | None) -> str | None:
    return format_time(moment) if moment is not None else None


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def _optional_time(text: Any) -> datetime | None:
    return parse_time(text) if isinstance(text, str) else None


def memory_to_payload(memory: MemoryRecord) -> JsonObject:
    payload: JsonObject = {
        "content": memory.content,
        FIELD_KIND: memory.kind,
        "source": memory.source,
        FIELD_PINNED: int(memory.pin),
        "created_at": format_time(memory.created_at),
        FIELD_CREATED_US: to_micros(memory.created_at),
        "expires_at": None,
        "propagation": memory.propagation,
    }
    if memory.expires_at is not None:
        payload["expires_at"] = format_time(memory.expires_at)
        payload[FIELD_EXPIRES_US] = to_micros(memory.expires_at)
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
        expires_at=_optional_time(payload.get("expires_at")),
        propagation=payload.get("propagation"),
    )


def namespace_to_json(record: NamespaceRecord) -> str:
    return json.dumps(
        {
            "name": record.name,
            "kind": record.kind,
            "created_at": format_time(record.created_at),
            "expires_at": format_optional_time(record.expires_at),
            "metadata": record.metadata,
        },
        separators=(",", ":"),
        sort_keys=True,
    )


def namespace_from_json(text: str) -> NamespaceRecord:
    data = json.loads(text)
    return NamespaceRecord(
        name=data["name"],
        kind=data["kind"],
        created_at=parse_time(data["created_at"]),
        expires_at=_optional_time(data.get("expires_at")),
        metadata=data.get("metadata"),
    )
