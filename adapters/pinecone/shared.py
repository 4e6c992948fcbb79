"""What every part of `PineconeBackend` (backend.py) is handed, and the requests they all make.

The namespace prefix, the placeholder vector of records, the overlay, the index once connected,
and the time budget of one call.
"""

from __future__ import annotations

from collections.abc import Awaitable
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from typing import TypeVar

from pinecone import AsyncIndex
from pinecone.models.vectors.vector import Vector

from adapters.pinecone.index_connection import call
from adapters.pinecone.overlay import FreshnessOverlay

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Shared:
    prefix: str
    unit_vector: list[float]  # stored with records and metadata, which have no embedding
    overlay: FreshnessOverlay
    ready: Callable[[], Awaitable[AsyncIndex]]  # the index, connected on first use
    budget_s: float  # one call's time, retries included (index_connection.py)

    def pinecone_namespace(self, name: str) -> str:
        return self.prefix + name

    async def call(self, operation: str, op: Callable[[AsyncIndex, float], Awaitable[T]]) -> T:
        """`op(index, timeout_s)` on the connected index, within one call's budget."""
        index = await self.ready()
        return await call(operation, lambda t: op(index, t), self.budget_s)

    async def fetch(self, operation: str, ids: list[str], namespace: str) -> dict[str, Vector]:
        """The vectors of `ids` in the Pinecone namespace `namespace`, by id: one request."""
        found = await self.call(
            operation, lambda i, t: i.fetch(ids=ids, namespace=namespace, timeout=t)
        )
        return found.vectors

    async def list_page(
        self, operation: str, namespace: str, size: int, token: str | None
    ) -> tuple[list[str], str | None]:
        """One page of the ids in the Pinecone namespace `namespace`, and the next's token."""
        page = await self.call(
            operation,
            lambda i, t: i.list_paginated(
                namespace=namespace, limit=size, pagination_token=token, timeout=t
            ),
        )
        ids = [item.id for item in page.vectors if item.id]
        return ids, page.pagination.next if page.pagination else None

    async def upsert(self, operation: str, items: list[dict[str, Any]], namespace: str) -> None:
        await self.call(
            operation, lambda i, t: i.upsert(vectors=items, namespace=namespace, timeout=t)
        )
