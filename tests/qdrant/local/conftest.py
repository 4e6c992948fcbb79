"""Fixtures of the local-mode Qdrant tests: one in-memory store, and the shared layout on it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.qdrant.server.connection import QdrantConnection
from adapters.qdrant.server.tenants import QdrantServerBackend
from tests.support.records import DIM


@pytest.fixture
async def connection() -> AsyncIterator[QdrantConnection]:
    """One local-mode store that several backends can share."""
    shared = QdrantConnection(location=":memory:")
    shared.open()
    yield shared
    await shared.close()


@pytest.fixture
async def shared(connection: QdrantConnection) -> QdrantServerBackend:
    backend = QdrantServerBackend(DIM, connection=connection)
    await backend.start()
    return backend
