"""A Qdrant server that is down, hangs, or comes back: through the whole app.

The platform's client times out at 2 s and opens its breaker after 3 failures,
so every endpoint must answer 503 `unavailable` well inside 2 s, the server must
boot while the backend is down, and recover without a restart. The server is
mocked at the HTTP level (respx), with the REST shapes of tests/support/qdrant_rest.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx

from adapters.qdrant.server.tenants import QdrantServerBackend
from harness.clocks import WallClock
from tests.support.app import AppFactory
from tests.support.app import ContractClient
from tests.support.app import served
from tests.support.qdrant_rest import mock_shared_ready
from tests.support.qdrant_rest import ok

URL = "http://qdrant.test:6333"
NS = "workspace:abc"
MEMORY_ID = "11111111-2222-4333-8444-555555555555"
CALLS: list[tuple[str, str, Any]] = [
    ("GET", "/v1/health", None),
    ("PUT", f"/v1/namespaces/{NS}", {"kind": "workspace"}),
    ("PATCH", f"/v1/namespaces/{NS}", {"metadata": {}}),
    ("DELETE", f"/v1/namespaces/{NS}", None),
    ("POST", f"/v1/namespaces/{NS}/memories", {"content": "c", "kind": "fact", "source": "agent"}),
    ("POST", "/v1/search", {"namespaces": [NS], "query": "anything"}),
    ("DELETE", f"/v1/memories/{MEMORY_ID}", {"requested_by_namespace": NS}),
]


@pytest.fixture
async def mock() -> AsyncIterator[respx.MockRouter]:
    with respx.mock(base_url=URL, assert_all_called=False) as router:
        yield router


@pytest.fixture
async def api(
    make_app: AppFactory, clock: WallClock, mock: respx.MockRouter
) -> AsyncIterator[ContractClient]:
    async for api in served(
        make_app, clock, backend=QdrantServerBackend(384, url=URL, timeout_s=1.0)
    ):
        yield api


async def expect_503_fast(api: ContractClient) -> None:
    for method, path, body in CALLS:
        started = time.monotonic()
        reply = await api.call(method, path, body)
        elapsed = time.monotonic() - started
        assert reply.status == 503, (method, path, reply.body)
        assert reply.body["code"] == "unavailable"
        assert elapsed < 2.0, (method, path, elapsed)


async def test_connection_refused(api: ContractClient, mock: respx.MockRouter) -> None:
    mock.route().mock(side_effect=httpx.ConnectError("connection refused"))
    await expect_503_fast(api)
    health = await api.call("GET", "/v1/health")
    assert health.body == {
        "status": "degraded",
        "version": "1.0.0",
        "capabilities": ["embedding", "ttl", "pin"],
        "sizes": health.body["sizes"] | {"engine_workers": None},  # a server has none
        "rerank_weights": "uniform",  # its token fill has not reached the server
        "code": "unavailable",
        "message": health.body["message"],
    }
    assert "connection refused" in health.body["message"]


async def test_hanging_backend_is_cut_at_the_deadline(
    api: ContractClient, mock: respx.MockRouter
) -> None:
    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        raise AssertionError("never answered")

    mock.route().mock(side_effect=hang)
    await expect_503_fast(api)


async def test_recovers_when_the_backend_returns(
    api: ContractClient, mock: respx.MockRouter
) -> None:
    outage = mock.route().mock(side_effect=httpx.ConnectError("connection refused"))
    for _ in range(3):
        assert (await api.call("GET", "/v1/health")).status == 503
    outage.side_effect = None
    mock.routes.clear()
    mock_shared_ready(mock, 384)
    mock.post("/collections/memory-namespaces/points").mock(return_value=ok([]))
    assert (await api.call("GET", "/v1/health")).body["status"] == "ok"
    reply = await api.call("POST", "/v1/search", {"namespaces": [NS], "query": "x"})
    assert (reply.status, reply.body) == (200, {"memories": []})
