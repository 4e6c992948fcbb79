"""qdrant-client's local mode under the Qdrant server layouts: a peek at what it stores.

Helpers of tests/qdrant/local/: the raw client behind a `QdrantConnection`, point
counts, a spy on client calls, an injected outage of filter deletes.
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


def client(connection: QdrantConnection) -> AsyncQdrantClient:
    found = connection._client
    assert found is not None
    return found


async def count(connection: QdrantConnection, collection: str) -> int:
    return (await client(connection).count(collection, exact=True)).count


def spy(
    monkeypatch: pytest.MonkeyPatch, connection: QdrantConnection, method: str
) -> list[tuple[Any, ...]]:
    """Record each call of the client's `method` (still made for real)."""
    calls: list[tuple[Any, ...]] = []
    real: Callable[..., Awaitable[Any]] = getattr(client(connection), method)

    async def recorded(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return await real(*args, **kwargs)

    monkeypatch.setattr(client(connection), method, recorded)
    return calls


def fail_filter_deletes(monkeypatch: pytest.MonkeyPatch, connection: QdrantConnection) -> None:
    """Every delete by filter in the memories collection times out (an outage mid-delete)."""
    real = client(connection).delete

    async def delete(collection: str, selector: Any, **kwargs: Any) -> Any:
        if collection == MEMORIES and isinstance(selector, models.FilterSelector):
            raise httpx.ReadTimeout("timed out")
        return await real(collection, selector, **kwargs)

    monkeypatch.setattr(client(connection), "delete", delete)


def ns_record(name: str) -> NamespaceRecord:
    return NamespaceRecord(name=name, kind=name.split(":")[0], created_at=T0)


async def stored_points(connection: QdrantConnection, collection: str) -> dict[Any, Any]:
    points, _ = await client(connection).scroll(collection, limit=10_000, with_vectors=True)
    return {p.id: (p.payload, p.vector) for p in points}
