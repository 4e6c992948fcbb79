"""Shared fixtures: the real model (loaded once), and a plugin app per test.

`api` is an aiohttp test client wrapped so that every exchange is checked
against the contract before the test sees it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from adapters.base import VectorBackend
from adapters.pinecone import PineconeBackend
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.http.app import create_app
from plugin.settings import Settings
from tests.contract import assert_conforms
from tests.pinecone_fake import FakePinecone


@pytest.fixture(scope="session")
def encoder() -> SentenceTransformerEncoder:
    return SentenceTransformerEncoder.load()


class FakeClock:
    """Wall-clock time plus an offset the test can move forward."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, **kwargs: float) -> None:
        self.offset += timedelta(**kwargs)


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]


class ContractClient:
    """Sends requests and asserts each reply conforms to the contract."""

    def __init__(self, client: TestClient[Any, Any], app: web.Application, clock: FakeClock):
        self.client = client
        self.app = app
        self.clock = clock

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        check: bool = True,
    ) -> Reply:
        data = raw if raw is not None else (None if body is None else json.dumps(body))
        async with self.client.request(method, path, data=data, headers=headers) as response:
            text = await response.read()
            parsed = json.loads(text) if text else None
            reply = Reply(response.status, parsed, dict(response.headers))
        if check:
            assert_conforms(method, path, reply.status, reply.body)
        return reply

    async def put_ns(self, name: str, kind: str = "workspace", **fields: Any) -> Reply:
        return await self.call("PUT", f"/v1/namespaces/{name}", {"kind": kind, **fields})

    async def commit(self, name: str, content: str, **fields: Any) -> Reply:
        body = {"content": content, "kind": "fact", "source": "agent", **fields}
        return await self.call("POST", f"/v1/namespaces/{name}/memories", body)

    async def search(self, *namespaces: str, **fields: Any) -> Reply:
        return await self.call("POST", "/v1/search", {"namespaces": list(namespaces), **fields})


AppFactory = Callable[..., web.Application]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", janitor_interval_s=3600)


@pytest.fixture
def make_app(
    encoder: SentenceTransformerEncoder, settings: Settings, clock: FakeClock
) -> AppFactory:
    def build(backend: VectorBackend | None = None, **overrides: Any) -> web.Application:
        chosen = settings.model_copy(update=overrides) if overrides else settings
        return create_app(chosen, encoder=encoder, backend=backend, clock=clock)

    return build


BACKEND_KINDS = ("embedded", "pinecone", "pinecone-lagging")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`pytestmark = pytest.mark.every_backend` runs a module's `api` tests on each backend."""
    if "backend_kind" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "every_backend"
    ):
        metafunc.parametrize("backend_kind", BACKEND_KINDS)


@pytest.fixture
def backend_kind() -> str:
    """Which store `api` runs on; modules marked `every_backend` get all of BACKEND_KINDS.

    - embedded: the real qdrant-edge store on disk (the default backend).
    - pinecone: PineconeBackend against the HTTP-level fake, every write visible at once.
    - pinecone-lagging: the same, but Pinecone shows no write made during the test, so
      every fresh read is served by the read-your-writes overlay.
    """
    return "embedded"


@pytest.fixture
async def api(
    make_app: AppFactory, clock: FakeClock, backend_kind: str, settings: Settings
) -> AsyncIterator[ContractClient]:
    if backend_kind == "embedded":
        app = make_app()
        async with TestClient(TestServer(app)) as client:
            yield ContractClient(client, app, clock)
        return
    lag = 3600.0 if backend_kind == "pinecone-lagging" else 0.0
    with FakePinecone(dimension=384, visibility_delay_s=lag).mocked() as fake:
        backend = PineconeBackend(
            384,
            api_key=fake.api_key,
            index_name=fake.name,
            timeout_s=settings.backend_timeout_s,
        )
        app = make_app(backend=backend)
        async with TestClient(TestServer(app)) as client:
            yield ContractClient(client, app, clock)
