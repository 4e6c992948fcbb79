"""Fixtures of the Qdrant server layouts' HTTP tests: the mocked server and both layouts on it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from collections.abc import Iterator

import pytest
import respx

from adapters.base import VectorBackend
from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.tenants import QdrantServerBackend
from tests.support.qdrant_rest import mock_shared_ready
from tests.support.qdrant_server import URL
from tests.support.records import DIM


@pytest.fixture
def mock() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=URL, assert_all_called=False) as router:
        yield router


@pytest.fixture
async def shared(mock: respx.MockRouter) -> AsyncIterator[QdrantServerBackend]:
    """The shared layout after its first contact: both collections in place, routes cleared."""
    mock_shared_ready(mock, DIM)
    backend = QdrantServerBackend(DIM, url=URL)
    await backend.start()
    mock.routes.clear()
    mock.calls.clear()
    yield backend
    await backend.close()


@pytest.fixture
async def coll(mock: respx.MockRouter) -> AsyncIterator[QdrantCollectionsBackend]:
    backend = QdrantCollectionsBackend(DIM, url=URL)
    await backend.start()
    yield backend
    await backend.close()


@pytest.fixture(params=["shared", "collections"])
def backend(request: pytest.FixtureRequest) -> VectorBackend:
    fixture = "shared" if request.param == "shared" else "coll"
    found: VectorBackend = request.getfixturevalue(fixture)
    return found
