"""Health, unknown routes, methods, body limits, request ids and unexpected failures."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient
from aiohttp.test_utils import TestServer

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.values import NamespaceRecord
from harness.clocks import WallClock
from tests.support.app import AppFactory
from tests.support.app import ContractClient

pytestmark = [pytest.mark.every_backend, pytest.mark.shares_server]


async def test_health(api: ContractClient, backend_kind: str) -> None:
    reply = await api.call("GET", "/v1/health")
    sizes = reply.body.pop("sizes")  # beside the contract's fields: tests/test_sizing.py
    weights = reply.body.pop("rerank_weights", None)  # tests/http/test_rerank_weights.py
    assert weights in ({"uniform", "idf"} if backend_kind == "embedded" else {None})
    assert (reply.status, reply.body) == (
        200,
        {"status": "ok", "version": "1.0.0", "capabilities": ["embedding", "ttl", "pin"]},
    )
    assert set(sizes) == {"cpus", "embedding_sessions", "engine_workers"}


async def test_unknown_route(api: ContractClient) -> None:
    for path in ["/", "/v1", "/v1/healthz", "/v2/health", "/v1/namespaces"]:
        reply = await api.call("GET", path)
        assert (reply.status, reply.body) == (
            404,
            {"code": "not_found", "message": "no such route"},
        ), path


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("POST", "/v1/health", "GET, HEAD"),
        ("GET", "/v1/search", "POST"),
        ("GET", "/v1/namespaces/org:a", "DELETE, PATCH, PUT"),
        ("POST", "/v1/namespaces/org:a", "DELETE, PATCH, PUT"),
        ("GET", "/v1/memories/x", "DELETE"),
        ("PUT", "/v1/namespaces/org:a/memories", "POST"),
    ],
)
async def test_wrong_method(api: ContractClient, method: str, path: str, allowed: str) -> None:
    """405 names the methods the route takes, in the body and in `Allow` (RFC 9110)."""
    reply = await api.call(method, path)
    assert (reply.status, reply.body, reply.headers.get("Allow")) == (
        405,
        {
            "code": "bad_request",
            "message": f"method {method} not allowed on this route; allowed: {allowed}",
        },
        allowed,
    )


async def test_body_over_the_limit(make_app: AppFactory, clock: WallClock) -> None:
    app = make_app(max_body_bytes=2048)
    async with TestClient(TestServer(app)) as raw:
        api = ContractClient(raw, app, clock)
        await api.put_ns("org:a", "org")
        reply = await api.commit("org:a", "x" * 4096)
        assert (reply.status, reply.body) == (
            413,
            {"code": "bad_request", "message": "request body too large"},
        )
        assert (await api.commit("org:a", "x" * 1024)).status == 201
        assert len((await api.search("org:a", limit=100)).body["memories"]) == 1


async def test_request_id_is_honoured_or_minted(api: ContractClient) -> None:
    given = await api.call("GET", "/v1/health", headers={"X-Request-ID": "trace-42"})
    assert given.headers["X-Request-ID"] == "trace-42"
    minted = await api.call("GET", "/v1/health")
    assert len(minted.headers["X-Request-ID"]) == 32
    failed = await api.call("GET", "/nope", headers={"X-Request-ID": "trace-43"})
    assert failed.headers["X-Request-ID"] == "trace-43"


class ExplodingEdge(QdrantEdgeBackend):
    """The real embedded backend with a programming error in one read path."""

    async def get_namespace(self, name: str) -> NamespaceRecord | None:
        if name == "org:boom":
            raise RuntimeError("secret internal detail")
        return await super().get_namespace(name)


async def test_unexpected_error_is_internal_without_details(
    make_app: AppFactory, clock: WallClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(backend=ExplodingEdge(384, tmp_path / "boom"))
    async with TestClient(TestServer(app)) as raw:
        api = ContractClient(raw, app, clock)
        with caplog.at_level(logging.ERROR):
            reply = await api.put_ns("org:boom", "org")
        request_id = reply.headers["X-Request-ID"]
        assert (reply.status, reply.body) == (
            500,
            {
                "code": "internal",
                "message": f"internal error; see the plugin log for request {request_id}",
            },
        )
        assert "secret internal detail" not in str(reply.body)
        assert any(getattr(r, "request_id", None) == request_id for r in caplog.records)
        assert (await api.put_ns("org:fine", "org")).status == 200
