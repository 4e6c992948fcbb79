"""qdrant-client's local mode under the Qdrant server layouts: a peek at what it stores.

Helpers of tests/qdrant/local/: the raw client behind a `QdrantConnection`, point
counts and collection names, a spy on client calls, an injected outage of filter deletes.
"""

from __future__ import annotations

from collections.abc import Awaitable
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from qdrant_client import AsyncQdrantClient
from qdrant_client.http import models

from adapters.qdrant.server.connection import QdrantConnection
from adapters.values import NamespaceRecord
from tests.support.records import T0

MEMORIES, RECORDS = "memory-memories", "memory-namespaces"


async def client(connection: QdrantConnection) -> AsyncQdrantClient:
    """The raw client behind an open `connection`: the one each of its calls is handed."""

    async def itself(found: AsyncQdrantClient) -> AsyncQdrantClient:
        return found

    return await connection.call(itself)


async def count(connection: QdrantConnection, collection: str) -> int:
    raw = await client(connection)
    return (await raw.count(collection, exact=True)).count


async def collection_names(connection: QdrantConnection) -> set[str]:
    raw = await client(connection)
    return {found.name for found in (await raw.get_collections()).collections}


async def spy(
    monkeypatch: pytest.MonkeyPatch, connection: QdrantConnection, method: str
) -> list[tuple[Any, ...]]:
    """Record each call of the client's `method` (still made for real)."""
    calls: list[tuple[Any, ...]] = []
    raw = await client(connection)
    real: Callable[..., Awaitable[Any]] = getattr(raw, method)

    async def recorded(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return await real(*args, **kwargs)

    monkeypatch.setattr(raw, method, recorded)
    return calls


async def fail_filter_deletes(
    monkeypatch: pytest.MonkeyPatch, connection: QdrantConnection
) -> None:
    """Every delete by filter in the memories collection times out (an outage mid-delete)."""
    raw = await client(connection)
    real = raw.delete

    async def delete(collection: str, selector: Any, **kwargs: Any) -> Any:
        if collection == MEMORIES and isinstance(selector, models.FilterSelector):
            raise httpx.ReadTimeout("timed out")
        return await real(collection, selector, **kwargs)

    monkeypatch.setattr(raw, "delete", delete)


def ns_record(name: str) -> NamespaceRecord:
    return NamespaceRecord(name=name, kind=name.split(":")[0], created_at=T0)


async def stored_points(connection: QdrantConnection, collection: str) -> dict[Any, Any]:
    raw = await client(connection)
    points, _ = await raw.scroll(collection, limit=10_000, with_vectors=True)
    return {p.id: (p.payload, p.vector) for p in points}
