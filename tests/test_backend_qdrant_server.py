"""The shared backend suite against `QdrantServerBackend` in qdrant-client's local mode.

Local mode needs no server, so this runs everywhere; what only a real server
does (HTTP errors, request shapes, payload indexes) is in test_qdrant_server_http.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.qdrant_server import QdrantServerBackend
from tests.backend_suite import DIM, BackendSuite


class TestQdrantServerInMemory(BackendSuite):
    @pytest.fixture
    async def backend(self) -> AsyncIterator[QdrantServerBackend]:
        backend = QdrantServerBackend(DIM, location=":memory:")
        await backend.start()
        yield backend
        await backend.close()
