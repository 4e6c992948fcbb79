"""The shared backend suite against a real Qdrant server at QDRANT_URL, in both layouts.

Skipped unless QDRANT_URL is set and a server answers there, e.g.:

    docker compose up -d qdrant
    QDRANT_URL=http://localhost:6333 python -m pytest -m live_qdrant

Every test gets collections under its own prefix (`mpvtest-<run>-<test>-`),
deleted again afterwards, so a shared server is left as it was found.
QDRANT_API_KEY is sent when set.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator

import pytest
from qdrant_client import AsyncQdrantClient

from adapters.base import VectorBackend
from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.tenants import QdrantServerBackend
from tests.backends.suite import BackendSuite
from tests.backends.suite.hybrid import HybridSuite
from tests.backends.suite.hybrid import KeywordFillSuite
from tests.backends.suite.rerank import RerankSuite
from tests.support.records import DIM

pytestmark = pytest.mark.live_qdrant

RUN_PREFIX = f"mpvtest-{uuid.uuid4().hex[:8]}-"


def _probe(url: str, api_key: str | None) -> str | None:
    """None when a Qdrant server answers at `url`, else why not."""
    request = urllib.request.Request(f"{url.rstrip('/')}/readyz")
    if api_key:
        request.add_header("api-key", api_key)
    try:
        with urllib.request.urlopen(request, timeout=1.0) as response:
            if response.status == 200:
                return None
            return f"GET {url}/readyz answered {response.status}"
    except urllib.error.HTTPError as error:
        return f"GET {url}/readyz answered {error.code}"
    except (OSError, ValueError) as error:
        return f"nothing answers at QDRANT_URL={url} ({error})"


@pytest.fixture(scope="module")
def qdrant() -> tuple[str, str | None]:
    """(url, api key) of a live server, or skip saying why there is none."""
    url = os.environ.get("QDRANT_URL", "").strip()
    if not url:
        pytest.skip(
            "QDRANT_URL is not set (e.g. `docker compose up -d qdrant` and "
            "QDRANT_URL=http://localhost:6333)"
        )
    api_key = os.environ.get("QDRANT_API_KEY") or None
    reason = _probe(url, api_key)
    if reason is not None:
        pytest.skip(reason)
    return url, api_key


async def _delete_collections(url: str, api_key: str | None, prefix: str) -> list[str]:
    client = AsyncQdrantClient(url=url, api_key=api_key, timeout=10, check_compatibility=False)
    try:
        names = [c.name for c in (await client.get_collections()).collections]
        ours = [name for name in names if name.startswith(prefix)]
        for name in ours:
            await client.delete_collection(name)
        return ours
    finally:
        await client.close()


async def _live_backend(
    kind: type[QdrantServerBackend | QdrantCollectionsBackend], url: str, api_key: str | None
) -> AsyncIterator[VectorBackend]:
    prefix = f"{RUN_PREFIX}{uuid.uuid4().hex[:6]}-"
    backend = kind(DIM, url=url, api_key=api_key, prefix=prefix, timeout_s=5, tokens=True)
    await backend.start()
    try:
        yield backend
    finally:
        await backend.close()
        await _delete_collections(url, api_key, prefix)


class TestQdrantServerLive(BackendSuite, HybridSuite, KeywordFillSuite, RerankSuite):
    """The shared layout: one memories collection, namespaces as tenants."""

    @pytest.fixture
    async def backend(self, qdrant: tuple[str, str | None]) -> AsyncIterator[VectorBackend]:
        async for backend in _live_backend(QdrantServerBackend, *qdrant):
            yield backend


class TestQdrantCollectionsLive(BackendSuite, HybridSuite, KeywordFillSuite, RerankSuite):
    """The `collections` layout: one collection per namespace."""

    @pytest.fixture
    async def backend(self, qdrant: tuple[str, str | None]) -> AsyncIterator[VectorBackend]:
        async for backend in _live_backend(QdrantCollectionsBackend, *qdrant):
            yield backend


async def test_cleanup_leaves_nothing_behind(qdrant: tuple[str, str | None]) -> None:
    """Runs after the suite (file order): no collection of this run survives."""
    url, api_key = qdrant
    assert await _delete_collections(url, api_key, RUN_PREFIX) == []
