"""Both Qdrant server layouts against a failing mocked server: `adapters.errors` only."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable
from collections.abc import Callable

import httpx
import pytest
import respx

from adapters.base import VectorBackend
from adapters.errors import BackendError
from adapters.errors import BackendUnavailable
from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.tenants import QdrantServerBackend
from adapters.values import MemoryFilter
from adapters.values import MemoryVectors
from tests.support.qdrant_rest import error
from tests.support.qdrant_rest import mock_shared_ready
from tests.support.qdrant_rest import ok
from tests.support.qdrant_server import NS
from tests.support.qdrant_server import URL
from tests.support.qdrant_server import record
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import dense
from tests.support.records import memory
from tests.support.records import unit

pytestmark = pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")


Operation = Callable[[VectorBackend], Awaitable[object]]
OPERATIONS: dict[str, Operation] = {
    "ping": lambda b: b.ping(),
    "get_namespace": lambda b: b.get_namespace(NS),
    "save_namespace": lambda b: b.save_namespace(record()),
    "delete_namespace": lambda b: b.delete_namespace(NS),
    "list_namespaces": lambda b: b.list_namespaces(),
    "expired_namespaces": lambda b: b.expired_namespaces(T0),
    "get_memory": lambda b: b.get_memory(NS, str(uuid.uuid4())),
    "upsert_memory": lambda b: b.upsert_memory(memory(NS), MemoryVectors(unit(1))),
    "query_memories": lambda b: b.query_memories([NS, "team:x"], dense(1), MemoryFilter(now=T0), 5),
    "list_memories": lambda b: b.list_memories([NS, "team:x"], MemoryFilter(now=T0), 5),
    "delete_memory": lambda b: b.delete_memory(NS, str(uuid.uuid4())),
    "delete_expired": lambda b: b.delete_expired_memories(T0),
    "maintain": lambda b: b.maintain(),
}


@pytest.mark.parametrize("operation", OPERATIONS.values(), ids=OPERATIONS.keys())
@pytest.mark.parametrize(
    "failure",
    [
        error(500, "Service internal error: boom"),
        error(502, "bad gateway"),
        error(503, "Service unavailable"),
        error(429, "Too many requests"),
        error(429, "Rate limiting exceeded", headers={"Retry-After": "2"}),
        error(
            429, "Rate limiting exceeded", headers={"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}
        ),
        httpx.ConnectError("[Errno 111] Connection refused"),
        httpx.ReadTimeout("timed out"),
    ],
    ids=[
        "500",
        "502",
        "503",
        "429",
        "429-retry-after",
        "429-retry-date",
        "refused",
        "read-timeout",
    ],
)
async def test_outages_are_backend_unavailable(
    mock: respx.MockRouter,
    backend: VectorBackend,
    operation: Operation,
    failure: httpx.Response | Exception,
) -> None:
    if isinstance(failure, httpx.Response):
        mock.route().mock(return_value=failure)
    else:
        mock.route().mock(side_effect=failure)
    if operation is OPERATIONS["maintain"] and isinstance(backend, QdrantCollectionsBackend):
        await operation(backend)  # nothing to do in that layout
        return
    with pytest.raises(BackendUnavailable):
        await operation(backend)
    assert mock.calls


async def test_read_timeout_fails_fast(mock: respx.MockRouter, backend: VectorBackend) -> None:
    route = mock.route().mock(side_effect=httpx.ReadTimeout("timed out"))
    started = time.monotonic()
    with pytest.raises(BackendUnavailable):
        await backend.list_memories([NS], MemoryFilter(now=T0), 5)
    assert time.monotonic() - started < 0.5
    assert route.call_count == 1  # no retries behind our back


@pytest.mark.parametrize(("timeout_s", "sent"), [(0.2, 1), (1.0, 1), (2.5, 3)])
async def test_timeout_is_whole_seconds_rounded_up(
    mock: respx.MockRouter, timeout_s: float, sent: int
) -> None:
    mock_shared_ready(mock, DIM)
    backend = QdrantServerBackend(DIM, url=URL, timeout_s=timeout_s)
    await backend.start()
    await backend.close()
    assert all(c.request.extensions["timeout"]["read"] == sent for c in mock.calls)


@pytest.mark.parametrize(
    "failure",
    [error(400, "Wrong input: bad"), error(401, "Unauthorized"), error(403, "Forbidden")],
    ids=["400", "401", "403"],
)
async def test_client_errors_are_backend_errors(
    mock: respx.MockRouter, backend: VectorBackend, failure: httpx.Response
) -> None:
    mock.route().mock(return_value=failure)
    with pytest.raises(BackendError) as caught:
        await backend.list_memories([NS], MemoryFilter(now=T0), 5)
    assert type(caught.value) is BackendError
    with pytest.raises(BackendUnavailable):  # ping says "not answering now" for any failure
        await backend.ping()


async def test_malformed_response_does_not_leak_sdk_types(
    mock: respx.MockRouter, backend: VectorBackend
) -> None:
    mock.route().mock(return_value=ok(True))
    with pytest.raises(BackendUnavailable):
        await backend.get_namespace(NS)


async def test_api_key_header_is_sent(mock: respx.MockRouter) -> None:
    mock_shared_ready(mock, DIM)
    backend = QdrantServerBackend(DIM, url=URL, api_key="s3cret")
    await backend.start()
    await backend.close()
    assert mock.calls
    assert all(c.request.headers["api-key"] == "s3cret" for c in mock.calls)


def test_constructor_wants_exactly_one_target() -> None:
    for kind in (QdrantServerBackend, QdrantCollectionsBackend):
        with pytest.raises(ValueError, match="exactly one"):
            kind(DIM)
        with pytest.raises(ValueError, match="exactly one"):
            kind(DIM, url=URL, location=":memory:")
